/* SPDX-License-Identifier: Apache-2.0 */
/* Edges where the library used to point the wrong way or wait too long:
 * another uid squatting the local exchange's name or its directory, fork()
 * between create and complete, an interrupt while complete waits, a peer
 * whose fd table is full, a memfd sealed against writing, two users on one
 * host, an all-gather that returns other bytes than the ranks sent. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "os/memfd.h"
#include "os/window.h"
#include "testutil.h"

#define SZ (4u << 20)

/* ---- another uid in the way of the local exchange's rendezvous ---- */

struct squat {
	char name[64];
	char path[256];   /* the group's socket file, in root's runtime directory */
	int listening[2]; /* a byte once it squats */
	int release[2];   /* its end of file lets it go */
};

/* Takes what it can: the abstract name the rendezvous once had, and the
 * group's socket file, which it may neither bind nor reach. */
static int squatter(void *arg)
{
	const struct squat *q = arg;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char full[128], c;
	size_t n;
	int s, f;

	close(q->listening[0]);
	close(q->release[1]);
	if (setgid(65534) || setuid(65534))
		return 1;
	n = (size_t)snprintf(full, sizeof(full), "sharedseg-group-0-%s", q->name);
	memcpy(a.sun_path + 1, full, n);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&a,
			  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) ||
	    listen(s, 64))
		return 1;
	f = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", q->path);
	if (!bind(f, (struct sockaddr *)&a, sizeof(a)) || errno != EACCES)
		return 2;
	if (write(q->listening[1], "l", 1) != 1)
		return 1;
	return read(q->release[0], &c, 1) == 0 ? 0 : 1;
}

/* The group meets as if no one were there. */
static int squatted_rank(void *arg)
{
	const struct squat *q = arg;
	struct sseg_local_group *g = NULL;
	char all[4];

	CHECK_RC(sseg_local_group_open(q->name, 1, 2, 5000, &g), 0);
	CHECK_RC(sseg_local_allgather("r1", all, 2, g), 0);
	CHECK(!memcmp(all, "r0r1", 4));
	sseg_local_group_close(g);
	return 0;
}

static void squatted_name(void)
{
	struct sseg_local_group *g = NULL;
	struct squat q;
	char all[4], c;
	pid_t pid, rank;

	if (getuid() != 0) {
		printf("edges: squatting needs another uid (root to setuid): skipped\n");
		return;
	}
	tu_name(q.name, sizeof(q.name), "sseg-squat");
	tu_group_socket(q.name, q.path, sizeof(q.path));
	CHECK(pipe(q.listening) == 0 && pipe(q.release) == 0);
	pid = tu_fork(squatter, &q);
	close(q.listening[1]);
	close(q.release[0]);
	CHECK(read(q.listening[0], &c, 1) == 1); /* it holds what it could take */
	rank = tu_fork(squatted_rank, &q);
	CHECK_RC(sseg_local_group_open(q.name, 0, 2, 5000, &g), 0);
	CHECK_RC(sseg_local_allgather("r0", all, 2, g), 0);
	sseg_local_group_close(g);
	CHECK(tu_wait(rank, 10000) == 0);
	close(q.release[1]);
	CHECK(tu_wait(pid, 10000) == 0);
	close(q.listening[0]);
}

/* Another user made the runtime directory first (in a mount namespace of
 * this test's own): the group is refused with a sentence that names that user,
 * before anything is sent. */
static int in_a_squatted_directory(void *arg)
{
	const char *name = arg;
	struct sseg_local_group *g = NULL;

	tu_rundir_taken(65534); /* root's, where 65534's belongs */
	if (setgid(65534) || setuid(65534))
		return 1;
	CHECK_RC(sseg_local_group_open(name, 0, 2, 500, &g), -EPERM);
	CHECK_ERR_HAS("the runtime directory /tmp/sharedseg-65534 belongs to uid 0, not to this "
		      "user (uid 65534): another user is in the way");
	CHECK_ERR_HAS("set SHAREDSEG_RUNTIME_DIR");
	return 0;
}

static void squatted_directory(void)
{
	char name[64];

	if (getuid() != 0) {
		printf("edges: another user's directory needs root: skipped\n");
		return;
	}
	tu_name(name, sizeof(name), "sseg-squat-dir");
	CHECK(tu_wait(tu_fork(in_a_squatted_directory, name), 10000) == 0);
}

/* ---- fork() between create and complete ---- */

struct forked {
	char name[64];
	int rank;
	int gone[2];   /* a byte for rank 1: the test has reaped rank 0 */
	int loader[2]; /* the loader's end of file: rank 1 has finished */
};

static int fork_rank(void *arg)
{
	const struct forked *f = arg;
	SSEG_OPTS(o, .name = f->name, .size = SZ, .world_size = 2, .rank = f->rank,
		  .pages = SSEG_PAGES_BASE, .timeout_ms = 8000);
	unsigned char blob[SSEG_BLOB_SIZE], blobs[2 * SSEG_BLOB_SIZE];
	struct sseg_local_group *g;
	double t0;
	sseg_t *seg;
	char c;

	close(f->gone[1]);
	CHECK_RC(sseg_local_group_open(f->name, f->rank, 2, 10000, &g), 0);
	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_local_allgather(blob, blobs, SSEG_BLOB_SIZE, g), 0);
	if (f->rank == 0) {
		/* The owner forks a long-lived child (a data loader, say) and
		 * dies before handing the segment over, once fork() has
		 * returned in the child (the library's fork handler ran). The
		 * child lives until rank 1 is done. */
		int started[2];

		CHECK(pipe(started) == 0);
		if (fork() == 0) {
			close(f->loader[1]);
			if (write(started[1], "s", 1) != 1)
				_exit(1);
			_exit(read(f->loader[0], &c, 1) == 0 ? 0 : 1);
		}
		CHECK(read(started[0], &c, 1) == 1);
		_exit(0);
	}
	close(f->loader[0]);
	CHECK(read(f->gone[0], &c, 1) == 1);
	/* The child must not hold the listener: the peer fails at once. */
	t0 = tu_now();
	CHECK_RC(sseg_complete(seg, blobs), -ECONNREFUSED);
	CHECK(tu_now() - t0 < 1.0);
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_local_group_close(g);
	return 0;
}

/* The child closes the memfd too: nothing it inherited keeps the pages. */
static int child_fds(void *arg)
{
	SSEG_OPTS(o, .name = "edges-fork-fds", .size = SZ, .world_size = 2, .rank = 0,
		  .pages = SSEG_PAGES_BASE);
	unsigned char blob[SSEG_BLOB_SIZE];
	int before, pipe_fds[2];
	sseg_t *seg;
	pid_t pid;

	(void)arg;
	before = tu_count_fds();
	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK(tu_count_fds() == before + 2); /* the memfd and the listener */
	CHECK(pipe(pipe_fds) == 0);
	pid = fork();
	if (pid == 0) {
		char n = (char)(tu_count_fds() - 2); /* the pipe's two ends */

		_exit(write(pipe_fds[1], &n, 1) == 1 ? 0 : 1);
	}
	{
		char n = 0;

		CHECK(read(pipe_fds[0], &n, 1) == 1);
		CHECK(n == before);
	}
	CHECK(tu_wait(pid, 5000) == 0);
	CHECK_RC(sseg_destroy(seg), 0);
	return 0;
}

static void fork_between(void)
{
	struct forked f[2];
	pid_t pids[2];

	CHECK(pipe(f[0].gone) == 0 && pipe(f[0].loader) == 0);
	tu_name(f[0].name, sizeof(f[0].name), "sseg-fork");
	f[1] = f[0];
	f[0].rank = 0;
	f[1].rank = 1;
	pids[1] = tu_fork(fork_rank, &f[1]);
	pids[0] = tu_fork(fork_rank, &f[0]);
	close(f[0].gone[0]);
	close(f[0].loader[0]);
	close(f[0].loader[1]); /* rank 1's copy is the loader's last writer */
	CHECK(tu_wait(pids[0], 10000) == 0);
	CHECK(write(f[0].gone[1], "g", 1) == 1); /* rank 0 is reaped: its sockets are closed */
	CHECK(tu_wait(pids[1], 10000) == 0);
	close(f[0].gone[1]);
	CHECK(tu_wait(tu_fork(child_fds, NULL), 10000) == 0);
}

/* ---- an interrupt while complete waits ---- */

static int stop_after(void *ctx)
{
	return tu_now() > *(double *)ctx;
}

static void interrupted(void)
{
	double when = tu_now() + 0.3, t0 = tu_now();
	SSEG_OPTS(o, .name = "edges-intr", .size = SZ, .world_size = 2, .rank = 0,
		  .pages = SSEG_PAGES_BASE, .timeout_ms = 30000, .interrupt = stop_after,
		  .interrupt_ctx = &when);
	unsigned char blobs[2 * SSEG_BLOB_SIZE];
	struct tu_maps before = tu_maps();
	sseg_t *peer_seg, *seg;

	/* A peer that never comes: its blob exists, it never connects. */
	CHECK_RC(sseg_create(&o, &seg, blobs), 0);
	o.rank = 1;
	o.interrupt = NULL;
	CHECK_RC(sseg_create(&o, &peer_seg, blobs + SSEG_BLOB_SIZE), 0);
	CHECK_RC(sseg_complete(seg, blobs), -EINTR);
	CHECK_ERR_HAS("interrupted while rank(s) 1 had not collected the segment");
	CHECK(tu_now() - t0 < 2.0);
	CHECK_RC(sseg_destroy(seg), 0);
	CHECK_RC(sseg_destroy(peer_seg), 0);
	CHECK(tu_maps_same(before, tu_maps()));
}

/* A long population asks too: the owner's create ends between steps. */
static int stop_now(void *ctx)
{
	return ++*(int *)ctx >= 2;
}

static void interrupted_population(void)
{
	int asked = 0;
	SSEG_OPTS(o, .name = "edges-intr-pop", .size = 1ull << 30, .world_size = 1,
		  .pages = SSEG_PAGES_BASE, .interrupt = stop_now, .interrupt_ctx = &asked);
	unsigned char blob[SSEG_BLOB_SIZE];
	struct tu_maps before = tu_maps();
	sseg_t *seg = NULL;

	CHECK_RC(sseg_create(&o, &seg, blob), -EINTR);
	CHECK_ERR_HAS("interrupted while populating, 536870912 of 1073741824 bytes done");
	CHECK(!seg && asked == 2);
	CHECK(tu_maps_same(before, tu_maps()));
}

/* ---- errors that name their cause ---- */

/* A peer with no free descriptor is told so, not that the owner sent
 * bytes without an fd. */
static int full_fd_table(void *arg)
{
	struct forked *f = arg;
	SSEG_OPTS(o, .name = f->name, .size = SZ, .world_size = 2, .rank = f->rank,
		  .pages = SSEG_PAGES_BASE, .timeout_ms = 8000);
	unsigned char blob[SSEG_BLOB_SIZE], blobs[2 * SSEG_BLOB_SIZE];
	struct sseg_local_group *g;
	struct rlimit lim;
	sseg_t *seg;
	int rc;

	CHECK_RC(sseg_local_group_open(f->name, f->rank, 2, 10000, &g), 0);
	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_local_allgather(blob, blobs, SSEG_BLOB_SIZE, g), 0);
	if (f->rank == 1) {
		/* Room for the connection to the owner, none for the fd. */
		int top = dup(0);

		lim.rlim_cur = lim.rlim_max = (rlim_t)top + 2;
		close(top);
		CHECK(setrlimit(RLIMIT_NOFILE, &lim) == 0);
		while (dup(0) >= 0)
			;
		close(top);
		rc = sseg_complete(seg, blobs);
		CHECK_RC(rc, -EMFILE);
		CHECK_ERR_HAS("no free file descriptor");
	} else {
		CHECK(sseg_complete(seg, blobs) < 0);
		CHECK_ERR_HAS("rank 1 could not map the segment it received");
	}
	sseg_destroy(seg);
	return 0;
}

static void named_errors(void)
{
	struct forked f[2];
	pid_t pids[2];
	void *base;
	int fd;

	tu_name(f[0].name, sizeof(f[0].name), "sseg-emfile");
	f[1] = f[0];
	f[0].rank = 0;
	f[1].rank = 1;
	pids[1] = tu_fork(full_fd_table, &f[1]);
	pids[0] = tu_fork(full_fd_table, &f[0]);
	CHECK(tu_wait(pids[0], 15000) == 0);
	CHECK(tu_wait(pids[1], 15000) == 0);
	/* A memfd sealed against writing, mapped writable. */
	CHECK_RC(sseg_os_memfd_create("edges", SZ, 0, &fd), 0);
	CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == 0);
	CHECK_RC(sseg_os_window_reserve(SZ, 2u << 20, &base), 0);
	CHECK_RC(sseg_os_window_map(base, SZ, fd, false), -EPERM);
	CHECK_ERR_HAS("sealed against writing");
	CHECK_RC(sseg_os_window_map(base, SZ, fd, true), 0);
	CHECK_RC(sseg_os_window_release(base, SZ), 0);
	close(fd);
}

/* ---- two users on one host ---- */

struct two_users {
	char name[64];
	int up[2], down[2]; /* rank 1's values to rank 0, rank 0's to rank 1 */
	int rank;
};

/* A two-rank all-gather over the pipes. */
static int pipe_gather(const void *mine, void *all, size_t len, void *ctx)
{
	const struct two_users *t = ctx;
	unsigned char *out = all;
	int to = t->rank ? t->up[1] : t->down[1], from = t->rank ? t->down[0] : t->up[0];

	memcpy(out + len * (size_t)t->rank, mine, len);
	if (write(to, mine, len) != (ssize_t)len)
		return -1;
	for (size_t got = 0; got < len;) {
		ssize_t n = read(from, out + len * (size_t)!t->rank + got, len - got);

		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* Each rank picks its host's owner from the identities, as a framework's
 * binding does; ranks of different users pick different owners, and
 * complete says why, not that one host has two owners. */
static int user_rank(void *arg)
{
	struct two_users *t = arg;
	unsigned char ids[2][SSEG_HOST_ID_SIZE], blob[SSEG_BLOB_SIZE], blobs[2][SSEG_BLOB_SIZE];
	sseg_t *seg = NULL;
	int owner;

	if (t->rank && (setgid(65534) || setuid(65534)))
		return 1;
	CHECK_RC(sseg_host_identity(ids[t->rank]), 0);
	CHECK_RC(pipe_gather(ids[t->rank], ids, SSEG_HOST_ID_SIZE, t), 0);
	owner = sseg_host_owner(ids, 2, t->rank);
	CHECK(owner == t->rank);
	{
		SSEG_OPTS(o, .name = t->name, .size = SZ, .world_size = 2, .rank = t->rank,
			  .owner_rank = owner, .pages = SSEG_PAGES_BASE,
			  .populate = SSEG_POPULATE_LAZY);

		CHECK_RC(sseg_create(&o, &seg, blob), 0);
	}
	CHECK_RC(pipe_gather(blob, blobs, SSEG_BLOB_SIZE, t), 0);
	CHECK_RC(sseg_complete(seg, blobs), -EPERM);
	CHECK_ERR_HAS("ranks 0 and 1 run on one host as different users (uid 0 and 65534): an "
		      "owner hands its pages only to its own user");
	CHECK_RC(sseg_destroy(seg), 0);
	return 0;
}

/* The local exchange's ranks meet under their user's name: a rank of
 * another user times out, and says who it may have missed. */
static int other_user_peer(void *arg)
{
	const struct two_users *t = arg;
	struct sseg_local_group *g = NULL;
	char c;

	if (setgid(65534) || setuid(65534))
		return 1;
	CHECK(read(t->up[0], &c, 1) == 1); /* rank 0's hub is open */
	CHECK_RC(sseg_local_group_open(t->name, 1, 2, 300, &g), -ETIMEDOUT);
	CHECK_ERR_HAS("rank 0 (hub) did not open it within 300 ms; uid 0 has a local group of "
		      "this name open, and this rank runs as uid 65534: ranks of one group must "
		      "run as one user");
	return 0;
}

/* This user's hub for the group: its socket, as the library names it. */
static int hub_name_open(const char *group)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	tu_group_socket(group, a.sun_path, sizeof(a.sun_path));
	unlink(a.sun_path);
	CHECK(s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(s, 4) == 0);
	return s;
}

static void two_users_local_group(struct two_users *t)
{
	char path[256];

	int hub = hub_name_open(t->name);
	pid_t pid = tu_fork(other_user_peer, t);

	CHECK(write(t->up[1], "o", 1) == 1);
	CHECK(tu_wait(pid, 15000) == 0);
	close(hub);
	tu_group_socket(t->name, path, sizeof(path));
	unlink(path);
}

static void two_users(void)
{
	struct two_users t[2];
	pid_t pid[2];

	if (getuid() != 0) {
		printf("edges: two users need another uid (root to setuid): skipped\n");
		return;
	}
	tu_name(t[0].name, sizeof(t[0].name), "sseg-users");
	CHECK(pipe(t[0].up) == 0 && pipe(t[0].down) == 0);
	t[1] = t[0];
	for (int r = 0; r < 2; r++) {
		t[r].rank = r;
		pid[r] = tu_fork(user_rank, &t[r]);
	}
	for (int r = 0; r < 2; r++)
		CHECK(tu_wait(pid[r], 15000) == 0);
	two_users_local_group(&t[0]);
	for (int i = 0; i < 2; i++) {
		close(t[0].up[i]);
		close(t[0].down[i]);
	}
}

/* ---- an all-gather that mangles the status records ---- */

/* Passes the blobs through, and gives back for the status record (the
 * second call) what status_bytes holds. */
static const uint8_t *status_bytes;

static int mangling_gather(const void *mine, void *all, size_t len, void *ctx)
{
	int *calls = ctx;

	memcpy(all, ++*calls == 2 ? status_bytes : mine, len);
	return 0;
}

static void mangled_status(void)
{
	SSEG_OPTS(o, .name = "edges-status", .size = SZ, .world_size = 1);
	uint8_t junk[256], failed[256];
	sseg_t *seg = NULL;
	int calls = 0;

	/* Bytes that are no status record: the rank's failure, said so. */
	memset(junk, 'x', sizeof(junk));
	status_bytes = junk;
	CHECK_RC(sseg_open(&o, mangling_gather, &calls, &seg), -EPROTO);
	CHECK_ERR_HAS("1 rank(s) failed in sseg_open; rank 0: its status record: expected a "
		      "rank's status, got bytes that are no frame of this library");
	CHECK(!seg && calls == 2);

	/* A record of another rank's failure, in the frame: its errno and its
	 * sentence on this rank. */
	calls = 0;
	memset(failed, 0, sizeof(failed));
	memcpy(failed, (const uint8_t[]){ 'S', 'S', 'G', 'F', 9, 0, 1, 0, 0xf4, 0xff, 0xff, 0xff },
	       12); /* kind 9 (a status), format 1, code -12 */
	failed[20] = 7;
	memcpy(failed + 24, "no room", 7);
	status_bytes = failed;
	CHECK_RC(sseg_open(&o, mangling_gather, &calls, &seg), -ENOMEM);
	CHECK_ERR_HAS("1 rank(s) failed in sseg_open; rank 0: no room");
	CHECK(!seg);
	printf("mangled status records: a failure with its sentence\n");
}

int main(void)
{
	mangled_status();
	squatted_name();
	squatted_directory();
	two_users();
	fork_between();
	interrupted();
	interrupted_population();
	named_errors();
	printf("edges: ok\n");
	return 0;
}
