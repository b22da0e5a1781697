/* SPDX-License-Identifier: Apache-2.0 */
/* sseg_list_json: every live segment on this host, as the kernel shows it,
 * for operators (`sharedseg ls`, Python's list_segments()). No daemon and
 * no registry file: memfd mappings named "/memfd:sseg:NAME" in each
 * process's smaps, the "/memfd:sseg-tag:NAME rank=R world=W owner=O" page
 * every rank's window ends with, memfds still held as descriptors, and
 * numa_maps. A process whose /proc files this user may not read is not
 * seen (root sees every user's).
 *
 * Root's listing shows every user's processes, so each is read as hostile:
 * a mapping is a whole line of smaps (a name cannot forge one), a tag gives
 * a rank only to the mapping its window starts with, driver memory is keyed
 * by its ranks' uid as well, each process's files are read through one
 * open /proc/PID (a reused pid is not mixed in), its uid and command are
 * taken while it is scanned, and the work is linear in what is found, up
 * to the caps in list.h. */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
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
#define DELETED " (deleted)"

/* ---- the list: segments found by key, holders and processes in arrays ---- */

static void *grown(void *items, int *cap, size_t size)
{
	int more = *cap ? *cap * 2 : 64;
	void *p = realloc(items, (size_t)more * size);

	if (p)
		*cap = more;
	return p;
}

/* Room in the index for one more segment, keeping it at most half full. */
static bool index_room(struct sseg_list *l)
{
	size_t cap = l->index_cap ? l->index_cap : 256;
	int *index;

	if ((size_t)(l->n + 1) * 2 <= l->index_cap)
		return true;
	while ((size_t)(l->n + 1) * 2 > cap)
		cap *= 2;
	index = calloc(cap, sizeof(*index));
	if (!index)
		return false;
	for (int i = 0; i < l->n; i++) {
		size_t at = l->segs[i].key & (cap - 1);

		while (index[at])
			at = (at + 1) & (cap - 1);
		index[at] = i + 1;
	}
	free(l->index);
	l->index = index;
	l->index_cap = cap;
	return true;
}

typedef bool same_fn(const struct sseg_listed *s, const void *key);

/* The segment of hash k that same() accepts, or a new one in its slot;
 * -1 at a cap or out of memory. */
static int segment_by(struct sseg_list *l, uint64_t k, same_fn *same, const void *key,
		      bool *added)
{
	struct sseg_listed *s;
	size_t at;

	*added = false;
	if (!index_room(l))
		goto nomem;
	for (at = k & (l->index_cap - 1); l->index[at]; at = (at + 1) & (l->index_cap - 1)) {
		s = &l->segs[l->index[at] - 1];
		if (s->key == k && same(s, key))
			return l->index[at] - 1;
	}
	if (l->n == SSEG_LIST_MAX_SEGMENTS) {
		l->truncated = true;
		return -1;
	}
	if (l->n == l->cap) {
		void *more = grown(l->segs, &l->cap, sizeof(*l->segs));

		if (!more)
			goto nomem;
		l->segs = more;
	}
	s = &l->segs[l->n];
	memset(s, 0, sizeof(*s));
	s->key = k;
	s->world = s->owner_rank = -1;
	s->first = s->last = -1;
	snprintf(s->backend, sizeof(s->backend), "memfd");
	l->index[at] = ++l->n;
	*added = true;
	return l->n - 1;
nomem:
	l->nomem = true;
	return -1;
}

struct inode_key {
	uint64_t dev, ino;
};

static bool same_inode(const struct sseg_listed *s, const void *key)
{
	const struct inode_key *k = key;

	return s->dev == k->dev && s->ino == k->ino;
}

static int memfd_segment(struct sseg_list *l, uint64_t dev, uint64_t ino, const char *name)
{
	struct inode_key k = { dev, ino };
	bool added;
	int seg = segment_by(l, sseg_hash64(&k, sizeof(k), 1), same_inode, &k, &added);

	if (added) {
		l->segs[seg].dev = dev;
		l->segs[seg].ino = ino;
		snprintf(l->segs[seg].name, sizeof(l->segs[seg].name), "%s", name);
	}
	return seg;
}

/* Driver memory, which has no inode: one segment per uid and declaration. */
struct driver_key {
	int64_t uid;
	const char *name, *backend, *pages, *group;
	uint64_t size, page;
	int world, owner;
};

static bool same_driver(const struct sseg_listed *s, const void *key)
{
	const struct driver_key *k = key;

	return !s->ino && s->uid == k->uid && !strcmp(s->name, k->name) &&
	       !strcmp(s->backend, k->backend) && !strcmp(s->pages, k->pages) &&
	       s->size == k->size && s->page_size == k->page && s->world == k->world &&
	       s->owner_rank == k->owner && !strcmp(s->group, k->group);
}

static uint64_t driver_hash(const struct driver_key *k)
{
	uint64_t numbers[5] = { (uint64_t)k->uid, k->size, k->page, (uint64_t)k->world,
				(uint64_t)k->owner };
	uint64_t h = sseg_hash64(numbers, sizeof(numbers), 2);

	h = sseg_hash64(k->name, strlen(k->name) + 1, h);
	h = sseg_hash64(k->backend, strlen(k->backend) + 1, h);
	h = sseg_hash64(k->group, strlen(k->group) + 1, h);
	return sseg_hash64(k->pages, strlen(k->pages) + 1, h);
}

static int driver_segment(struct sseg_list *l, const struct driver_key *k)
{
	bool added;
	int seg = segment_by(l, driver_hash(k), same_driver, k, &added);
	struct sseg_listed *s;

	if (!added)
		return seg;
	s = &l->segs[seg];
	snprintf(s->name, sizeof(s->name), "%s", k->name);
	snprintf(s->backend, sizeof(s->backend), "%s", k->backend);
	snprintf(s->pages, sizeof(s->pages), "%s", k->pages);
	snprintf(s->group, sizeof(s->group), "%s", k->group);
	s->uid = k->uid;
	s->size = k->size;
	s->page_size = k->page;
	s->world = k->world;
	s->owner_rank = k->owner;
	return seg;
}

/* ---- one process, read through its open /proc/PID ---- */

struct mapping_start {
	uint64_t addr;
	int seg;
};

struct scan {
	struct sseg_list *l;
	int pid, dir;
	int process;       /* its index in l->procs; -1 until it holds something */
	int window, window_seg; /* the holder of its last memfd mapping, whose
				 * window the next tag ends, and its segment; -1 */
	struct mapping_start *starts; /* its memfd mappings, in address order */
	int nstarts, starts_cap;
};

static FILE *open_at(int dir, const char *what)
{
	int fd = openat(dir, what, O_RDONLY | O_CLOEXEC);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;

	if (!f && fd >= 0)
		close(fd);
	return f;
}

/* The effective uid its status gives, or -1. */
static int64_t status_uid(int dir)
{
	FILE *f = open_at(dir, "status");
	unsigned long long real, effective;
	int64_t uid = -1;
	size_t cap = 0;
	char *line = NULL;

	while (f && getline(&line, &cap, f) > 0)
		if (sscanf(line, "Uid: %llu %llu", &real, &effective) == 2) {
			uid = (int64_t)effective;
			break;
		}
	free(line);
	if (f)
		fclose(f);
	return uid;
}

static void read_comm(int dir, char *comm, size_t len)
{
	int fd = openat(dir, "comm", O_RDONLY | O_CLOEXEC);
	char text[64];
	ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n > 0 && text[n - 1] == '\n')
		n--;
	snprintf(comm, len, "%.*s", (int)(n > 0 ? n : 0), text);
}

/* Its entry in l->procs, made with its first holding; -1 out of memory. */
static int this_process(struct scan *sc)
{
	struct sseg_list *l = sc->l;
	struct sseg_listed_process *p;

	if (sc->process >= 0)
		return sc->process;
	if (l->nprocs == l->procs_cap) {
		void *more = grown(l->procs, &l->procs_cap, sizeof(*l->procs));

		if (!more) {
			l->nomem = true;
			return -1;
		}
		l->procs = more;
	}
	p = &l->procs[l->nprocs];
	p->pid = sc->pid;
	p->uid = status_uid(sc->dir);
	read_comm(sc->dir, p->comm, sizeof(p->comm));
	sc->process = l->nprocs++;
	return sc->process;
}

/* Its holder of segment seg, made on first sight; -1 at the cap. */
static int holder_for(struct scan *sc, int seg)
{
	struct sseg_list *l = sc->l;
	struct sseg_listed *s = &l->segs[seg];
	int process = this_process(sc);
	struct sseg_holder *h;

	if (process < 0)
		return -1;
	/* A process's holdings are all found while it is scanned: its holder
	 * of s, if it has one, is s's last. */
	if (s->last >= 0 && l->holders[s->last].process == process)
		return s->last;
	if (l->nholders == SSEG_LIST_MAX_HOLDERS) {
		l->truncated = true;
		return -1;
	}
	if (l->nholders == l->holders_cap) {
		void *more = grown(l->holders, &l->holders_cap, sizeof(*l->holders));

		if (!more) {
			l->nomem = true;
			return -1;
		}
		l->holders = more;
	}
	h = &l->holders[l->nholders];
	memset(h, 0, sizeof(*h));
	h->process = process;
	h->rank = -1;
	h->next = -1;
	if (s->last >= 0)
		l->holders[s->last].next = l->nholders;
	else
		s->first = l->nholders;
	s->last = l->nholders;
	return l->nholders++;
}

static bool has_prefix(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* "PREFIX TEXT (deleted)" -> TEXT, or false when it does not fit. */
static bool label_text(const char *path, const char *prefix, char *text, size_t len)
{
	const char *start = path + strlen(prefix);
	size_t n = strlen(start), d = strlen(DELETED);

	if (n >= d && !strcmp(start + n - d, DELETED))
		n -= d;
	snprintf(text, len, "%.*s", (int)(n < len ? n : len - 1), start);
	return n < len;
}

struct vma {
	uint64_t start, end, dev, ino;
	char perms[5];
	const char *path;
};

static bool parse_vma(const char *line, struct vma *v)
{
	unsigned maj, min;
	unsigned long long start, end, off, ino;
	int used = 0;

	if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, v->perms, &off, &maj,
		   &min, &ino, &used) < 7 || !used)
		return false;
	v->start = start;
	v->end = end;
	v->dev = (uint64_t)maj << 32 | min;
	v->ino = ino;
	v->path = line + used;
	return true;
}

static void add_start(struct scan *sc, uint64_t addr, int seg)
{
	if (sc->nstarts == sc->starts_cap) {
		void *more = grown(sc->starts, &sc->starts_cap, sizeof(*sc->starts));

		if (!more) {
			sc->l->nomem = true;
			return;
		}
		sc->starts = more;
	}
	sc->starts[sc->nstarts++] = (struct mapping_start){ addr, seg };
}

/* A mapping of a segment's memfd: its holder, or -1. */
static int memfd_mapping(struct scan *sc, const struct vma *v)
{
	char name[SSEG_NAME_MAX + 1];
	struct sseg_holder *x;
	int seg, h;

	label_text(v->path, MEMFD_PREFIX, name, sizeof(name));
	seg = memfd_segment(sc->l, v->dev, v->ino, name);
	h = seg >= 0 ? holder_for(sc, seg) : -1;
	sc->window = h;
	sc->window_seg = seg;
	if (h < 0)
		return -1;
	x = &sc->l->holders[h];
	x->mapped += v->end - v->start;
	x->readonly = v->perms[1] != 'w';
	add_start(sc, v->start, seg);
	return h;
}

/* The tag ends the window its rank's mapping starts: it is the rank of the
 * memfd mapped last before it, if that is the segment it names. */
static void window_tag(struct scan *sc, const char *name, int rank, int world, int owner)
{
	struct sseg_list *l = sc->l;
	struct sseg_listed *s;
	struct sseg_holder *h;

	if (sc->window < 0)
		return;
	h = &l->holders[sc->window];
	s = &l->segs[sc->window_seg];
	sc->window = -1;
	if (h->rank >= 0 || strcmp(s->name, name))
		return;
	h->rank = rank;
	s->world = world;
	s->owner_rank = owner;
}

/* A tag page of driver memory: " backend=B size=S pages=P page=Z
 * group=PID.NONCE". The segment is the one of that declaration and group
 * (the owner's pid and create nonce) among the processes of this uid; the
 * rank is the process's. */
static void driver_tag(struct scan *sc, const char *name, const char *rest, int rank,
		       int world, int owner)
{
	char backend[16], pages[16], group[24];
	unsigned long long size, page;
	struct driver_key k;
	int process, seg, h, used = 0;

	if (sscanf(rest, " backend=%15s size=%llu pages=%15s page=%llu group=%23s%n", backend,
		   &size, pages, &page, group, &used) != 5 || rest[used])
		return;
	process = this_process(sc);
	if (process < 0 || sc->l->procs[process].uid < 0)
		return; /* gone: whose it was is not known */
	k = (struct driver_key){ sc->l->procs[process].uid, name, backend, pages, group, size,
				 page, world, owner };
	seg = driver_segment(sc->l, &k);
	h = seg >= 0 ? holder_for(sc, seg) : -1;
	if (h < 0 || sc->l->holders[h].rank >= 0)
		return;
	sc->l->holders[h].rank = rank;
	sc->l->holders[h].mapped = size;
}

/* "/memfd:sseg-tag:NAME rank=R world=W owner=O[ backend=...] (deleted)";
 * anything else, a name too long included, is no tag of the library's. */
static void parse_tag(struct scan *sc, const struct vma *v)
{
	char text[SSEG_TAG_MAX], name[SSEG_NAME_MAX + 1];
	int rank, world, owner, used = 0;
	const char *sp;

	if (!label_text(v->path, TAG_PREFIX, text, sizeof(text)))
		return;
	sp = strstr(text, " rank=");
	if (!sp || sp - text > (ptrdiff_t)SSEG_NAME_MAX ||
	    sscanf(sp, " rank=%d world=%d owner=%d%n", &rank, &world, &owner, &used) != 3 ||
	    rank < 0 || rank >= world || owner < 0 || owner >= world)
		return;
	snprintf(name, sizeof(name), "%.*s", (int)(sp - text), text);
	if (!sp[used])
		window_tag(sc, name, rank, world, owner);
	else
		driver_tag(sc, name, sp + used, rank, world, owner);
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

/* Whole lines, however long: a name the kernel writes with "\012" for
 * each newline is still one line, and a line cut short is no mapping. */
static void scan_smaps(struct scan *sc, FILE *f)
{
	size_t cap = 0;
	char *line = NULL;
	int cur = -1;
	ssize_t n;
	struct vma v;

	while (!sc->l->nomem && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] != '\n')
			break;
		line[n - 1] = '\0';
		if (!parse_vma(line, &v)) {
			if (cur >= 0)
				add_field(&sc->l->holders[cur], line);
			continue;
		}
		cur = -1;
		if (has_prefix(v.path, MEMFD_PREFIX))
			cur = memfd_mapping(sc, &v);
		else if (has_prefix(v.path, TAG_PREFIX))
			parse_tag(sc, &v);
	}
	free(line);
}

/* One descriptor that holds a segment's memfd (an owner before the
 * hand-over, or a leak): the file's allocated size is what it holds. */
static void held_fd(struct scan *sc, int fds, const char *fd)
{
	char target[512], name[SSEG_NAME_MAX + 1];
	struct stat st;
	ssize_t n = readlinkat(fds, fd, target, sizeof(target) - 1);
	int seg, h;

	if (n <= 0)
		return;
	target[n] = '\0';
	if (!has_prefix(target, MEMFD_PREFIX) || fstatat(fds, fd, &st, 0))
		return;
	label_text(target, MEMFD_PREFIX, name, sizeof(name));
	seg = memfd_segment(sc->l, (uint64_t)major(st.st_dev) << 32 | minor(st.st_dev),
			    st.st_ino, name);
	h = seg >= 0 ? holder_for(sc, seg) : -1;
	if (h < 0)
		return;
	sc->l->holders[h].fd = true;
	sc->l->segs[seg].size = (uint64_t)st.st_size;
	sc->l->segs[seg].allocated = (uint64_t)st.st_blocks * 512;
}

static void scan_fds(struct scan *sc)
{
	int fds = openat(sc->dir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fds >= 0 ? fdopendir(fds) : NULL;
	struct dirent *e;

	if (!d) {
		if (fds >= 0)
			close(fds);
		return;
	}
	while (!sc->l->nomem && (e = readdir(d)))
		held_fd(sc, fds, e->d_name);
	closedir(d);
}

/* The segment whose mapping starts at addr, or -1 (starts are sorted). */
static int mapping_at(const struct scan *sc, uint64_t addr)
{
	int lo = 0, hi = sc->nstarts;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (sc->starts[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < sc->nstarts && sc->starts[lo].addr == addr ? sc->starts[lo].seg : -1;
}

/* numa_maps: "ADDR POLICY file=/memfd:sseg:... N0=12 N1=4 ..." (the path's
 * spaces are escaped: a name cannot add a node). */
static void scan_numa(struct scan *sc, FILE *f)
{
	size_t cap = 0;
	char *line = NULL;

	while (getline(&line, &cap, f) > 0) {
		int seg = mapping_at(sc, strtoull(line, NULL, 16));

		if (seg < 0)
			continue;
		for (const char *p = strstr(line, " N"); p; p = strstr(p + 1, " N")) {
			int node = -1;

			if (sscanf(p, " N%d=", &node) == 1 && node >= 0 && node < 64)
				sc->l->segs[seg].numa_nodes |= 1ull << node;
		}
	}
	free(line);
}

static void scan_process(struct scan *sc)
{
	FILE *f = open_at(sc->dir, "smaps");

	if (!f)
		return; /* gone, or not ours to read */
	scan_smaps(sc, f);
	fclose(f);
	scan_fds(sc);
	/* numa_maps walks its page tables: only worth it where it maps a segment */
	if (!sc->nstarts || sc->l->nomem)
		return;
	f = open_at(sc->dir, "numa_maps");
	if (f) {
		scan_numa(sc, f);
		fclose(f);
	}
}

int sseg_list_scan(struct sseg_list *l)
{
	struct scan sc = { .l = l };
	struct dirent *e;
	DIR *d = opendir("/proc");

	memset(l, 0, sizeof(*l));
	if (!d)
		return sseg_err(-errno, "cannot read /proc: %s", strerror(errno));
	while (!l->nomem && (e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		sc.dir = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sc.dir < 0)
			continue;
		sc.pid = atoi(e->d_name);
		sc.process = sc.window = sc.window_seg = -1;
		sc.nstarts = 0;
		scan_process(&sc);
		close(sc.dir);
	}
	closedir(d);
	free(sc.starts);
	if (l->nomem) {
		sseg_list_free(l);
		return sseg_err(-ENOMEM, "out of memory listing the segments of this host");
	}
	return 0;
}

void sseg_list_free(struct sseg_list *l)
{
	free(l->segs);
	free(l->holders);
	free(l->procs);
	free(l->index);
	memset(l, 0, sizeof(*l));
}

/* ---- JSON ---- */

static void process_facts(struct sseg_json *j, const struct sseg_list *l,
			  const struct sseg_holder *h, bool resident_known)
{
	const struct sseg_listed_process *p = &l->procs[h->process];

	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "pid", p->pid);
	sseg_json_opt_int(j, "uid", p->uid);
	sseg_json_str(j, "comm", p->comm);
	sseg_json_opt_int(j, "rank", h->rank);
	sseg_json_u64(j, "mapped_bytes", h->mapped);
	sseg_json_opt_int(j, "resident_bytes", resident_known ? (long long)h->resident : -1);
	sseg_json_bool(j, "holds_fd", h->fd);
	sseg_json_bool(j, "readonly", h->mapped && h->readonly);
	sseg_json_end(j, '}');
}

struct page_facts {
	const char *kind;
	uint64_t page, resident, size;
};

/* What a segment is made of, from its mappers: page kind and size. */
static struct page_facts page_facts(const struct sseg_list *l, const struct sseg_listed *s)
{
	struct page_facts f = { "base", 4096, s->allocated, s->size };
	uint64_t thp = 0;

	for (int i = s->first; i >= 0; i = l->holders[i].next) {
		const struct sseg_holder *x = &l->holders[i];

		if (x->page_size > f.page)
			f.page = x->page_size;
		if (x->thp > thp)
			thp = x->thp;
		if (!s->allocated && x->resident > f.resident)
			f.resident = x->resident;
		if (!s->size && x->mapped > f.size)
			f.size = x->mapped;
	}
	if (f.page == (2u << 20))
		f.kind = "hugetlb-2M";
	else if (f.page == (1u << 30))
		f.kind = "hugetlb-1G";
	else if (thp)
		f.kind = "thp";
	return f;
}

static void segment_facts(struct sseg_json *j, const struct sseg_list *l,
			  const struct sseg_listed *s)
{
	struct page_facts f = page_facts(l, s);
	const struct sseg_holder *owner = NULL;
	bool mapped = false;

	for (int i = s->first; i >= 0; i = l->holders[i].next) {
		mapped |= l->holders[i].mapped > 0;
		if (!owner && s->owner_rank >= 0 && l->holders[i].rank == s->owner_rank)
			owner = &l->holders[i];
	}
	sseg_json_begin(j, NULL, '{');
	sseg_json_str(j, "name", s->name);
	/* Driver memory: no inode, and /proc does not show what is resident. */
	sseg_json_opt_int(j, "inode", s->ino ? (long long)s->ino : -1);
	sseg_json_str(j, "backend", s->backend);
	sseg_json_u64(j, "size", f.size);
	sseg_json_str(j, "pages", s->pages[0] ? s->pages : f.kind);
	sseg_json_u64(j, "page_size", s->page_size ? s->page_size : f.page);
	sseg_json_opt_int(j, "resident_bytes", s->ino ? (long long)f.resident : -1);
	sseg_json_begin(j, "numa_nodes", '[');
	for (int n = 0; n < 64; n++)
		if (s->numa_nodes & (1ull << n))
			sseg_json_int(j, NULL, n);
	sseg_json_end(j, ']');
	sseg_json_opt_int(j, "world_size", s->world);
	sseg_json_opt_int(j, "owner_rank", s->owner_rank);
	sseg_json_opt_int(j, "owner_pid", owner ? l->procs[owner->process].pid : -1);
	/* Mapped by nobody, held only by a descriptor: a leak to look at. */
	sseg_json_bool(j, "unmapped", !mapped);
	sseg_json_begin(j, "processes", '[');
	for (int i = s->first; i >= 0; i = l->holders[i].next)
		process_facts(j, l, &l->holders[i], s->ino != 0);
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
}

static void document(struct sseg_json *j, const void *ctx)
{
	const struct sseg_list *l = ctx;

	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "schema", 1);
	/* A cap was reached: segments or holders were left out. */
	sseg_json_bool(j, "truncated", l->truncated);
	sseg_json_begin(j, "segments", '[');
	for (int i = 0; i < l->n; i++)
		segment_facts(j, l, &l->segs[i]);
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
}

int sseg_list_render(const struct sseg_list *l, char *buf, size_t len)
{
	return sseg_json_render(document, l, buf, len);
}

/* ---- one scan per document ---- */

/* The text of a call whose buffer was too small: the same thread's next
 * call, soon after and with a larger buffer (snprintf's pattern: the
 * length, then the text; or a buffer grown until it fits), gets this
 * document rather than a second scan of /proc. A call with the same buffer
 * again scans afresh. */
#define KEPT_S 5.0

static struct {
	pthread_mutex_t lock;
	char *text;
	size_t len, asked;
	pthread_t thread;
	double when;
} kept = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int copy_out(const char *text, size_t n, char *buf, size_t len)
{
	if (len) {
		size_t copy = n < len ? n : len - 1;

		memcpy(buf, text, copy);
		buf[copy] = '\0';
	}
	return (int)n;
}

/* The kept document into buf, if it is for this call: true. It is dropped
 * once it fits, once stale, or when its thread asks with no larger buffer;
 * another thread's is left alone. */
static bool take_kept(char *buf, size_t len, int *rc)
{
	bool fresh, thread, mine;

	pthread_mutex_lock(&kept.lock);
	fresh = kept.text && sseg_now() - kept.when < KEPT_S;
	thread = fresh && pthread_equal(kept.thread, pthread_self());
	mine = thread && len > kept.asked;
	if (mine) {
		*rc = copy_out(kept.text, kept.len, buf, len);
		kept.asked = len;
	}
	if (kept.text && (!fresh || (thread && !mine) || (mine && len > kept.len))) {
		free(kept.text);
		kept.text = NULL;
	}
	pthread_mutex_unlock(&kept.lock);
	return mine;
}

static void keep(char *text, size_t n, size_t asked)
{
	pthread_mutex_lock(&kept.lock);
	free(kept.text);
	kept.text = text;
	kept.len = n;
	kept.asked = asked;
	kept.thread = pthread_self();
	kept.when = sseg_now();
	pthread_mutex_unlock(&kept.lock);
}

int sseg_list_json(char *buf, size_t len)
{
	struct sseg_list l;
	char *text;
	size_t n;
	int rc;

	if (!buf && len)
		return sseg_err(-EINVAL, "sseg_list_json: buf is NULL but len is %zu", len);
	if (take_kept(buf, len, &rc))
		return rc;
	rc = sseg_list_scan(&l);
	if (rc)
		return rc;
	rc = sseg_json_text(document, &l, &text, &n);
	sseg_list_free(&l);
	if (rc)
		return rc;
	rc = copy_out(text, n, buf, len);
	if (n >= len)
		keep(text, n, len);
	else
		free(text);
	return rc;
}
