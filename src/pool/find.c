/* SPDX-License-Identifier: Apache-2.0 */
/* Finding a pool's memfd by name, with no server: the name's record file
 * in this user's runtime directory (pool.NAME, mode 0600, in a directory
 * only this user may enter) lists the processes that have the pool open and
 * the number of their fd: a record a slot, then records for processes that
 * opened it map-only (a worker may be the first to open it). A process
 * opening the name locks the file, opens /proc/PID/fd/N of a listed
 * process (a new open file description of the same memfd; the kernel lets
 * only this user's processes do it), checks that it is the file and the
 * pool recorded, and otherwise asks the keeper, or makes the pool. The lock
 * makes "none is open, so make one" a decision of one process at a time. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "keeper.h"
#include "os/claim.h"
#include "os/named.h"
#include "pool/pool.h"

struct who_record {
	uint64_t pid;
	int32_t fd;
	uint32_t used;
	uint64_t dev, ino;
	uint8_t id[16];
};

/* Records of map-only handles, after the slots' */
#define WHO_MAP_ONLY 224
#define WHO_RECORDS (SSEG_POOL_SLOTS + WHO_MAP_ONLY)

static int who_open(const char *name, int *fd)
{
	char dir[SSEG_OS_NAMED_PATH], path[SSEG_OS_NAMED_PATH + 80];
	struct stat st;
	int rc = sseg_os_rundir(dir, sizeof(dir));

	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/pool.%s", dir, name);
	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*fd < 0)
		return sseg_err(-errno, "pool '%s': cannot open its record %s: %s", name, path,
				strerror(errno));
	if (fstat(*fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		close(*fd);
		*fd = -1;
		return sseg_err(-EPERM, "pool '%s': its record %s is not a file of this user's "
				"that only this user may read (uid %u, mode %o)", name, path,
				(unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	}
	return 0;
}

/* The name is one process's at a time while it finds or makes the pool. */
static int who_lock(int fd, const char *name, double deadline)
{
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };

	for (;;) {
		struct timespec ms = { 0, 1000000 };

		if (!fcntl(fd, F_OFD_SETLK, &l))
			return 0;
		if (errno != EAGAIN && errno != EACCES)
			return sseg_err(-errno, "pool '%s': cannot lock its record: %s", name,
					strerror(errno));
		if (sseg_now() > deadline)
			return sseg_err(-ETIMEDOUT, "pool '%s': another process kept its record "
					"locked past the timeout (it is opening the pool)", name);
		nanosleep(&ms, NULL);
	}
}

/* The geometry at the start of the memfd fd, and its checksum. */
static int read_geometry(int fd, struct pool_geometry *g, uint64_t *sum)
{
	struct pool_header h;

	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return -EBADMSG;
	*g = h.g;
	*sum = h.checksum;
	return 0;
}

/* The memfd a live process lists in rec, if it is still the pool listed. */
static int from_record(const struct who_record *rec, const char *name)
{
	struct pool_geometry g;
	char path[64];
	struct stat st;
	uint64_t sum;
	int fd;

	if (!rec->used || !rec->pid || rec->fd < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%llu/fd/%d", (unsigned long long)rec->pid, rec->fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || st.st_dev != rec->dev || st.st_ino != rec->ino ||
	    st.st_uid != geteuid() || read_geometry(fd, &g, &sum) || g.magic != POOL_MAGIC ||
	    memcmp(g.id, rec->id, sizeof(g.id)) || strncmp(g.name, name, sizeof(g.name))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int from_keeper(const struct sseg_pool_opts *o, struct pool_found *f, int *fd)
{
	struct pool_geometry g;
	uint64_t size, sum;
	int lent, rc;

	if (!o->keeper || f->keeper_silent)
		return 0;
	rc = sseg_keeper_lend_by(o->keeper, o->name, &lent, &size, f->keeper_deadline);
	if (rc == -ENOENT || rc == -ECONNREFUSED)
		return 0;
	if (rc) {
		/* stopped, or slow: what it holds stays as it is, and the pool
		 * this open finds or makes is not left with it */
		f->keeper_silent = 1;
		sseg_log(SSEG_LOG_WARN, "pool '%s': keeper '%s' did not answer (%s): the pool it "
			 "may hold is not used, and this process's is not left with it", o->name,
			 o->keeper, sseg_last_error());
		return 0;
	}
	if (read_geometry(lent, &g, &sum) || g.magic != POOL_MAGIC) {
		sseg_log(SSEG_LOG_WARN, "pool '%s': keeper '%s' holds a segment of that name, not "
			 "a pool; a new pool is made", o->name, o->keeper);
		close(lent);
		return 0;
	}
	/* the keeper's description is shared by everyone it lent it to */
	rc = sseg_os_memfd_reopen(lent, fd);
	close(lent);
	return rc ? rc : 1;
}

static int found(int fd, struct pool_found *f)
{
	struct stat st;

	if (fstat(fd, &st))
		return sseg_err(-errno, "cannot stat the pool's memfd: %s", strerror(errno));
	f->fd = fd;
	f->size = (uint64_t)st.st_size;
	return 0;
}

/* Whether opts->keeper holds the pool whose memfd is fd: 1 it does, 0 it
 * holds none of that name, -1 it holds another. */
static int keeper_holds(const struct sseg_pool_opts *o, struct pool_found *f, int fd)
{
	struct stat mine, its;
	int lent, rc = from_keeper(o, f, &lent);

	if (rc <= 0)
		return 0;
	rc = !fstat(fd, &mine) && !fstat(lent, &its) && mine.st_dev == its.st_dev &&
	     mine.st_ino == its.st_ino ? 1 : -1;
	close(lent);
	return rc;
}

static int find_locked(const struct sseg_pool_opts *o, struct pool_found *f)
{
	struct who_record recs[WHO_RECORDS];
	ssize_t got = pread(f->who_fd, recs, sizeof(recs), 0);
	int fd, rc;

	for (ssize_t i = 0; got > 0 && i < got / (ssize_t)sizeof(recs[0]); i++) {
		fd = from_record(&recs[i], o->name);
		if (fd < 0)
			continue;
		rc = found(fd, f);
		if (!rc && o->keeper) /* kept by the keeper this open names? */
			f->kept = keeper_holds(o, f, fd);
		return rc;
	}
	rc = from_keeper(o, f, &fd);
	if (rc < 0)
		return rc;
	if (rc) {
		f->kept = 1;
		return found(fd, f);
	}
	if (POOL_EXISTING(o))
		return sseg_err(-ENOENT, "no pool '%s' is open on this host%s", o->name,
				o->keeper ? " nor held by the keeper" : "");
	rc = pool_make(o, &fd, &f->size);
	if (rc)
		return rc;
	f->created = 1;
	f->fd = fd;
	return 0;
}

static void who_unlink(const char *name)
{
	char dir[SSEG_OS_NAMED_PATH], path[SSEG_OS_NAMED_PATH + 80];

	if (sseg_os_rundir(dir, sizeof(dir)))
		return;
	snprintf(path, sizeof(path), "%s/pool.%s", dir, name);
	unlink(path);
}

/* The name's record file, locked. One that was unlinked while this process
 * waited for its lock (its last holder closed the pool) is no longer the
 * name's: the path is opened anew. */
static int who_take(const char *name, double deadline, int *fd)
{
	for (;;) {
		struct stat st;
		int rc = who_open(name, fd);

		if (!rc)
			rc = who_lock(*fd, name, deadline);
		if (!rc && !fstat(*fd, &st) && st.st_nlink > 0)
			return 0;
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		if (rc)
			return rc;
	}
}

int pool_find(const struct sseg_pool_opts *o, struct pool_found *f)
{
	double deadline = sseg_now() + (o->timeout_ms > 0 ? o->timeout_ms : SSEG_DEFAULT_TIMEOUT_MS) / 1e3;
	int rc;

	*f = (struct pool_found){ .fd = -1, .who_fd = -1 };
	rc = who_take(o->name, deadline, &f->who_fd);
	/* the keeper's share counts from here: waiting for another opener
	 * does not use it up */
	f->keeper_deadline = sseg_keeper_deadline(o->timeout_ms);
	if (!rc)
		rc = find_locked(o, f);
	if (rc && f->who_fd >= 0) {
		struct stat st;

		/* nothing found, none made, and the record file this open made is
		 * empty: it names nothing. One with records stays: a keeper may
		 * hold its pool (one this open, naming no keeper or another, did
		 * not ask), and a listing finds kept pools by their record files. */
		if (f->fd < 0 && !fstat(f->who_fd, &st) && st.st_size == 0)
			who_unlink(o->name);
		close(f->who_fd);
		f->who_fd = -1;
	}
	return rc;
}

static bool is_mine(const struct who_record *rec, const struct sseg_pool *p)
{
	return rec->used && rec->pid == (uint64_t)getpid() && rec->fd == p->fd;
}

/* Whether the locked record file who_fd lists a live process (other than
 * mine's) with pool name open. */
static bool listed_live(int who_fd, const char *name, const struct sseg_pool *mine)
{
	struct who_record recs[WHO_RECORDS];
	ssize_t got = pread(who_fd, recs, sizeof(recs), 0);

	for (ssize_t i = 0; got > 0 && i < got / (ssize_t)sizeof(recs[0]); i++) {
		int other = mine && is_mine(&recs[i], mine) ? -1 : from_record(&recs[i], name);

		if (other >= 0) {
			close(other);
			return true;
		}
	}
	return false;
}

void pool_forget(const struct sseg_pool *p)
{
	int fd;

	if (p->kept || who_take(p->g.name, sseg_now() + 5, &fd))
		return;
	if (!listed_live(fd, p->g.name, p)) /* else another process has it open */
		who_unlink(p->g.name);
	close(fd);
}

void pool_forget_stale(const char *name)
{
	int fd;

	if (who_take(name, sseg_now() + 2, &fd))
		return;
	if (!listed_live(fd, name, NULL))
		who_unlink(name);
	close(fd);
}
/* Where a map-only handle lists itself: the first record past the slots'
 * that lists no live process with the pool open; -1 when all do. */
static int map_only_index(int who_fd, const char *name)
{
	struct who_record recs[WHO_MAP_ONLY];
	ssize_t got = pread(who_fd, recs, sizeof(recs),
			    (off_t)(SSEG_POOL_SLOTS * sizeof(struct who_record)));
	int i, fd;

	for (i = 0; got > 0 && i < got / (ssize_t)sizeof(recs[0]); i++) {
		fd = from_record(&recs[i], name);
		if (fd < 0)
			return (int)SSEG_POOL_SLOTS + i;
		close(fd);
	}
	return i < WHO_MAP_ONLY ? (int)SSEG_POOL_SLOTS + i : -1;
}

void pool_found_done(struct pool_found *f, const struct sseg_pool *p)
{
	struct stat st;
	int at = !p || f->who_fd < 0 ? -1 :
		 p->slot >= 0 ? (int)p->slot : map_only_index(f->who_fd, p->g.name);

	if (at >= 0 && !fstat(p->fd, &st)) {
		struct who_record rec = { .pid = (uint64_t)getpid(), .fd = p->fd, .used = 1,
					  .dev = st.st_dev, .ino = st.st_ino };

		memcpy(rec.id, p->g.id, sizeof(rec.id));
		if (pwrite(f->who_fd, &rec, sizeof(rec), (off_t)(at * sizeof(rec))) !=
		    (ssize_t)sizeof(rec))
			sseg_log(SSEG_LOG_WARN, "pool '%s': cannot list this process in its record; "
				 "others find the pool through the rest", p->g.name);
	}
	if (f->who_fd >= 0)
		close(f->who_fd);
	f->who_fd = -1;
}

int pool_keep(const struct sseg_pool_opts *o, const struct sseg_pool *p, double deadline)
{
	struct sseg_keep_msg q = { .op = SSEG_KEEP_HOLD };
	int rc;

	snprintf(q.decl.d.name, sizeof(q.decl.d.name), "%s", p->g.name);
	q.decl.d.size = p->g.total;
	q.decl.d.pages = p->g.pages;
	q.decl.mapped_size = p->g.total;
	q.decl.page_size = p->g.page_size;
	q.decl.pages = p->g.pages;
	snprintf(q.decl.version, sizeof(q.decl.version), "%d.%d.%d", SSEG_VERSION_MAJOR,
		 SSEG_VERSION_MINOR, SSEG_VERSION_PATCH);
	rc = sseg_keeper_leave(o->keeper, &q, p->fd, deadline);
	if (rc)
		sseg_log(SSEG_LOG_WARN, "pool '%s': %s: it lasts only while a process has it open",
			 p->g.name, sseg_last_error());
	return rc;
}
