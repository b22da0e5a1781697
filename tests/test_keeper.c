/* SPDX-License-Identifier: Apache-2.0 */
/* A keeper (`sharedseg keep`) holds a segment between groups: the next
 * group of the same declaration maps what the last one wrote, one of
 * another declaration gets new memory and the keeper says why; stopping or
 * killing the keeper frees it; another user is neither served nor trusted;
 * `sharedseg ls` shows who keeps what. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keeper_wire.h"
#include "listing.h"
#include "os/sock.h"
#include "stranger.h"
#include "testutil.h"

#define MIB (1ull << 20)

/* Keeper names unique to this process ("kt-a" becomes "kt<pid>-a"), so
 * that copies of the test run at once. */
static pid_t test_pid; /* the main process's, also in its children */

static const char *K(const char *text)
{
	static char bufs[8][512];
	static int next;
	char *out = bufs[next++ % 8], tag[32];
	size_t n = 0;

	snprintf(tag, sizeof(tag), "kt%d-", (int)test_pid);
	while (*text && n < sizeof(bufs[0]) - 32) {
		if (!strncmp(text, "kt-", 3)) {
			n += (size_t)snprintf(out + n, sizeof(bufs[0]) - n, "%s", tag);
			text += 3;
		} else {
			out[n++] = *text++;
		}
	}
	out[n] = '\0';
	return out;
}

struct keeper_proc {
	pid_t pid;
	int err; /* its stderr */
	char said[8192];
	size_t n;
};

/* Reads its stderr until needle shows (the keeper's own word: a barrier). */
static void hear(struct keeper_proc *k, const char *needle)
{
	ssize_t got;

	k->said[k->n] = '\0';
	while (!strstr(k->said, needle)) {
		CHECK(k->n < sizeof(k->said) - 1);
		got = read(k->err, k->said + k->n, sizeof(k->said) - 1 - k->n);
		CHECK(got > 0);
		k->n += (size_t)got;
		k->said[k->n] = '\0';
	}
}

/* `sharedseg keep --name NAME`, its stderr to k->err. */
static void keeper_spawn(struct keeper_proc *k, const char *name)
{
	int fds[2];

	memset(k, 0, sizeof(*k));
	CHECK(pipe(fds) == 0);
	k->pid = fork();
	CHECK(k->pid >= 0);
	if (k->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no keeper */
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		execl(tu_build_file("sharedseg"), "sharedseg", "keep", "--name", name, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	k->err = fds[0];
}

static void keeper_start(struct keeper_proc *k, const char *name)
{
	char running[128];

	keeper_spawn(k, name);
	snprintf(running, sizeof(running), "keeper '%s' runs", name);
	hear(k, running);
}

/* SIGTERM: its exit status; SIGKILL: 128 + 9. */
static int keeper_stop(struct keeper_proc *k, int sig)
{
	int rc;

	CHECK(kill(k->pid, sig) == 0);
	rc = tu_wait(k->pid, 10000);
	if (sig == SIGTERM)
		hear(k, "let go");
	close(k->err);
	return rc;
}

/* ---- one group of two ranks (forked), on one keeper ---- */

struct rank_job {
	const char *name, *keeper;
	uint64_t size;
	int rank;
	int write;      /* the owner fills the pattern */
	int expect_kept; /* owner's info.kept */
	int expect;     /* 1: every rank reads the pattern; 0: zeros */
	const char *says; /* owner: what the library must have said, or NULL */
	char log[4096]; /* what the library said (this process) */
};

static void keep_log(enum sseg_log_level level, const char *message, void *ctx)
{
	struct rank_job *j = ctx;
	size_t n = strlen(j->log);

	(void)level;
	snprintf(j->log + n, sizeof(j->log) - n, "%s\n", message);
}

static int rank_main(void *arg)
{
	struct rank_job *j = arg;
	SSEG_OPTS(o, .name = j->name, .size = j->size, .world_size = 2, .rank = j->rank,
		  .pages = SSEG_PAGES_BASE, .populate = SSEG_POPULATE_OWNER, .keeper = j->keeper);
	struct sseg_info info = { .sz = sizeof(info) };
	struct sseg_local_group *g;
	unsigned char *p;
	sseg_t *seg;

	sseg_set_log(keep_log, j);
	sseg_set_log_level(SSEG_LOG_INFO);
	CHECK_RC(sseg_local_group_open(j->name, j->rank, 2, 30000, &g), 0);
	CHECK_RC(sseg_open(&o, sseg_local_allgather, g, &seg), 0);
	CHECK_RC(sseg_info(seg, &info), 0);
	CHECK(info.kept == (j->rank == 0 ? j->expect_kept : 0));
	p = sseg_base(seg);
	/* In a group that writes, the owner writes while its peer may read. */
	for (uint64_t off = 0; !j->write && off < j->size; off += 4096)
		CHECK(p[off] == (j->expect ? tu_pattern(0, off) : 0));
	if (j->write && j->rank == 0)
		for (uint64_t off = 0; off < j->size; off += 4096)
			p[off] = tu_pattern(0, off);
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_local_group_close(g);
	if (j->rank == 0 && j->says && !strstr(j->log, j->says)) {
		fprintf(stderr, "the owner heard:\n%s", j->log);
		CHECK(!"the owner heard what it should");
	}
	return 0;
}

/* Both ranks, forked; the owner checks what it heard itself. */
static void group_says(const char *name, const char *keeper, uint64_t size, int write, int kept,
		       int expect, const char *says)
{
	struct rank_job j[2];
	pid_t pid[2];

	for (int r = 0; r < 2; r++) {
		j[r] = (struct rank_job){ .name = name, .keeper = keeper, .size = size, .rank = r,
					  .write = write, .expect_kept = kept,
					  .expect = expect, .says = says };
		pid[r] = tu_fork(rank_main, &j[r]);
	}
	for (int r = 0; r < 2; r++)
		CHECK(tu_wait(pid[r], 60000) == 0);
}

static void group(const char *name, const char *keeper, uint64_t size, int write, int kept,
		  int expect)
{
	group_says(name, keeper, size, write, kept, expect, NULL);
}

/* What the keeper lends is the group's memory, shared: its bytes are what
 * the group wrote, and a write through one loan is seen through another. */
static void lent(const char *keeper, const char *name, uint64_t size)
{
	unsigned char *a, *b;
	uint64_t got = 0;
	int fd[2];

	for (int i = 0; i < 2; i++) {
		CHECK_RC(sseg_keeper_lend(keeper, name, &fd[i], &got), 0);
		CHECK(got == size);
	}
	a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd[0], 0);
	b = mmap(NULL, size, PROT_READ, MAP_SHARED, fd[1], 0);
	CHECK(a != MAP_FAILED && b != MAP_FAILED);
	for (uint64_t off = 0; off < size; off += 4096)
		CHECK(a[off] == tu_pattern(0, off));
	a[1] = 0x5a; /* no offset the groups check */
	CHECK(b[1] == 0x5a);
	munmap(a, size);
	munmap(b, size);
	close(fd[0]);
	close(fd[1]);
	CHECK(sseg_keeper_lend(keeper, "no-such-segment", &fd[0], &got) == -ENOENT);
	CHECK(strstr(sseg_last_error(), "holds no segment 'no-such-segment'"));
}

static void kept_between_groups(void)
{
	struct keeper_proc k;
	char name[64], *doc, *text;
	const char *seg;
	size_t len;

	tu_name(name, sizeof(name), "keep");
	keeper_start(&k, K("kt-a"));
	group(name, K("kt-a"), 8 * MIB, 1, 0, 0);  /* a new segment, written */
	hear(&k, "holds segment");
	/* No group maps it now: the keeper holds it, and ls says so. */
	doc = listing();
	seg = segment_of(doc, name);
	CHECK(seg && in_segment(seg, K("\"kept_by\":\"kt-a\"")) && in_segment(seg, K("\"keeper\":\"kt-a\"")) &&
	      has_pid(seg, k.pid));
	free(doc);
	text = run_ls("", &len);
	CHECK(strstr(text, K("kept by keeper kt-a (no group maps it)")) && strstr(text, "rank keeper"));
	free(text);
	lent(K("kt-a"), name, 8 * MIB);
	group(name, K("kt-a"), 8 * MIB, 0, 1, 1);  /* the same declaration: the same bytes */
	hear(&k, "given to a new owner");
	group_says(name, K("kt-a"), 16 * MIB, 0, 0, 0, /* another size: new memory */
		   K("keeper 'kt-a' kept one declared otherwise and freed it (size: kept 8 MiB, "
		     "declared now 16 MiB): allocated anew"));
	hear(&k, "freed: size: kept 8 MiB, declared now 16 MiB");
	CHECK(keeper_stop(&k, SIGTERM) == 0);
	CHECK(strstr(k.said, K("keeper 'kt-a' stops: 1 segment (16 MiB) let go")));
	doc = listing();
	CHECK(!segment_of(doc, name)); /* stopped: nothing left */
	free(doc);
}

static void killed_keeper_leaks_nothing(void)
{
	struct keeper_proc k;
	char name[64], *doc;

	tu_name(name, sizeof(name), "keep-kill");
	keeper_start(&k, K("kt-b"));
	group(name, K("kt-b"), 8 * MIB, 1, 0, 0);
	hear(&k, "holds segment");
	CHECK(keeper_stop(&k, SIGKILL) == 128 + SIGKILL);
	doc = listing();
	CHECK(!segment_of(doc, name));
	free(doc);
	{
		uint64_t size;
		int fd;

		CHECK(sseg_keeper_lend(K("kt-b"), name, &fd, &size) == -ECONNREFUSED);
		CHECK(strstr(sseg_last_error(), "does not run for this user"));
		CHECK(sseg_keeper_lend("bad name", name, &fd, &size) == -EINVAL);
	}
	/* No keeper now: a warning, and the group works on new memory. */
	group_says(name, K("kt-b"), 8 * MIB, 0, 0, 0,
		   K("keeper 'kt-b' does not run for this user (start one: sharedseg keep --name "
		     "kt-b): the segment is allocated anew and kept by no one"));
}

static void name_taken(void)
{
	struct keeper_proc k, second;
	int rc;

	keeper_start(&k, K("kt-c"));
	keeper_spawn(&second, K("kt-c"));
	hear(&second, K("a keeper named 'kt-c' runs already (pid"));
	rc = tu_wait(second.pid, 10000);
	close(second.err);
	CHECK(rc == 1);
	CHECK(keeper_stop(&k, SIGTERM) == 0);
}

/* ---- another user ---- */

static char keeper_socket[128];

/* As STRANGER_UID: root's keeper answers nothing, and gives no fd. */
static int stranger_asks(void *arg)
{
	struct sseg_keep_msg q = { .op = SSEG_KEEP_TAKE };
	uint8_t frame[SSEG_KEEP_FRAME];
	int s;

	snprintf(q.decl.name, sizeof(q.decl.name), "%s", (const char *)arg);
	sseg_keep_encode(&q, frame);
	if (sseg_os_connect_abstract(keeper_socket, &s))
		return 1;
	/* The keeper may close before the question is sent (EPIPE): either
	 * way, no answer comes, and no fd. */
	(void)sseg_os_send_all(s, frame, sizeof(frame), sseg_now() + 5);
	return sseg_os_recv_all(s, frame, sizeof(frame), sseg_now() + 10) ? 0 : 1;
}

/* As STRANGER_UID, through the public call: a keeper's socket is named
 * for its user, so another user's call does not even find root's keeper
 * (stranger_asks, on root's socket by name, meets the keeper's refusal). */
static int stranger_lends(void *arg)
{
	uint64_t size;
	int fd;

	return sseg_keeper_lend(K("kt-d"), arg, &fd, &size) == -ECONNREFUSED ? 0 : 1;
}

static int squat_fd = -1;

/* As STRANGER_UID: listens under the name root's keeper kt-e would have. */
static int stranger_squats(void *arg)
{
	(void)arg;
	return sseg_os_listen_abstract(keeper_socket, 8, &squat_fd) ? 1 : 0;
}

static int squatted_owner(void *arg)
{
	struct rank_job *j = arg;
	SSEG_OPTS(o, .name = j->name, .size = 2 * MIB, .pages = SSEG_PAGES_BASE,
		  .world_size = 1, .keeper = K("kt-e"));
	sseg_t *seg;
	char blob[SSEG_BLOB_SIZE];

	sseg_set_log(keep_log, j);
	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_complete(seg, blob), 0);
	CHECK(strstr(j->log, K("keeper 'kt-e' runs as uid 65534, not as this user (uid 0): the segment is "
		    "allocated anew")));
	CHECK_RC(sseg_destroy(seg), 0);
	return 0;
}

static void other_users(void)
{
	struct stranger asker = { .act = stranger_asks }, squatter = { .act = stranger_squats };
	struct stranger lender = { .act = stranger_lends };
	struct keeper_proc k;
	struct rank_job j = { 0 };
	char name[64];

	if (geteuid() != 0) {
		printf("keeper: other users need root, left out\n");
		return;
	}
	tu_name(name, sizeof(name), "keep-uid");
	keeper_start(&k, K("kt-d"));
	group(name, K("kt-d"), 8 * MIB, 1, 0, 0);
	hear(&k, "holds segment");
	sseg_keep_socket(K("kt-d"), keeper_socket, sizeof(keeper_socket));
	asker.arg = name;
	stranger_start(&asker); /* it checked that it got nothing */
	stranger_stop(&asker);
	hear(&k, "refused pid");
	CHECK(strstr(k.said, "of uid 65534 (it serves uid 0 only)"));
	lender.arg = name;
	stranger_start(&lender);
	stranger_stop(&lender);
	CHECK(keeper_stop(&k, SIGTERM) == 0);

	sseg_keep_socket(K("kt-e"), keeper_socket, sizeof(keeper_socket));
	stranger_start(&squatter);
	tu_name(name, sizeof(name), "keep-squat");
	j.name = name;
	CHECK(tu_wait(tu_fork(squatted_owner, &j), 30000) == 0);
	stranger_stop(&squatter);
}

static void refused_options(void)
{
	char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;
	SSEG_OPTS(o, .name = "keep-opts", .size = 2 * MIB, .world_size = 1, .keeper = "bad name");

	CHECK_RC(sseg_create(&o, &seg, blob), -EINVAL);
	CHECK_ERR_HAS("a keeper's name is made of A-Z a-z 0-9 . _ -: byte 3 is 0x20");
	o.keeper = "kt";
	o.flags = SSEG_F_READONLY_PEERS;
	CHECK_RC(sseg_create(&o, &seg, blob), -EINVAL);
	CHECK_ERR_HAS("that seal forbids the next owner's writable mapping");
	o.flags = 0;
	o.backend = SSEG_BACKEND_CUDA;
	CHECK_RC(sseg_create(&o, &seg, blob), -EOPNOTSUPP);
	CHECK_ERR_HAS("a keeper holds memfd segments, not cuda-backend memory");
	CHECK_RC(sseg_keeper_run("", NULL, NULL), -EINVAL);
}

int main(void)
{
	test_pid = getpid();
	signal(SIGPIPE, SIG_IGN);
	refused_options();
	kept_between_groups();
	killed_keeper_leaks_nothing();
	name_taken();
	other_users();
	printf("keeper: ok\n");
	return 0;
}
