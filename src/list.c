/* SPDX-License-Identifier: Apache-2.0 */
/* sseg_list_json: every live segment on this host, as the kernel shows it,
 * for operators (`sharedseg ls`, Python's list_segments()). No daemon and
 * no registry file: memfd mappings named "/memfd:sseg:NAME" in each
 * process's smaps, the "/memfd:sseg-tag:NAME rank=R world=W owner=O" page
 * every rank's window ends with, memfds still held as descriptors, and
 * numa_maps. A process whose /proc files this user may not read is not
 * seen (root sees every user's). */
#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "json.h"
#include "list.h"
#include "tag.h"

#define MEMFD_PREFIX "/memfd:" SSEG_MEMFD_LABEL
#define TAG_PREFIX "/memfd:" SSEG_TAG_LABEL

/* ---- what one pass over /proc found ---- */

/* A new, empty entry at the end of the list. */
static struct sseg_listed *append_segment(struct sseg_list *l, const char *name)
{
	struct sseg_listed *s;

	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 8;
		void *more = realloc(l->segs, (size_t)cap * sizeof(*l->segs));

		if (!more)
			return NULL;
		l->segs = more;
		l->cap = cap;
	}
	s = &l->segs[l->n++];
	memset(s, 0, sizeof(*s));
	s->owner_rank = -1;
	s->world = -1;
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->backend, sizeof(s->backend), "memfd");
	return s;
}

static struct sseg_listed *segment_for(struct sseg_list *l, uint64_t dev, uint64_t ino,
				       const char *name)
{
	struct sseg_listed *s;

	for (int i = 0; i < l->n; i++)
		if (l->segs[i].dev == dev && l->segs[i].ino == ino)
			return &l->segs[i];
	s = append_segment(l, name);
	if (s) {
		s->dev = dev;
		s->ino = ino;
	}
	return s;
}

static struct sseg_holder *holder_for(struct sseg_listed *s, int pid)
{
	struct sseg_holder *h;

	for (int i = 0; i < s->nholders; i++)
		if (s->holders[i].pid == pid)
			return &s->holders[i];
	if (s->nholders == SSEG_LIST_MAX_HOLDERS)
		return NULL;
	h = &s->holders[s->nholders++];
	memset(h, 0, sizeof(*h));
	h->pid = pid;
	h->rank = -1;
	return h;
}

/* "/memfd:sseg:NAME (deleted)" -> NAME */
static void memfd_name(const char *path, char *name, size_t len)
{
	const char *start = path + strlen(MEMFD_PREFIX);
	const char *end = strstr(start, " (deleted)");
	size_t n = end ? (size_t)(end - start) : strlen(start);

	snprintf(name, len, "%.*s", (int)(n < len ? n : len - 1), start);
}

/* ---- one process ---- */

struct vma {
	uint64_t start, end, dev, ino;
	char perms[5];
	char path[256];
};

static bool parse_vma(const char *line, struct vma *v)
{
	unsigned maj, min;
	unsigned long long start, end, off, ino;
	int used = 0;

	if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, v->perms, &off, &maj,
		   &min, &ino, &used) < 7)
		return false;
	v->start = start;
	v->end = end;
	v->dev = (uint64_t)maj << 32 | min;
	v->ino = ino;
	snprintf(v->path, sizeof(v->path), "%s", line + used);
	v->path[strcspn(v->path, "\n")] = '\0';
	return true;
}

/* A tag page of driver memory: "... backend=B size=S pages=P page=Z". The
 * segment is the one of that name, size and group; the rank is the
 * process's. */
static void driver_tag(struct sseg_list *l, const char *name, const char *rest, int pid,
		       int rank, int world, int owner)
{
	char backend[16], pages[16];
	unsigned long long size, page;
	struct sseg_listed *s = NULL;
	struct sseg_holder *h;

	if (sscanf(rest, " backend=%15s size=%llu pages=%15s page=%llu", backend, &size, pages,
		   &page) != 4)
		return;
	for (int i = 0; i < l->n && !s; i++)
		if (!l->segs[i].dev && !l->segs[i].ino && !strcmp(l->segs[i].name, name) &&
		    l->segs[i].size == size && l->segs[i].world == world &&
		    !strcmp(l->segs[i].backend, backend))
			s = &l->segs[i];
	if (!s) {
		s = append_segment(l, name);
		if (!s)
			return;
		snprintf(s->backend, sizeof(s->backend), "%s", backend);
		snprintf(s->pages, sizeof(s->pages), "%s", pages);
		s->size = size;
		s->page_size = page;
		s->world = world;
		s->owner_rank = owner;
	}
	h = holder_for(s, pid);
	if (h) {
		h->rank = rank;
		h->mapped = size;
	}
}

/* "/memfd:sseg-tag:NAME rank=R world=W owner=O[ backend=...] (deleted)" */
static void parse_tag(struct sseg_list *l, const struct vma *v, int pid)
{
	const char *p = v->path + strlen(TAG_PREFIX);
	const char *sp = strstr(p, " rank=");
	char name[SSEG_NAME_MAX + 1];
	int rank, world, owner, used = 0;

	if (!sp || sscanf(sp, " rank=%d world=%d owner=%d%n", &rank, &world, &owner, &used) != 3)
		return;
	snprintf(name, sizeof(name), "%.*s", (int)(sp - p), p);
	if (!strncmp(sp + used, " backend=", 9)) {
		driver_tag(l, name, sp + used, pid, rank, world, owner);
		return;
	}
	/* The tag ends the window the rank's mapping of the segment starts. */
	for (int i = 0; i < l->n; i++) {
		struct sseg_listed *s = &l->segs[i];

		for (int h = 0; h < s->nholders; h++) {
			struct sseg_holder *x = &s->holders[h];

			if (x->pid != pid || x->rank >= 0 || x->map_end > v->start ||
			    strcmp(s->name, name))
				continue;
			x->rank = rank;
			s->world = world;
			s->owner_rank = owner;
			return;
		}
	}
}

static void add_field(struct sseg_holder *h, const char *line)
{
	unsigned long long kb;

	if (sscanf(line, "Rss: %llu kB", &kb) == 1)
		h->resident += kb << 10;
	else if (sscanf(line, "Shared_Hugetlb: %llu kB", &kb) == 1 ||
		 sscanf(line, "Private_Hugetlb: %llu kB", &kb) == 1)
		h->resident += kb << 10;
	else if (sscanf(line, "ShmemPmdMapped: %llu kB", &kb) == 1)
		h->thp += kb << 10;
	else if (sscanf(line, "KernelPageSize: %llu kB", &kb) == 1)
		h->page_size = kb << 10;
}

static void scan_smaps(struct sseg_list *l, int pid, FILE *f)
{
	struct sseg_holder *cur = NULL;
	char line[512];
	struct vma v;

	while (fgets(line, sizeof(line), f)) {
		if (!parse_vma(line, &v)) {
			if (cur)
				add_field(cur, line);
			continue;
		}
		cur = NULL;
		if (!strncmp(v.path, MEMFD_PREFIX, strlen(MEMFD_PREFIX))) {
			char name[SSEG_NAME_MAX + 1];
			struct sseg_listed *s;

			memfd_name(v.path, name, sizeof(name));
			s = segment_for(l, v.dev, v.ino, name);
			cur = s ? holder_for(s, pid) : NULL;
			if (cur) {
				cur->mapped += v.end - v.start;
				cur->map_start = v.start;
				cur->map_end = v.end;
				cur->readonly = v.perms[1] != 'w';
			}
		} else if (!strncmp(v.path, TAG_PREFIX, strlen(TAG_PREFIX))) {
			parse_tag(l, &v, pid);
		}
	}
}

/* Descriptors that hold a segment's memfd (an owner before the hand-over,
 * or a leak): the file's allocated size is what it holds. */
static void scan_fds(struct sseg_list *l, int pid)
{
	char dir[64], link[512], target[512];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		struct sseg_listed *s;
		struct sseg_holder *h;
		char name[SSEG_NAME_MAX + 1];
		struct stat st;
		ssize_t n;

		snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strncmp(target, MEMFD_PREFIX, strlen(MEMFD_PREFIX)) || stat(link, &st))
			continue;
		memfd_name(target, name, sizeof(name));
		s = segment_for(l, (uint64_t)major(st.st_dev) << 32 | minor(st.st_dev), st.st_ino,
				name);
		h = s ? holder_for(s, pid) : NULL;
		if (!h)
			continue;
		h->fd = true;
		s->size = (uint64_t)st.st_size;
		s->allocated = (uint64_t)st.st_blocks * 512;
	}
	if (d)
		closedir(d);
}

/* numa_maps: "ADDR POLICY file=/memfd:sseg:... N0=12 N1=4 ..." */
static void scan_numa(struct sseg_list *l, int pid, FILE *f)
{
	char line[1024];

	while (fgets(line, sizeof(line), f)) {
		unsigned long long addr = strtoull(line, NULL, 16);

		for (int i = 0; i < l->n; i++)
			for (int h = 0; h < l->segs[i].nholders; h++) {
				const struct sseg_holder *x = &l->segs[i].holders[h];

				if (x->pid != pid || x->map_start != addr)
					continue;
				for (const char *p = strstr(line, " N"); p; p = strstr(p + 1, " N")) {
					int node = -1;

					if (sscanf(p, " N%d=", &node) == 1 && node >= 0 && node < 64)
						l->segs[i].numa_nodes |= 1ull << node;
				}
			}
	}
}

static FILE *open_proc(int pid, const char *what)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	return fopen(path, "re");
}

/* Whether pid maps a memfd segment: only then is its numa_maps (a walk of
 * its page tables) worth reading. */
static bool maps_a_segment(const struct sseg_list *l, int pid)
{
	for (int i = 0; i < l->n; i++)
		for (int h = 0; h < l->segs[i].nholders; h++)
			if (l->segs[i].holders[h].pid == pid && l->segs[i].holders[h].map_start)
				return true;
	return false;
}

static void scan_process(struct sseg_list *l, int pid)
{
	FILE *f = open_proc(pid, "smaps");

	if (!f)
		return; /* gone, or not ours to read */
	scan_smaps(l, pid, f);
	fclose(f);
	scan_fds(l, pid);
	if (!maps_a_segment(l, pid))
		return;
	f = open_proc(pid, "numa_maps");
	if (f) {
		scan_numa(l, pid, f);
		fclose(f);
	}
}

int sseg_list_scan(struct sseg_list *l)
{
	struct dirent *e;
	DIR *d = opendir("/proc");

	memset(l, 0, sizeof(*l));
	if (!d)
		return sseg_err(-errno, "cannot read /proc: %s", strerror(errno));
	while ((e = readdir(d)))
		if (isdigit((unsigned char)e->d_name[0]))
			scan_process(l, atoi(e->d_name));
	closedir(d);
	return 0;
}

void sseg_list_free(struct sseg_list *l)
{
	free(l->segs);
	memset(l, 0, sizeof(*l));
}

/* ---- JSON ---- */

static void process_facts(struct sseg_json *j, const struct sseg_holder *h, bool resident_known)
{
	char path[64], comm[64] = "";
	uint64_t uid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", h->pid);
	f = fopen(path, "re");
	if (f && fgets(comm, sizeof(comm), f))
		comm[strcspn(comm, "\n")] = '\0';
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "/proc/%d", h->pid);
	{
		struct stat st;

		if (!stat(path, &st))
			uid = st.st_uid;
	}
	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "pid", h->pid);
	sseg_json_u64(j, "uid", uid);
	sseg_json_str(j, "comm", comm);
	sseg_json_opt_int(j, "rank", h->rank);
	sseg_json_u64(j, "mapped_bytes", h->mapped);
	sseg_json_opt_int(j, "resident_bytes", resident_known ? (long long)h->resident : -1);
	sseg_json_bool(j, "holds_fd", h->fd);
	sseg_json_bool(j, "readonly", h->mapped && h->readonly);
	sseg_json_end(j, '}');
}

/* What a segment is made of, from its mappers: page kind and size. */
static void page_facts(const struct sseg_listed *s, const char **kind, uint64_t *page,
		       uint64_t *resident, uint64_t *size)
{
	uint64_t thp = 0;

	*kind = "base";
	*page = 4096;
	*resident = s->allocated;
	*size = s->size;
	for (int h = 0; h < s->nholders; h++) {
		const struct sseg_holder *x = &s->holders[h];

		if (x->page_size > *page)
			*page = x->page_size;
		if (x->thp > thp)
			thp = x->thp;
		if (!s->allocated && x->resident > *resident)
			*resident = x->resident;
		if (!*size && x->mapped > *size)
			*size = x->mapped;
	}
	if (*page == (2u << 20))
		*kind = "hugetlb-2M";
	else if (*page == (1u << 30))
		*kind = "hugetlb-1G";
	else if (thp)
		*kind = "thp";
}

static void segment_facts(struct sseg_json *j, const struct sseg_listed *s)
{
	uint64_t page, resident, size;
	const struct sseg_holder *owner = NULL;
	bool mapped = false;
	const char *kind;

	for (int h = 0; h < s->nholders; h++) {
		mapped |= s->holders[h].mapped > 0;
		if (s->owner_rank >= 0 && s->holders[h].rank == s->owner_rank)
			owner = &s->holders[h];
	}
	page_facts(s, &kind, &page, &resident, &size);
	sseg_json_begin(j, NULL, '{');
	sseg_json_str(j, "name", s->name);
	/* Driver memory: no inode, and /proc does not show what is resident. */
	sseg_json_opt_int(j, "inode", s->ino ? (long long)s->ino : -1);
	sseg_json_str(j, "backend", s->backend);
	sseg_json_u64(j, "size", size);
	sseg_json_str(j, "pages", s->pages[0] ? s->pages : kind);
	sseg_json_u64(j, "page_size", s->page_size ? s->page_size : page);
	sseg_json_opt_int(j, "resident_bytes", s->ino ? (long long)resident : -1);
	sseg_json_begin(j, "numa_nodes", '[');
	for (int n = 0; n < 64; n++)
		if (s->numa_nodes & (1ull << n))
			sseg_json_int(j, NULL, n);
	sseg_json_end(j, ']');
	sseg_json_opt_int(j, "world_size", s->world);
	sseg_json_opt_int(j, "owner_rank", s->owner_rank);
	sseg_json_opt_int(j, "owner_pid", owner ? owner->pid : -1);
	/* Mapped by nobody, held only by a descriptor: a leak to look at. */
	sseg_json_bool(j, "unmapped", !mapped);
	sseg_json_begin(j, "processes", '[');
	for (int h = 0; h < s->nholders; h++)
		process_facts(j, &s->holders[h], s->ino != 0);
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
}

static void document(struct sseg_json *j, const void *ctx)
{
	const struct sseg_list *l = ctx;

	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "schema", 1);
	sseg_json_begin(j, "segments", '[');
	for (int i = 0; i < l->n; i++)
		segment_facts(j, &l->segs[i]);
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
}

int sseg_list_json(char *buf, size_t len)
{
	struct sseg_list l;
	int rc;

	if (!buf && len)
		return sseg_err(-EINVAL, "sseg_list_json: buf is NULL but len is %zu", len);
	rc = sseg_list_scan(&l);
	if (rc)
		return rc;
	rc = sseg_json_render(document, &l, buf, len);
	sseg_list_free(&l);
	return rc;
}
