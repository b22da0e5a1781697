/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keeper.h"
#include "list_pools.h"
#include "pool/pool.h"
#include "os/file.h"
#include "os/named.h"
#include "util.h"

/* Every keeper socket in the runtime directory, however many a host has
 * (a keeper killed leaves its socket: hundreds after a test run). */
struct rundir_names {
	char (*keepers)[SSEG_NAME_MAX + 1];
	int nkeepers, cap;
	char (*pools)[SSEG_NAME_MAX + 1];
	int npools, pools_cap;
};

/* Appends name to names (n of them, room for *cap), grown as it fills;
 * false where memory ran out. */
static bool add_name(char (**names)[SSEG_NAME_MAX + 1], int *n, int *cap, const char *name)
{
	if (*n == *cap) {
		void *more = sseg_list_grown(*names, cap, sizeof(**names));

		if (!more)
			return false;
		*names = more;
	}
	snprintf((*names)[(*n)++], SSEG_NAME_MAX + 1, "%s", name);
	return true;
}

/* The pools' record files (pool.NAME). Read before the keepers' sockets:
 * a pool is left with a keeper that runs, so every keeper that can hold a
 * pool listed here is in the keepers read after (a listing that reads a
 * keeper's socket before the pool's record would take a new keeper's pool
 * for a gone one's). Reads d through; the caller rewinds it. */
static void find_pools(DIR *d, struct rundir_names *r)
{
	struct dirent *e;

	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "pool.", 5) || !e->d_name[5] ||
		    strlen(e->d_name + 5) > SSEG_NAME_MAX)
			continue;
		if (!add_name(&r->pools, &r->npools, &r->pools_cap, e->d_name + 5))
			return;
	}
}

/* The keepers that listen in the runtime directory: their socket files.
 * Reads d through; the caller rewinds it. */
static void find_keepers(DIR *d, struct rundir_names *r)
{
	struct dirent *e;

	while ((e = readdir(d))) {
		struct stat st;

		if (strncmp(e->d_name, "keep-", 5) || strchr(e->d_name, '.') ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISSOCK(st.st_mode))
			continue;
		if (!add_name(&r->keepers, &r->nkeepers, &r->cap, e->d_name + 5))
			return;
	}
}

/* A keeper's answer, within 1 s: one stopped costs a listing that, not
 * the 10 s an engine gives it. */
#define LIST_KEEPER_S 1.0

/* The memfd of a segment named name that keeper lends, or -1; *unsure
 * set where the keeper gave no answer (stopped, slow). */
static int lent_by(const char *keeper, const char *name, bool *unsure)
{
	uint64_t size;
	int fd, rc = sseg_keeper_lend_by(keeper, name, &fd, &size, sseg_now() + LIST_KEEPER_S);

	if (rc && rc != -ENOENT && rc != -ECONNREFUSED && unsure)
		*unsure = true;
	return rc ? -1 : fd;
}

/* The keeper that holds the pool whose memfd is inode ino, if one does. */
static void kept_by(const struct rundir_names *r, const char *pool, uint64_t ino, char *out)
{
	for (int i = 0; i < r->nkeepers; i++) {
		struct stat st;
		int fd = lent_by(r->keepers[i], pool, NULL);

		if (fd < 0)
			continue;
		if (!fstat(fd, &st) && (uint64_t)st.st_ino == ino)
			snprintf(out, SSEG_NAME_MAX + 1, "%s", r->keepers[i]);
		close(fd);
		if (out[0])
			return;
	}
}

/* Pool name, opened map-only: from a live process, else from a keeper
 * that lends one of that name. The open names no other keeper: one that
 * finds the pool in a process (opened meanwhile) would leave it with the
 * keeper it names where that keeper holds none of the name. A name that
 * no process has open and every keeper answered it holds none of is a
 * kept pool whose keeper is gone: its record file goes. */
static sseg_pool_t *open_listed(const char *name, const struct rundir_names *r)
{
	SSEG_POOL_OPTS(o, .name = name, .flags = SSEG_POOL_OBSERVE, .timeout_ms = 2000);
	sseg_pool_t *p = NULL;
	bool unsure = false;
	int rc = sseg_pool_open(&o, &p);

	if (!rc)
		return p;
	if (rc != -ENOENT)
		unsure = true; /* its lock busy, or its memfd unreadable: not known gone */
	for (int i = 0; i < r->nkeepers && !p; i++) {
		int fd = lent_by(r->keepers[i], name, &unsure);

		if (fd < 0)
			continue;
		close(fd);
		o.keeper = r->keepers[i];
		if (sseg_pool_open(&o, &p))
			unsure = true;
	}
	if (!p && !unsure)
		pool_forget_stale(name);
	return p;
}

static void describe(struct sseg_list *l, sseg_pool_t *p, const struct rundir_names *r)
{
	struct sseg_listed_pool *x, *more;

	if (l->npools == l->pools_cap) {
		more = sseg_list_grown(l->pools, &l->pools_cap, sizeof(*l->pools));
		if (!more)
			return;
		l->pools = more;
	}
	x = &l->pools[l->npools];
	memset(x, 0, sizeof(*x));
	x->info.sz = sizeof(x->info);
	if (sseg_pool_info(p, &x->info) || sseg_pool_attached(p, x->pids))
		return;
	for (int s = 0; s < (int)SSEG_POOL_SLOTS; s++) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/comm", x->pids[s]);
		if (x->pids[s] && sseg_os_read_text(path, x->comms[s], sizeof(x->comms[s])))
			x->comms[s][0] = '\0';
	}
	kept_by(r, x->info.name, x->info.inode, x->kept_by);
	l->npools++;
}

void sseg_list_pools(struct sseg_list *l)
{
	char path[SSEG_OS_NAMED_PATH];
	struct rundir_names *r;
	DIR *d;

	if (sseg_os_rundir(path, sizeof(path)) || !(d = opendir(path)))
		return;
	r = calloc(1, sizeof(*r));
	if (r) {
		find_pools(d, r);
		rewinddir(d);
		find_keepers(d, r);
	}
	for (int i = 0; r && i < r->npools; i++) {
		sseg_pool_t *p = open_listed(r->pools[i], r);

		if (p)
			describe(l, p, r);
		sseg_pool_close(p);
	}
	if (r) {
		free(r->keepers);
		free(r->pools);
	}
	free(r);
	closedir(d);
	sseg_err_clear();
}

static void pool_facts(struct sseg_json *j, const struct sseg_listed_pool *x)
{
	const struct sseg_pool_info *in = &x->info;

	sseg_json_begin(j, NULL, '{');
	sseg_json_str(j, "name", in->name);
	sseg_json_str(j, "meaning", in->meaning);
	sseg_json_u64(j, "inode", in->inode);
	sseg_json_u64(j, "chunk_size", in->chunk_size);
	sseg_json_u64(j, "chunks", in->chunks);
	sseg_json_u64(j, "size", in->size);
	sseg_json_str(j, "pages", sseg_pages_name(in->pages));
	sseg_json_u64(j, "page_size", in->page_size);
	sseg_json_u64(j, "used", in->used);
	sseg_json_u64(j, "filling", in->filling);
	sseg_json_u64(j, "free", in->free);
	sseg_json_u64(j, "pinned", in->pinned);
	sseg_json_u64(j, "hits", in->hits);
	sseg_json_u64(j, "misses", in->misses);
	sseg_json_u64(j, "stores", in->stores);
	sseg_json_u64(j, "evictions", in->evictions);
	sseg_json_u64(j, "reclaims", in->reclaims);
	sseg_json_u64(j, "duplicates", in->duplicates);
	sseg_json_u64(j, "resets", in->resets);
	sseg_json_str(j, "last_reset", in->last_reset[0] ? in->last_reset : NULL);
	sseg_json_str(j, "kept_by", x->kept_by[0] ? x->kept_by : NULL);
	sseg_json_begin(j, "processes", '[');
	for (int s = 0; s < (int)SSEG_POOL_SLOTS; s++) {
		if (!x->pids[s])
			continue;
		sseg_json_begin(j, NULL, '{');
		sseg_json_int(j, "pid", x->pids[s]);
		sseg_json_int(j, "slot", s);
		sseg_json_str(j, "comm", x->comms[s]);
		sseg_json_end(j, '}');
	}
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
}

void sseg_list_pools_document(struct sseg_json *j, const struct sseg_list *l)
{
	sseg_json_begin(j, "pools", '[');
	for (int i = 0; i < l->npools; i++)
		pool_facts(j, &l->pools[i]);
	sseg_json_end(j, ']');
}
