/* SPDX-License-Identifier: Apache-2.0 */
/* A keeper under faults and other users (the fourth hardening round): a
 * hand-over that fails never replaces or frees a kept segment; a kept
 * segment is lent to one live group at a time, and never freed while a
 * group maps it, on the kernel's word (a group SIGKILLed lets it go);
 * another user can neither reach the keeper nor take its directory; a
 * memfd no owner can map writable is refused, and one a keeper gives is
 * let go for a new one; a slow keeper costs a warning within the create's
 * timeout; the keeper under nohup, at its open-file limit, idle at debug
 * level, and given a bad name (exit 2). Each case runs alone by name:
 * `build/tests/test_keeper_faults "one group at a time"`. */
#define _GNU_SOURCE /* memfd_create, F_SEAL_FUTURE_WRITE */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "intruder.h"
#include "keeper_serve.h"
#include "keeper_wire.h"
#include "keeperproc.h"
#include "os/memfd.h"
#include "os/named.h"
#include "os/sock.h"
#include "runcases.h"
#include "stranger.h"
#include "testutil.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* ---- an owner's questions, as frames ---- */

/* A memfd as an owner makes one: size bytes, sealed, first byte 'v'. */
static int owner_memfd(uint64_t size, char value, int extra_seals)
{
	int fd;
	char *p;

	CHECK_RC(sseg_os_memfd_create("sseg:keep-faults", size, 0, &fd), 0);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	p[0] = value;
	munmap(p, size);
	CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | extra_seals) == 0);
	return fd;
}

/* One question to keeper, the fd attached where fd >= 0: the answer. */
static struct sseg_keep_msg ask(const char *keeper, struct sseg_keep_msg q, int fd)
{
	uint8_t frame[SSEG_KEEP_FRAME];
	struct sseg_keep_msg a;
	char file[96], one = 'F';
	int s;

	sseg_keep_socket(keeper, file, sizeof(file));
	CHECK_RC(sseg_os_connect_named(file, sseg_now() + 10, &s), 0);
	sseg_keep_encode(&q, frame);
	CHECK_RC(sseg_os_send_all(s, frame, sizeof(frame), sseg_now() + 10), 0);
	if (fd >= 0)
		CHECK_RC(sseg_os_send_fd(s, fd, &one, 1, sseg_now() + 10), 0);
	CHECK_RC(sseg_os_recv_all(s, frame, sizeof(frame), sseg_now() + 10), 0);
	CHECK_RC(sseg_keep_decode(frame, &a), 0);
	close(s);
	return a;
}

/* A HOLD of fd for a segment named name of size bytes (base pages, world
 * of one, as the plain owner below declares it). */
static struct sseg_keep_msg hold(const char *keeper, const char *name, uint64_t size, int fd,
				 uint32_t flags)
{
	struct sseg_keep_msg q = { .op = SSEG_KEEP_HOLD, .flags = flags };

	snprintf(q.decl.d.name, sizeof(q.decl.d.name), "%s", name);
	snprintf(q.decl.version, sizeof(q.decl.version), "%d.%d.%d", SSEG_VERSION_MAJOR,
		 SSEG_VERSION_MINOR, SSEG_VERSION_PATCH);
	q.decl.d.size = q.decl.mapped_size = size;
	q.decl.page_size = 4096;
	q.decl.d.pages = q.decl.pages = SSEG_PAGES_BASE;
	q.decl.d.world_size = 1;
	return ask(keeper, q, fd);
}

/* ---- groups of one, in this process: alive as long as the test wants ---- */

struct one {
	sseg_t *seg;
	char log[4096];
};

static void one_log(enum sseg_log_level level, const char *message, void *ctx)
{
	struct one *o = ctx;
	size_t n = strlen(o->log);

	(void)level;
	snprintf(o->log + n, sizeof(o->log) - n, "%s\n", message);
}

/* A group of one on keeper: the first byte it found, 'v' written after. */
static char one_open(struct one *o, const char *name, const char *keeper, uint64_t size,
		     char value, int *kept)
{
	SSEG_OPTS(opts, .name = name, .size = size, .world_size = 1, .pages = SSEG_PAGES_BASE,
		  .keeper = keeper, .timeout_ms = 4000);
	struct sseg_info info = { .sz = sizeof(info) };
	unsigned char blob[SSEG_BLOB_SIZE];
	char *p, found;

	o->log[0] = '\0';
	sseg_set_log(one_log, o);
	CHECK_RC(sseg_create(&opts, &o->seg, blob), 0);
	CHECK_RC(sseg_complete(o->seg, blob), 0);
	CHECK_RC(sseg_info(o->seg, &info), 0);
	sseg_set_log(NULL, NULL);
	*kept = info.kept;
	p = sseg_base(o->seg);
	found = p[0];
	p[0] = value;
	return found;
}

static void one_close(struct one *o)
{
	CHECK_RC(sseg_destroy(o->seg), 0);
}

static void heard(const struct one *o, const char *needle)
{
	if (!strstr(o->log, needle)) {
		fprintf(stderr, "the owner heard:\n%swithout: %s\n", o->log, needle);
		CHECK(!"the owner heard what it should");
	}
}

/* ---- the cases ---- */

/* A HOLD that gets through after its owner's TAKE failed (a flood, a slow
 * keeper) finds the earlier segment kept: it is refused, and the next
 * group still finds the earlier bytes. */
static int hold_never_replaces(void *arg)
{
	struct keeper_proc k;
	struct sseg_keep_msg a;
	struct one g;
	char name[64];
	int kept, fd;

	(void)arg;
	tu_name(name, sizeof(name), "kf-replace");
	keeper_start(&k, K("kt-r"));
	CHECK(one_open(&g, name, K("kt-r"), 2 * MIB, 'A', &kept) == 0 && !kept);
	one_close(&g);
	fd = owner_memfd(2 * MIB, 'B', 0);
	a = hold(K("kt-r"), name, 2 * MIB, fd, 0);
	CHECK(a.op == SSEG_KEEP_REFUSED);
	CHECK(strstr(a.why, "it keeps the segment") && strstr(a.why, "this one is kept by no one"));
	close(fd);
	CHECK(one_open(&g, name, K("kt-r"), 2 * MIB, 'C', &kept) == 'A' && kept);
	/* Replacing, asked while a group maps it: refused too. */
	fd = owner_memfd(2 * MIB, 'D', 0);
	a = hold(K("kt-r"), name, 2 * MIB, fd, SSEG_KEEP_REPLACE);
	CHECK(a.op == SSEG_KEEP_REFUSED && strstr(a.why, "that a live group maps now"));
	close(fd);
	one_close(&g);
	CHECK(one_open(&g, name, K("kt-r"), 2 * MIB, 'E', &kept) == 'C' && kept);
	one_close(&g);
	return keeper_stop(&k, SIGTERM);
}

/* Group A maps the kept segment; group B of the same name, the same
 * declaration or another, gets new memory that no one keeps and is told
 * why; A's memory is neither given nor freed. A SIGKILLed releases it. */
struct live {
	const char *name;
	int up; /* a byte once it maps the kept segment */
};

static int group_a(void *arg)
{
	const struct live *l = arg;
	struct one g;
	int kept;

	CHECK(one_open(&g, l->name, K("kt-o"), 2 * MIB, 'A', &kept) == 'K' && kept);
	CHECK(write(l->up, "a", 1) == 1);
	pause(); /* until killed */
	return 1;
}

static int one_group_at_a_time(void *arg)
{
	struct keeper_proc k;
	struct one g, b;
	char name[64], c;
	int kept, up[2];
	struct live l = { name, -1 };
	pid_t a;

	(void)arg;
	tu_name(name, sizeof(name), "kf-live");
	keeper_start(&k, K("kt-o"));
	CHECK(one_open(&g, name, K("kt-o"), 2 * MIB, 'K', &kept) == 0 && !kept);
	one_close(&g);
	CHECK(pipe(up) == 0);
	l.up = up[1];
	a = tu_fork(group_a, &l);
	close(up[1]);
	CHECK(read(up[0], &c, 1) == 1);
	/* The same declaration while A maps it: new memory, not A's. */
	CHECK(one_open(&b, name, K("kt-o"), 2 * MIB, 'B', &kept) == 0 && !kept);
	heard(&b, K("keeper 'kt-o' holds one of this name that a live group maps now (declared "
		    "the same), and lends it to one group at a time: allocated anew and kept by no "
		    "one"));
	one_close(&b);
	/* Another declaration while A maps it: A's is not freed. */
	CHECK(one_open(&b, name, K("kt-o"), 4 * MIB, 'B', &kept) == 0 && !kept);
	heard(&b, "(size: kept 2 MiB, declared now 4 MiB)");
	one_close(&b);
	/* A killed: the kernel drops its claim with its mapping. */
	CHECK(kill(a, SIGKILL) == 0);
	CHECK(tu_wait(a, 10000) == 128 + SIGKILL);
	CHECK(one_open(&g, name, K("kt-o"), 2 * MIB, 'C', &kept) == 'A' && kept);
	one_close(&g);
	CHECK(keeper_stop(&k, SIGTERM) == 0);
	CHECK(!strstr(k.said, "freed")); /* nothing of A's was let go */
	return 0;
}

/* Memory an owner could not map writable: the keeper does not take it. */
static int unwritable_refused(void *arg)
{
	struct keeper_proc k;
	struct sseg_keep_msg a;
	char name[64], path[64];
	int fd, ro;

	(void)arg;
	tu_name(name, sizeof(name), "kf-ro");
	keeper_start(&k, K("kt-w"));
	fd = owner_memfd(2 * MIB, 'F', F_SEAL_FUTURE_WRITE);
	a = hold(K("kt-w"), name, 2 * MIB, fd, 0);
	CHECK(a.op == SSEG_KEEP_REFUSED && strstr(a.why, "sealed against writing "
							   "(F_SEAL_FUTURE_WRITE)"));
	close(fd);
	fd = owner_memfd(2 * MIB, 'R', 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(ro >= 0);
	a = hold(K("kt-w"), name, 2 * MIB, ro, 0);
	CHECK(a.op == SSEG_KEEP_REFUSED && strstr(a.why, "the memfd was opened read-only"));
	close(ro);
	close(fd);
	return keeper_stop(&k, SIGTERM);
}

/* ---- a fake keeper, listening where the real one would ---- */

enum fake_kind {
	FAKE_SILENT,   /* takes connections, never answers */
	FAKE_GIVES_RO, /* answers a take with memory sealed against writes */
};

struct fake {
	const char *keeper;
	enum fake_kind kind;
	int report[2]; /* "r" once it listens; then the flags of a HOLD */
};

static int fake_keeper(void *arg)
{
	struct fake *f = arg;
	struct sseg_os_named n;
	uint8_t frame[SSEG_KEEP_FRAME];
	struct sseg_keep_msg q, a = { .op = SSEG_KEEP_KEPT };
	char file[96], one;
	pid_t holder;
	int s, fd;

	sseg_keep_socket(f->keeper, file, sizeof(file));
	CHECK_RC(sseg_os_listen_named(file, 4, &n, &holder), 0);
	CHECK(write(f->report[1], "r", 1) == 1);
	for (;;) {
		CHECK_RC(sseg_os_accept(n.fd, sseg_now() + 60, &s), 0);
		if (f->kind == FAKE_SILENT)
			continue; /* held open, unanswered */
		CHECK_RC(sseg_os_recv_all(s, frame, sizeof(frame), sseg_now() + 10), 0);
		CHECK_RC(sseg_keep_decode(frame, &q), 0);
		if (q.op == SSEG_KEEP_HOLD) {
			CHECK(write(f->report[1], &q.flags, sizeof(q.flags)) == sizeof(q.flags));
			return 0;
		}
		a.decl = q.decl;
		a.decl.mapped_size = q.decl.d.size;
		a.decl.page_size = 4096;
		a.decl.pages = SSEG_PAGES_BASE;
		fd = owner_memfd(q.decl.d.size, 'X', F_SEAL_FUTURE_WRITE);
		sseg_keep_encode(&a, frame);
		CHECK_RC(sseg_os_send_all(s, frame, sizeof(frame), sseg_now() + 10), 0);
		one = 'K';
		CHECK_RC(sseg_os_send_fd(s, fd, &one, 1, sseg_now() + 10), 0);
		close(fd);
		close(s);
	}
}

static pid_t fake_start(struct fake *f)
{
	pid_t pid;
	char c;

	CHECK(pipe(f->report) == 0);
	pid = tu_fork(fake_keeper, f);
	CHECK(read(f->report[0], &c, 1) == 1);
	return pid;
}

/* What a keeper gives that this owner cannot map writable is let go: the
 * owner allocates anew, and asks the keeper to keep that one instead. */
static int unwritable_given(void *arg)
{
	struct fake f = { .keeper = K("kt-g"), .kind = FAKE_GIVES_RO };
	struct one g;
	char name[64];
	uint32_t flags = 0;
	int kept;
	pid_t pid;

	(void)arg;
	tu_name(name, sizeof(name), "kf-given");
	pid = fake_start(&f);
	CHECK(one_open(&g, name, f.keeper, 2 * MIB, 'N', &kept) == 0 && !kept);
	heard(&g, "gave memory this owner cannot use");
	heard(&g, "sealed against writing (F_SEAL_FUTURE_WRITE)");
	heard(&g, "allocated anew, and the keeper is asked to keep it instead");
	CHECK(read(f.report[0], &flags, sizeof(flags)) == sizeof(flags));
	CHECK(flags & SSEG_KEEP_REPLACE);
	one_close(&g);
	return tu_wait(pid, 10000);
}

/* A keeper that never answers: two ranks whose create and exchange are
 * bounded by 5 s still meet (the owner waited at most half of it: more,
 * and the peer's exchange would have given up), and the owner says so. */
static int slow_keeper(void *arg)
{
	struct fake f = { .keeper = K("kt-s"), .kind = FAKE_SILENT };
	struct rank_job j[2];
	char name[64];
	pid_t fake, pid[2];

	(void)arg;
	tu_name(name, sizeof(name), "kf-slow");
	fake = fake_start(&f);
	for (int r = 0; r < 2; r++) {
		j[r] = (struct rank_job){ .name = name, .keeper = f.keeper, .size = 2 * MIB,
					  .rank = r, .timeout_ms = 5000,
					  .says = K("keeper 'kt-s' did not answer within the create's "
						    "share of its timeout") };
		pid[r] = tu_fork(rank_main, &j[r]);
	}
	for (int r = 0; r < 2; r++)
		CHECK(tu_wait(pid[r], 30000) == 0);
	kill(fake, SIGKILL);
	tu_wait(fake, 10000);
	return 0;
}

/* Another user floods the keeper's socket: it cannot connect at all, and
 * the keeper's own user is served every time meanwhile. */
static char flood_path[256];

static int flooder(void *arg)
{
	int *refused = arg;

	for (int i = 0; i < 20000; i++) {
		int s = intruder_dial(flood_path);

		if (s >= 0)
			return 1; /* it got in */
		*refused += errno == EACCES;
	}
	return *refused == 20000 ? 0 : 1;
}

static int flood_by_another_user(void *arg)
{
	struct keeper_proc k;
	struct one g;
	char name[64];
	int kept, refused = 0;
	pid_t pid;

	(void)arg;
	if (geteuid() != 0) {
		printf("keeper_faults: another user needs root: left out\n");
		return 0;
	}
	tu_name(name, sizeof(name), "kf-flood");
	keeper_start(&k, K("kt-f"));
	CHECK(one_open(&g, name, K("kt-f"), 2 * MIB, 'F', &kept) == 0 && !kept);
	one_close(&g);
	keeper_socket_path(K("kt-f"), flood_path, sizeof(flood_path));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(setgid(STRANGER_UID) || setuid(STRANGER_UID) || flooder(&refused));
	}
	for (int i = 0; i < 50; i++) {
		uint64_t size;
		int fd;

		CHECK_RC(sseg_keeper_lend(K("kt-f"), name, &fd, &size), 0);
		close(fd);
	}
	CHECK(tu_wait(pid, 60000) == 0);
	CHECK(!strstr(k.said, "refused pid")); /* it never even met the stranger */
	return keeper_stop(&k, SIGTERM);
}

/* Another user made this user's runtime directory first (in a mount
 * namespace of the case's own): the keeper does not start, and says who is
 * in the way. It runs as STRANGER_UID in this process (a checkout that
 * user may not enter holds no program it could run). */
static int squatted_keeper(void *arg)
{
	(void)arg;
	if (setgid(STRANGER_UID) || setuid(STRANGER_UID))
		return 99;
	CHECK_RC(sseg_keeper_run("kf", NULL, NULL), -EPERM);
	CHECK_ERR_HAS("the runtime directory /tmp/sharedseg-65534 belongs to uid 0, not to this "
		      "user (uid 65534): another user is in the way");
	return 0;
}

static int squatted_directory(void *arg)
{
	(void)arg;
	if (geteuid() != 0) {
		printf("keeper_faults: another user's directory needs root: left out\n");
		return 0;
	}
	tu_rundir_taken(STRANGER_UID); /* root's, where 65534's belongs */
	return tu_wait(tu_fork(squatted_keeper, NULL), 10000);
}

/* ---- the keeper's own life ---- */

/* Whether pid ignores sig, as the kernel says (/proc/PID/status). */
static int ignores(pid_t pid, int sig)
{
	char path[64], line[256];
	unsigned long long mask = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	CHECK(f != NULL);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigIgn: %llx", &mask) == 1)
			break;
	fclose(f);
	return (int)((mask >> (sig - 1)) & 1);
}

/* `sharedseg keep` as nohup starts it: SIGHUP ignored, and it stays so. */
static int under_nohup(void *arg)
{
	struct keeper_proc k;
	uint64_t size;
	int fd;

	(void)arg;
	signal(SIGHUP, SIG_IGN); /* inherited by the keeper, as nohup leaves it */
	keeper_start(&k, K("kt-h"));
	CHECK(ignores(k.pid, SIGHUP) && !ignores(k.pid, SIGTERM));
	CHECK(kill(k.pid, SIGHUP) == 0);
	CHECK_RC(sseg_keeper_lend(K("kt-h"), "none", &fd, &size), -ENOENT); /* it serves */
	return keeper_stop(&k, SIGTERM);
}

/* At its open-file limit the keeper says so, to the owner and in its log,
 * and what it held stays. */
/* How many descriptors pid has open. */
static int open_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static int at_the_fd_limit(void *arg)
{
	struct rlimit limit;
	struct keeper_proc k;
	struct one g;
	char name[64], held[64] = "";
	int kept, refused = 0, open_now;

	(void)arg;
	keeper_start(&k, K("kt-n"));
	/* Room for a few segments past what it holds open now (inherited
	 * descriptors included), set while it runs. */
	open_now = open_fds(k.pid);
	limit = (struct rlimit){ (rlim_t)open_now + 6, (rlim_t)open_now + 6 };
	CHECK(open_now > 0 && prlimit(k.pid, RLIMIT_NOFILE, &limit, NULL) == 0);
	for (int i = 0; i < 16 && !refused; i++) {
		snprintf(name, sizeof(name), "kf-fds-%d-%d", (int)getpid(), i);
		CHECK(one_open(&g, name, K("kt-n"), 2 * MIB, 'L', &kept) == 0 && !kept);
		refused = strstr(g.log, "kept by no one") || strstr(g.log, "did not keep it");
		if (!refused)
			snprintf(held, sizeof(held), "%s", name);
		one_close(&g);
	}
	CHECK(refused && held[0]); /* it held some, then said it could hold no more */
	hear(&k, "ulimit -n");
	CHECK(one_open(&g, held, K("kt-n"), 2 * MIB, 'M', &kept) == 'L' && kept);
	one_close(&g);
	return keeper_stop(&k, SIGTERM);
}

/* Idle at debug level, the keeper says nothing. */
static int quiet_when_idle(void *arg)
{
	struct keeper_proc k;
	size_t before;

	(void)arg;
	setenv("SHAREDSEG_LOG", "debug", 1);
	keeper_start(&k, K("kt-q"));
	before = k.n;
	tu_nap_ms(1000); /* a second of nothing: the thing measured */
	CHECK(keeper_stop(&k, SIGTERM) == 0);
	k.said[k.n] = '\0';
	/* What it said after it ran: its stop, at most. */
	CHECK(!strstr(k.said + before, "no connection came in time"));
	return 0;
}

/* What the tool says of a bad name, and of a command it does not have. */
static int the_tools_words(void *arg)
{
	char cmd[512], out[1024];
	FILE *p;
	size_t n;
	int status;

	(void)arg;
	snprintf(cmd, sizeof(cmd), "'%s' keep --name 'bad name' 2>&1; echo \"rc=$?\"; '%s' "
		 "frobnicate 2>&1", tu_build_file("sharedseg"), tu_build_file("sharedseg"));
	p = popen(cmd, "r");
	CHECK(p != NULL);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	status = pclose(p);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2);
	CHECK(strstr(out, "sharedseg keep: --name: a keeper's name is made of A-Z a-z 0-9 . _ -: "
			  "byte 3 is 0x20\nrc=2\n"));
	CHECK(strstr(out, "unknown command 'frobnicate' (commands: probe, demo, bench, ls, keep;"));
	return 0;
}

static const struct tu_case cases[] = {
	{ "a hold never replaces", hold_never_replaces, NULL, 0 },
	{ "one group at a time", one_group_at_a_time, NULL, 0 },
	{ "unwritable refused", unwritable_refused, NULL, 0 },
	{ "unwritable given", unwritable_given, NULL, 0 },
	{ "a slow keeper", slow_keeper, NULL, 0 },
	{ "a flood by another user", flood_by_another_user, NULL, 0 },
	{ "a squatted directory", squatted_directory, NULL, 0 },
	{ "under nohup", under_nohup, NULL, 0 },
	{ "at the fd limit", at_the_fd_limit, NULL, 0 },
	{ "quiet when idle", quiet_when_idle, NULL, 0 },
	{ "the tool's words", the_tools_words, NULL, 0 },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	keeper_test_init();
	signal(SIGPIPE, SIG_IGN);
	if (tu_run_cases(argc, argv, cases))
		return 1;
	printf("keeper_faults: ok\n");
	return 0;
}
