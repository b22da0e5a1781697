/* SPDX-License-Identifier: Apache-2.0 */
/* The memory a command needs against the room there is. */
#include <stdio.h>
#include <sys/statvfs.h>

#include "args.h"
#include "mapping.h"
#include "room.h"

void room_hold(struct room_need *n, enum sseg_pages kind, uint64_t bytes)
{
	uint64_t whole = pages_round(kind, bytes);

	if (!pages_hugetlb(kind)) {
		n->ordinary += whole;
		return;
	}
	n->hugetlb += whole;
	n->hugetlb_kind = kind;
}

enum sseg_pages room_segment_pages(enum sseg_pages kind, uint64_t size)
{
	struct sseg_probe p = { .sz = sizeof(p) };

	if (kind != SSEG_PAGES_AUTO || sseg_probe(size, &p))
		return kind;
	return p.auto_pages;
}

/* One place memory comes from: what is needed there, what is free, in
 * words, and what to do when it is short. */
struct room {
	uint64_t need, free;
	char said[160];
	const char *remedy;
};

/* Free pages of the pool kind draws from, in bytes. */
static uint64_t pool_free(const struct sseg_probe *p, enum sseg_pages kind)
{
	uint64_t page = pages_size(kind);

	for (int i = 0; i < p->npools; i++)
		if (p->pools[i].page_size == page)
			return p->pools[i].free > p->pools[i].reserved
				       ? (p->pools[i].free - p->pools[i].reserved) * page : 0;
	return 0;
}

static uint64_t dir_free(const char *dir)
{
	struct statvfs fs;

	return statvfs(dir, &fs) ? UINT64_MAX : (uint64_t)fs.f_bavail * fs.f_frsize;
}

static void host_room(const struct room_need *n, const struct sseg_probe *p, struct room *r)
{
	char avail[32];

	cli_format_size(p->mem_available, avail, sizeof(avail));
	*r = (struct room){ n->ordinary, p->mem_available, "", "use a smaller --size" };
	snprintf(r->said, sizeof(r->said), "the %s of memory available on this host (MemAvailable)",
		 avail);
}

static void cgroup_room(const struct room_need *n, const struct sseg_probe *p, struct room *r)
{
	char limit[32], used[32];

	cli_format_size(p->cgroup_limit, limit, sizeof(limit));
	cli_format_size(p->cgroup_usage, used, sizeof(used));
	*r = (struct room){ p->cgroup_limit ? n->ordinary : 0,
			    p->cgroup_limit > p->cgroup_usage ? p->cgroup_limit - p->cgroup_usage : 0,
			    "", "use a smaller --size or raise the cgroup's limit" };
	snprintf(r->said, sizeof(r->said),
		 "this process's memory cgroup allows (limit %s, %s in use)", limit, used);
}

static void pool_room(const struct room_need *n, const struct sseg_probe *p, struct room *r)
{
	char left[32];

	*r = (struct room){ n->hugetlb, pool_free(p, n->hugetlb_kind), "",
			    "use a smaller --size or add pages to the pool (sharedseg probe says "
			    "how)" };
	cli_format_size(r->free, left, sizeof(left));
	snprintf(r->said, sizeof(r->said), "the %s free in the pool of %s pages", left,
		 sseg_pages_name(n->hugetlb_kind));
}

static void dir_room(const struct room_need *n, struct room *r)
{
	char left[32];

	*r = (struct room){ n->dir ? n->in_dir : 0, n->dir ? dir_free(n->dir) : 0, "",
			    "use a smaller --size or remount it larger (mount -o remount,size=...)" };
	cli_format_size(r->free, left, sizeof(left));
	snprintf(r->said, sizeof(r->said), "the %s free in %s", left, n->dir ? n->dir : "");
}

int room_check(const struct room_need *n, const char *what, uint64_t size)
{
	struct sseg_probe p = { .sz = sizeof(p) };
	struct room rooms[4];
	char sz[32], need[32];

	if (sseg_probe(0, &p))
		return 0; /* nothing to judge by: the kernel's word stands */
	host_room(n, &p, &rooms[0]);
	cgroup_room(n, &p, &rooms[1]);
	pool_room(n, &p, &rooms[2]);
	dir_room(n, &rooms[3]);
	for (int i = 0; i < 4; i++) {
		if (rooms[i].need <= rooms[i].free)
			continue;
		cli_format_size(size, sz, sizeof(sz));
		cli_format_size(rooms[i].need, need, sizeof(need));
		fprintf(stderr, "sharedseg bench: %s at --size %s needs %s at once, more than %s: "
			"refused before allocating; %s\n", what, sz, need, rooms[i].said,
			rooms[i].remedy);
		return 2;
	}
	return 0;
}
