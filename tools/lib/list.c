/* SPDX-License-Identifier: Apache-2.0 */
/* The scan behind `sharedseg ls` and Python's list_segments() (list_doc.c
 * renders it): every live segment on this host, as the kernel shows it,
 * for operators. No daemon and
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
 * to the caps in list_store.h. */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "list.h"
#include "list_pools.h"
#include "tag.h"

#define MEMFD_PREFIX "/memfd:" SSEG_MEMFD_LABEL
#define TAG_PREFIX "/memfd:" SSEG_TAG_LABEL
#define DELETED " (deleted)"

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
		void *more = sseg_list_grown(l->procs, &l->procs_cap, sizeof(*l->procs));

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
	p->keeper[0] = '\0'; /* until its keeper tag, if it maps one */
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
		void *more = sseg_list_grown(l->holders, &l->holders_cap, sizeof(*l->holders));

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
		void *more = sseg_list_grown(sc->starts, &sc->starts_cap, sizeof(*sc->starts));

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
	seg = sseg_list_memfd_segment(sc->l, v->dev, v->ino, name);
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
 * rank is the process's. What it maps of the driver's memory /proc does
 * not show, and any process can map a page of that name: its mapped bytes
 * stay unknown, and the segment's size is only what its tags declare. */
static void driver_tag(struct scan *sc, const char *name, const char *rest, int rank,
		       int world, int owner)
{
	char backend[16], pages[16], group[24];
	unsigned long long size, page;
	struct sseg_driver_key k;
	int process, seg, h, used = 0;

	if (sscanf(rest, " backend=%15s size=%llu pages=%15s page=%llu group=%23s%n", backend,
		   &size, pages, &page, group, &used) != 5 || rest[used])
		return;
	process = this_process(sc);
	if (process < 0 || sc->l->procs[process].uid < 0)
		return; /* gone: whose it was is not known */
	k = (struct sseg_driver_key){ sc->l->procs[process].uid, name, backend, pages, group, size,
				 page, world, owner };
	seg = sseg_list_driver_segment(sc->l, &k);
	h = seg >= 0 ? holder_for(sc, seg) : -1;
	if (h >= 0 && sc->l->holders[h].rank < 0)
		sc->l->holders[h].rank = rank;
}

/* A keeper's tag page names the process, whose held memfds it keeps. */
static void keeper_tag(struct scan *sc, const char *name)
{
	int process;

	if (strchr(name, ' ') || strlen(name) > SSEG_NAME_MAX)
		return;
	process = this_process(sc);
	if (process >= 0)
		snprintf(sc->l->procs[process].keeper, sizeof(sc->l->procs[process].keeper), "%s",
			 name);
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
	if (has_prefix(text, SSEG_KEEPER_TAG)) {
		keeper_tag(sc, text + strlen(SSEG_KEEPER_TAG));
		return;
	}
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
	seg = sseg_list_memfd_segment(sc->l, (uint64_t)major(st.st_dev) << 32 | minor(st.st_dev),
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
	sseg_list_pools(l);
	if (l->nomem) {
		sseg_list_free(l);
		return sseg_err(-ENOMEM, "out of memory listing the segments of this host");
	}
	return 0;
}
