/* SPDX-License-Identifier: Apache-2.0 */
/* populate=background: complete returns before the pages are resident, the
 * owner's work makes them so while the segment is in use, progress counts
 * them on every rank, the owner's wait returns the work's error (logged
 * when it happened), destroy stops the work first, and a wait can be
 * interrupted or time out. The work is held at a chosen step through the
 * fault hook, so no case depends on how fast the machine populates. */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "testutil.h"

#define SZ (256ull << 20)
#define STEP (64ull << 20) /* background.c's step */

/* ---- holding the work at its n-th populate call ---- */

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int hold_at;   /* the call to hold (1-based); 0: none */
static int calls;     /* populate calls seen */
static int held;      /* a call is held now */
static int released;

static void hold_hook(const char *site)
{
	if (strcmp(site, "populate"))
		return;
	pthread_mutex_lock(&hold_lock);
	if (++calls == hold_at) {
		held = 1;
		pthread_cond_broadcast(&hold_cond);
		while (!released)
			pthread_cond_wait(&hold_cond, &hold_lock);
	}
	pthread_mutex_unlock(&hold_lock);
}

static void hold(int nth)
{
	pthread_mutex_lock(&hold_lock);
	hold_at = nth;
	calls = held = released = 0;
	pthread_mutex_unlock(&hold_lock);
	sseg_test_fault_hook(hold_hook);
}

static void wait_held(void)
{
	pthread_mutex_lock(&hold_lock);
	while (!held)
		pthread_cond_wait(&hold_cond, &hold_lock);
	pthread_mutex_unlock(&hold_lock);
}

static void release_hold(void)
{
	pthread_mutex_lock(&hold_lock);
	released = 1;
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_lock);
}

static int hold_calls(void)
{
	int n;

	pthread_mutex_lock(&hold_lock);
	n = calls;
	pthread_mutex_unlock(&hold_lock);
	return n;
}

/* ---- what the log callback saw ---- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error_line[512]; /* the last warning or error */

static void on_log(enum sseg_log_level level, const char *message, void *ctx)
{
	(void)ctx;
	if (level != SSEG_LOG_ERROR && level != SSEG_LOG_WARN)
		return;
	pthread_mutex_lock(&log_lock);
	snprintf(last_error_line, sizeof(last_error_line), "%s", message);
	pthread_mutex_unlock(&log_lock);
}

static int logged(const char *needle)
{
	int found;

	pthread_mutex_lock(&log_lock);
	found = strstr(last_error_line, needle) != NULL;
	pthread_mutex_unlock(&log_lock);
	return found;
}

static int threads_now(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	CHECK(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A joined thread leaves /proc/self/task when the kernel reaps it, a moment
 * after pthread_join returned (the join wakes at the tid clear, earlier in
 * the thread's exit). So a count that should drop is read until it does,
 * within 10 s; a thread left running keeps it up and the check fails. */
static int threads_settled(int want)
{
	struct timespec step = { 0, 1000000 };
	int n = threads_now();

	for (int i = 0; n != want && i < 10000; i++) {
		nanosleep(&step, NULL);
		n = threads_now();
	}
	return n;
}

static void ranks(struct tu_rank *r, int n, const char *prefix, uint64_t size, int threads)
{
	static char names[8][64];
	static int used;
	char *name = names[used++ % 8];

	tu_name(name, 64, prefix);
	memset(r, 0, sizeof(*r) * (size_t)n);
	for (int i = 0; i < n; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = name,
						.size = size, .world_size = n, .rank = i,
						.pages = SSEG_PAGES_BASE,
						.populate = SSEG_POPULATE_BACKGROUND,
						.populate_threads = threads };
	CHECK(tu_run_inproc(r, n) == 0);
}

static uint64_t resident(sseg_t *seg)
{
	uint64_t bytes = 0, total = 0;

	CHECK_RC(sseg_populate_progress(seg, &bytes, &total), 0);
	CHECK(total == SZ && bytes <= total);
	return bytes;
}

/* complete returns with the work held at its first step: nothing resident,
 * yet the segment is usable; released, every rank sees it all resident. */
static void usable_before_resident(void)
{
	struct tu_rank r[2];
	unsigned char *a, *b;

	hold(1);
	ranks(r, 2, "bg-use", SZ, 1);
	wait_held();
	CHECK(resident(r[0].seg) == 0 && resident(r[1].seg) == 0);
	CHECK_RC(sseg_populate_wait(r[1].seg, 0), -ETIMEDOUT);
	CHECK_ERR_HAS("0 of 268435456 bytes resident");
	a = sseg_base(r[0].seg);
	b = sseg_base(r[1].seg);
	/* The engine's first touch, while the work waits: faulted then. */
	a[SZ - 1] = 0x5a;
	CHECK(b[SZ - 1] == 0x5a && resident(r[1].seg) == 4096);
	release_hold();
	CHECK_RC(sseg_populate_wait(r[1].seg, 60000), 0);
	CHECK(resident(r[1].seg) == SZ);
	CHECK_RC(sseg_populate_wait(r[0].seg, 60000), 0);
	CHECK(b[SZ - 1] == 0x5a && a[0] == 0);
	sseg_test_fault_hook(NULL);
	tu_destroy_all(r, 2);
}

/* A step that fails (the kernel's answer to a drained pool or a memory
 * limit): logged at once, returned by the owner's wait; the pages left are
 * faulted at first touch. */
static void failure_reported(void)
{
	struct tu_rank r[2];
	unsigned char *a, *b;

	sseg_set_log(on_log, NULL);
	sseg_test_fault("populate", 2, 1, -EFAULT);
	ranks(r, 2, "bg-fail", SZ, 1);
	CHECK_RC(sseg_populate_wait(r[0].seg, 60000), -ENOMEM);
	CHECK_ERR_HAS("populating 67108864 bytes at offset 134217728 failed: out of memory");
	CHECK(logged("background population stopped with 134217728 of 268435456 bytes resident"));
	CHECK(logged("out of memory"));
	CHECK(resident(r[1].seg) == 2 * STEP);
	/* Asked again, the same answer. */
	CHECK_RC(sseg_populate_wait(r[0].seg, 0), -ENOMEM);
	sseg_test_fault(NULL, 0, 0, 0);
	a = sseg_base(r[0].seg);
	b = sseg_base(r[1].seg);
	for (uint64_t off = 0; off < SZ; off += 4096)
		a[off] = tu_pattern(0, off);
	for (uint64_t off = 0; off < SZ; off += 4096)
		CHECK(b[off] == tu_pattern(0, off));
	CHECK(resident(r[1].seg) == SZ);
	/* A peer's wait sees the pages, not the owner's error. */
	CHECK_RC(sseg_populate_wait(r[1].seg, 0), 0);
	sseg_set_log(NULL, NULL);
	tu_destroy_all(r, 2);
}

struct destroyer {
	sseg_t *seg;
	int rc;
};

static void *destroy_thread(void *arg)
{
	struct destroyer *d = arg;

	d->rc = sseg_destroy(d->seg);
	return NULL;
}

/* Destroy while a step runs: it stops the work at the end of that step,
 * joins it, and only then releases the pages. */
static void destroy_stops_work(void)
{
	struct tu_rank r[1];
	struct destroyer d;
	pthread_t tid;
	int before = threads_now();

	hold(2);
	ranks(r, 1, "bg-destroy", SZ, 1);
	wait_held();
	CHECK(threads_now() == before + 1);
	d = (struct destroyer){ .seg = r[0].seg, .rc = 1 };
	CHECK(pthread_create(&tid, NULL, destroy_thread, &d) == 0);
	release_hold();
	CHECK(pthread_join(tid, NULL) == 0);
	CHECK_RC(d.rc, 0);
	CHECK(hold_calls() == 2); /* 4 steps of 64 MiB, stopped after the second */
	CHECK(threads_settled(before) == before);
	sseg_test_fault_hook(NULL);
}

static int interrupts, interrupting;

static int interrupt_on_second(void *ctx)
{
	(void)ctx;
	return interrupting && ++interrupts >= 2;
}

/* The owner's wait asks the interrupt check while it waits. */
static void wait_interrupted(void)
{
	struct tu_rank r[1];

	hold(1);
	memset(r, 0, sizeof(r));
	r[0].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "bg-intr",
					.size = SZ, .world_size = 1, .pages = SSEG_PAGES_BASE,
					.populate = SSEG_POPULATE_BACKGROUND,
					.interrupt = interrupt_on_second };
	CHECK(tu_run_inproc(r, 1) == 0);
	wait_held();
	interrupts = 0;
	interrupting = 1;
	CHECK_RC(sseg_populate_wait(r[0].seg, -1), -EINTR);
	CHECK_ERR_HAS("interrupted while waiting");
	CHECK(interrupts == 2);
	interrupting = 0;
	CHECK_RC(sseg_populate_wait(r[0].seg, 30), -ETIMEDOUT);
	release_hold();
	CHECK_RC(sseg_populate_wait(r[0].seg, -1), 0);
	CHECK(resident(r[0].seg) == SZ);
	sseg_test_fault_hook(NULL);
	tu_destroy_all(r, 1);
}

/* Progress counts the pages in every mode; only background waits. */
static void other_modes(void)
{
	struct tu_rank r[2];
	unsigned char *b;
	char name[64];

	for (int mode = SSEG_POPULATE_OWNER; mode <= SSEG_POPULATE_LAZY; mode++) {
		tu_name(name, sizeof(name), "bg-mode");
		memset(r, 0, sizeof(r));
		for (int i = 0; i < 2; i++)
			r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts),
							.name = name, .size = SZ, .world_size = 2,
							.rank = i, .pages = SSEG_PAGES_BASE,
							.populate = (enum sseg_populate)mode };
		CHECK(tu_run_inproc(r, 2) == 0);
		CHECK_RC(sseg_populate_wait(r[1].seg, 0), 0);
		CHECK(resident(r[1].seg) == (mode == SSEG_POPULATE_LAZY ? 0 : SZ));
		if (mode == SSEG_POPULATE_LAZY) {
			b = sseg_base(r[1].seg);
			for (uint64_t off = 0; off < SZ / 2; off += 4096)
				b[off] = 1;
			CHECK(resident(r[0].seg) == SZ / 2);
		}
		tu_destroy_all(r, 2);
	}
	CHECK_RC(sseg_populate_progress(NULL, NULL, NULL), -EINVAL);
	CHECK_RC(sseg_populate_wait(NULL, 0), -EINVAL);
}

/* The work's thread could not start: the owner warns once (the segment's
 * name once, not twice), and the peers' waits end with the owner's word. */
static void thread_refused(void)
{
	struct tu_rank r[2];
	char name_twice[160];

	sseg_set_log(on_log, NULL);
	sseg_test_fault("background_thread", 0, 1, -EAGAIN);
	ranks(r, 2, "bg-thread", SZ, 1);
	sseg_test_fault(NULL, 0, 0, 0);
	CHECK(logged("': cannot start background population: Resource temporarily unavailable; "
		     "pages are faulted at first touch"));
	snprintf(name_twice, sizeof(name_twice), "segment '%s': segment", r[0].opts.name);
	CHECK(!logged(name_twice));
	CHECK_RC(sseg_populate_wait(r[1].seg, -1), -EAGAIN);
	CHECK_ERR_HAS("owner rank 0 stopped populating in the background with 0 B of 256 MiB "
		      "resident: cannot start background population");
	CHECK_RC(sseg_populate_wait(r[0].seg, -1), -EAGAIN);
	CHECK_ERR_HAS("cannot start background population");
	sseg_set_log(NULL, NULL);
	tu_destroy_all(r, 2);
}

/* ---- a peer whose owner is another process ---- */

enum owner_end { OWNER_KILLED, OWNER_DESTROYS, OWNER_FAILS };

struct owner_job {
	const char *name;
	enum owner_end end;
	int to_peer[2], to_owner[2]; /* pipes: "held"/"done" up, "go" down */
};

static int tell(int fd, char c)
{
	return write(fd, &c, 1) == 1 ? 0 : -1;
}

static char hear(int fd)
{
	char c = 0;

	return read(fd, &c, 1) == 1 ? c : 0;
}

/* The owner: its work held, told the peer so; then it is killed with two
 * steps resident, destroys after its second step, or has its third fail,
 * and stays alive until the peer has judged what it saw. */
static int owner_main(void *arg)
{
	struct owner_job *j = arg;
	SSEG_OPTS(o, .name = j->name, .size = SZ, .world_size = 2, .rank = 0,
		  .pages = SSEG_PAGES_BASE, .populate = SSEG_POPULATE_BACKGROUND,
		  .populate_threads = 1);
	struct sseg_local_group *g;
	struct destroyer d;
	pthread_t tid;
	sseg_t *seg = NULL;

	if (j->end == OWNER_FAILS)
		sseg_test_fault("populate", 2, 1, -EFAULT);
	else
		hold(j->end == OWNER_KILLED ? 3 : 2);
	CHECK_RC(sseg_local_group_open(j->name, 0, 2, 30000, &g), 0);
	CHECK_RC(sseg_open(&o, sseg_local_allgather, g, &seg), 0);
	if (j->end != OWNER_FAILS)
		wait_held();
	CHECK(tell(j->to_peer[1], 'h') == 0);
	CHECK(hear(j->to_owner[0]) == 'g');
	if (j->end == OWNER_DESTROYS) {
		d = (struct destroyer){ .seg = seg, .rc = 1 };
		CHECK(pthread_create(&tid, NULL, destroy_thread, &d) == 0);
		release_hold();
		CHECK(pthread_join(tid, NULL) == 0 && d.rc == 0);
		CHECK(tell(j->to_peer[1], 'd') == 0);
	}
	CHECK(hear(j->to_owner[0]) == 'e'); /* the peer judged; killed before otherwise */
	if (j->end == OWNER_FAILS)
		CHECK_RC(sseg_destroy(seg), 0); /* joins its stopped thread */
	sseg_local_group_close(g);
	return 0;
}

/* The peer's unbounded wait ends with the owner's end, not never: the
 * owner killed (its channel closes), destroying (its word), or its work
 * failing (its word, its sentence). Its own touches still fault the rest. */
static void peer_of(enum owner_end end, int want, const char *says)
{
	struct owner_job j = { .end = end };
	SSEG_OPTS(o, .size = SZ, .world_size = 2, .rank = 1, .pages = SSEG_PAGES_BASE,
		  .populate = SSEG_POPULATE_BACKGROUND);
	struct sseg_local_group *g;
	char name[64];
	unsigned char *p;
	sseg_t *seg = NULL;
	pid_t owner;

	tu_name(name, sizeof(name), "bg-owner");
	j.name = o.name = name;
	CHECK(pipe(j.to_peer) == 0 && pipe(j.to_owner) == 0);
	owner = tu_fork(owner_main, &j);
	CHECK_RC(sseg_local_group_open(name, 1, 2, 30000, &g), 0);
	CHECK_RC(sseg_open(&o, sseg_local_allgather, g, &seg), 0);
	CHECK(hear(j.to_peer[0]) == 'h');
	if (end == OWNER_KILLED) {
		CHECK(kill(owner, SIGKILL) == 0);
		CHECK(tu_wait(owner, 10000) == 128 + SIGKILL);
	} else {
		CHECK(tell(j.to_owner[1], 'g') == 0);
		if (end == OWNER_DESTROYS)
			CHECK(hear(j.to_peer[0]) == 'd');
	}
	alarm(60); /* the old wait never returned: fail rather than hang */
	CHECK_RC(sseg_populate_wait(seg, -1), want);
	alarm(0);
	CHECK_ERR_HAS(says);
	CHECK_ERR_HAS("128 MiB of 256 MiB resident");
	CHECK_ERR_HAS("the pages left are faulted at first touch");
	CHECK(resident(seg) == 2 * STEP);
	/* Asked again, the same; the peer's touches fault the rest. */
	CHECK_RC(sseg_populate_wait(seg, 0), want);
	p = sseg_base(seg);
	for (uint64_t off = 0; off < SZ; off += 4096)
		p[off] = 1;
	CHECK_RC(sseg_populate_wait(seg, -1), 0);
	if (end != OWNER_KILLED) {
		CHECK(tell(j.to_owner[1], 'e') == 0);
		CHECK(tu_wait(owner, 30000) == 0);
	}
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_local_group_close(g);
	for (int i = 0; i < 2; i++) {
		close(j.to_peer[i]);
		close(j.to_owner[i]);
	}
}

static void owner_ends(void)
{
	peer_of(OWNER_KILLED, -EOWNERDEAD,
		"closed its channel before it finished populating in the background (it exited or "
		"was killed), with 128 MiB");
	peer_of(OWNER_DESTROYS, -ECANCELED, "it destroyed the segment first");
	peer_of(OWNER_FAILS, -ENOMEM, "populating 67108864 bytes at offset 134217728 failed");
}

int main(void)
{
	enum sseg_populate p;

	CHECK_RC(sseg_parse_populate("background", &p), 0);
	CHECK(p == SSEG_POPULATE_BACKGROUND && !strcmp(sseg_populate_name(p), "background"));
	usable_before_resident();
	failure_reported();
	destroy_stops_work();
	wait_interrupted();
	other_modes();
	thread_refused();
	owner_ends();
	printf("background: ok\n");
	return 0;
}
