/* SPDX-License-Identifier: Apache-2.0 */
/* SIGKILL at every point of a segment's life, for the owner and for a peer,
 * on base, THP and HugeTLB pages, in 4-rank groups (processes, the
 * built-in local exchange, sseg_open as a C program would call it):
 *
 *   create      after sseg_create returned, before the exchange
 *   exchange    inside the all-gather of blobs (the hub after gathering,
 *               a peer before sending its blob)
 *   complete    after the exchange, before sseg_complete
 *   hand-over   inside it: the owner after serving one peer of three, a
 *               peer holding the owner's fd before mapping it
 *   handed      after it: the owner once every peer acked, a peer mapped
 *               but not yet acked
 *   returned    sseg_complete returned, the group has not yet agreed
 *   opened      the group agreed and the owner wrote the data
 *   destroy     inside sseg_destroy, before the window is unmapped
 *
 * The victim kills itself where the library calls a function the test
 * wraps (-Wl,--wrap, see CMakeLists.txt), so every point is hit exactly.
 * Up to "returned" every surviving rank fails naming the dead rank within
 * its timeouts; from "opened" on every survivor keeps the data, intact and
 * shared. Either way no survivor keeps an fd or a mapping, no process of
 * the host holds the memfd once every rank is gone, and host Shmem and the
 * HugeTLB pool come back to where they were.
 *
 * SSEG_KILL_REPEAT=n runs each case n times (make reliability). */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The library's own declarations of the functions wrapped below. */
#include "frame.h"
#include "fdchannel.h"
#include "hostcheck.h"
#include "os/memfd.h"
#include "os/sock.h"
#include "os/window.h"
#include "testutil.h"

#define WORLD 4
#define OWNER 0
#define PEER 2
#define SZ (16u << 20)
#define COMPLETE_MS 1000
#define GROUP_MS 3000
/* A failing rank waits at most for complete, then for the exchange (and
 * the local exchange's one-second grace); more is a hang. */
#define FAIL_BOUND_S ((COMPLETE_MS + GROUP_MS + 1000) / 1000.0 + 1.0)
#define THP_KNOB "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
#define THP_KNOB_2M "/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled"

enum point { AFTER_CREATE, IN_EXCHANGE, BEFORE_COMPLETE, IN_HANDOVER, AFTER_HANDOVER,
	     COMPLETE_RETURNED, OPENED, IN_DESTROY, NPOINTS };

static const char *const point_names[NPOINTS] = {
	"create", "exchange", "complete", "hand-over", "handed", "returned", "opened", "destroy",
};

/* What each rank reports to the test (shared memory, one slot a rank). */
struct outcome {
	int open_rc;
	double open_s;
	char error[512];
	int data_ok;      /* opened: the pattern read back after the victim died */
	int huge_bytes_ok; /* the owner obtained the page kind asked for */
	int fds_left;     /* descriptors beyond the rank's start, at the end */
	int maps_left;    /* 1 when a mapping or window stayed */
	int finished;
};

struct job {
	char name[64];
	int rank;
	int victim;
	enum point point;
	enum sseg_pages pages;
	int go;               /* read end: the victim is gone */
	struct outcome *out;  /* this rank's slot */
};

/* ---- the victim's kill points, inside the library ---- */

static int kill_point = -1;
static int exchange_armed;
static int fds_sent;

static void die_at(enum point p)
{
	if (kill_point == (int)p)
		raise(SIGKILL);
}

int __real_sseg_frame_send(int sock, const struct sseg_frame *f, const void *body, int fd,
			   double deadline);
int __wrap_sseg_frame_send(int sock, const struct sseg_frame *f, const void *body, int fd,
			   double deadline);
int __real_sseg_os_send_fd(int sock, int fd, const void *data, size_t len, double deadline);
int __wrap_sseg_os_send_fd(int sock, int fd, const void *data, size_t len, double deadline);
int __real_sseg_os_memfd_check(int fd, uint64_t expect_size, uint64_t *page_size);
int __wrap_sseg_os_memfd_check(int fd, uint64_t expect_size, uint64_t *page_size);
int __real_sseg_channel_hand_over(struct sseg *seg, const struct sseg_blob *blobs, int fd,
				  sseg_channel_admit_fn admit);
int __wrap_sseg_channel_hand_over(struct sseg *seg, const struct sseg_blob *blobs, int fd,
				  sseg_channel_admit_fn admit);
int __real_sseg_channel_ack(struct sseg *seg, int owner_sock, int status);
int __wrap_sseg_channel_ack(struct sseg *seg, int owner_sock, int status);
int __real_sseg_os_window_release(void *base, uint64_t size);
int __wrap_sseg_os_window_release(void *base, uint64_t size);

/* The hub's first frame after gathering, a peer's first before sending. */
int __wrap_sseg_frame_send(int sock, const struct sseg_frame *f, const void *body, int fd,
			   double deadline)
{
	if (exchange_armed)
		die_at(IN_EXCHANGE);
	return __real_sseg_frame_send(sock, f, body, fd, deadline);
}

/* The owner dies with one peer served, two not. */
int __wrap_sseg_os_send_fd(int sock, int fd, const void *data, size_t len, double deadline)
{
	if (++fds_sent == 2)
		die_at(IN_HANDOVER);
	return __real_sseg_os_send_fd(sock, fd, data, len, deadline);
}

/* A peer dies holding the owner's fd, before mapping it. */
int __wrap_sseg_os_memfd_check(int fd, uint64_t expect_size, uint64_t *page_size)
{
	die_at(IN_HANDOVER);
	return __real_sseg_os_memfd_check(fd, expect_size, page_size);
}

/* The owner dies once every peer has acked its mapping. */
int __wrap_sseg_channel_hand_over(struct sseg *seg, const struct sseg_blob *blobs, int fd,
				  sseg_channel_admit_fn admit)
{
	int rc = __real_sseg_channel_hand_over(seg, blobs, fd, admit);

	die_at(AFTER_HANDOVER);
	return rc;
}

/* A peer dies mapped, before telling the owner. */
int __wrap_sseg_channel_ack(struct sseg *seg, int owner_sock, int status)
{
	die_at(AFTER_HANDOVER);
	return __real_sseg_channel_ack(seg, owner_sock, status);
}

int __wrap_sseg_os_window_release(void *base, uint64_t size)
{
	die_at(IN_DESTROY);
	return __real_sseg_os_window_release(base, size);
}

/* sseg_open's all-gather: the local exchange, with the points between. */
static int gather(const void *mine, void *all, size_t len, void *ctx)
{
	static int calls;
	int call = ++calls, rc;

	if (call == 1)
		die_at(AFTER_CREATE);
	if (call == 2)
		die_at(COMPLETE_RETURNED);
	exchange_armed = call == 1;
	rc = sseg_local_allgather(mine, all, len, ctx);
	exchange_armed = 0;
	if (call == 1 && !rc)
		die_at(BEFORE_COMPLETE);
	return rc;
}

/* ---- one rank ---- */

/* The owner's pattern fills the first half; each rank writes its own byte
 * at the end. */
#define MINE(rank) (SZ - 64 + (uint64_t)(rank))

static int check_data(const unsigned char *p)
{
	for (uint64_t off = 0; off < SZ / 2; off += 4093)
		if (p[off] != tu_pattern(OWNER, off))
			return 0;
	return 1;
}

/* After the group agreed: the owner writes, everyone waits for the victim
 * to be gone, then reads the owner's bytes and writes through its own view. */
static void use_segment(struct job *j, sseg_t *seg, struct sseg_local_group *g)
{
	unsigned char *p = sseg_base(seg);
	struct sseg_info info = { .sz = sizeof(info) };
	char one = 1, all[WORLD], byte;

	if (j->rank == OWNER) {
		for (uint64_t off = 0; off < SZ / 2; off += 4093)
			p[off] = tu_pattern(OWNER, off);
		CHECK_RC(sseg_info(seg, &info), 0);
		j->out->huge_bytes_ok = info.pages == j->pages &&
					(j->pages == SSEG_PAGES_BASE || info.huge_bytes == SZ);
	}
	CHECK_RC(sseg_local_allgather(&one, all, 1, g), 0);
	die_at(OPENED);
	if (j->rank != j->victim)
		CHECK(read(j->go, &byte, 1) == 1);
	j->out->data_ok = check_data(p);
	p[MINE(j->rank)] = (unsigned char)(0xe0 + j->rank); /* still writable */
	j->out->data_ok &= p[MINE(j->rank)] == 0xe0 + j->rank;
	CHECK_RC(sseg_destroy(seg), 0);
}

static int rank_main(void *arg)
{
	struct job *j = arg;
	SSEG_OPTS(o, .name = j->name, .size = SZ, .world_size = WORLD, .rank = j->rank,
		  .owner_rank = OWNER, .pages = j->pages, .timeout_ms = COMPLETE_MS);
	struct tu_maps maps = tu_maps();
	int fds = tu_count_fds();
	struct sseg_local_group *g;
	sseg_t *seg = NULL;
	double t0;

	CHECK_RC(sseg_local_group_open(j->name, j->rank, WORLD, GROUP_MS, &g), 0);
	if (j->rank == j->victim)
		kill_point = j->point;
	t0 = tu_now();
	j->out->open_rc = sseg_open(&o, gather, g, &seg);
	j->out->open_s = tu_now() - t0;
	if (j->out->open_rc)
		snprintf(j->out->error, sizeof(j->out->error), "%s", sseg_last_error());
	else
		use_segment(j, seg, g);
	sseg_local_group_close(g);
	j->out->fds_left = tu_count_fds() - fds;
	j->out->maps_left = !tu_maps_same(maps, tu_maps());
	j->out->finished = 1;
	return 0;
}

/* ---- one case: start the group, judge what every rank saw ---- */

struct verdict {
	int ok;
	double worst_fail_s;
	int64_t shmem_left, huge_left;
	int holders;
	char why[512];
};

static void fail(struct verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The first failure is the case's reason; every one is printed. */
static void fail(struct verdict *v, const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (v->ok)
		snprintf(v->why, sizeof(v->why), "%s", text);
	fprintf(stderr, "  %s\n", text);
	v->ok = 0;
}

static void judge_survivor(const struct job *j, const struct outcome *o, struct verdict *v)
{
	if (!o->finished)
		fail(v, "rank %d did not finish", j->rank);
	if (j->point < OPENED) {
		if (!o->open_rc)
			fail(v, "rank %d succeeded although the group lost a rank", j->rank);
		else if (!hc_names_rank(o->error, j->victim))
			fail(v, "rank %d failed without naming the dead rank: %s", j->rank, o->error);
		if (o->open_s > FAIL_BOUND_S)
			fail(v, "rank %d waited %.1f s, past its timeouts", j->rank, o->open_s);
		if (o->open_s > v->worst_fail_s)
			v->worst_fail_s = o->open_s;
	} else {
		if (o->open_rc)
			fail(v, "rank %d failed: %s", j->rank, o->error);
		else if (!o->data_ok)
			fail(v, "rank %d lost the data when a rank died", j->rank);
		if (j->rank == OWNER && !o->open_rc && !o->huge_bytes_ok)
			fail(v, "owner rank %d did not obtain the page kind asked for", j->rank);
	}
	if (o->fds_left > 0)
		fail(v, "rank %d kept %d descriptor(s)", j->rank, o->fds_left);
	if (o->maps_left)
		fail(v, "rank %d kept a mapping or window", j->rank);
}

static void await_ranks(struct job *jobs, const pid_t *pids, int go_write, struct verdict *v)
{
	int status = tu_wait(pids[jobs[0].victim], 15000);

	if (status != 128 + SIGKILL)
		fail(v, "the victim, rank %d, ended with %d instead of SIGKILL (-1: hung)",
		     jobs[0].victim, status);
	for (int r = 0; r < WORLD; r++)
		if (write(go_write, "g", 1) != 1)
			fail(v, "cannot release rank %d", r);
	for (int r = 0; r < WORLD; r++) {
		if (r == jobs[0].victim)
			continue;
		status = tu_wait(pids[r], 15000);
		if (status)
			fail(v, "rank %d ended with status %d (-1: hung)", r, status);
	}
}

static void run_case(enum sseg_pages pages, int victim, enum point point, struct verdict *v)
{
	struct outcome *out = mmap(NULL, sizeof(*out) * WORLD, PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct hc_host before = hc_host();
	struct job jobs[WORLD];
	pid_t pids[WORLD];
	char name[64], label[80];
	int go[2];

	CHECK(out != MAP_FAILED && pipe(go) == 0);
	memset(out, 0, sizeof(*out) * WORLD);
	memset(v, 0, sizeof(*v));
	v->ok = 1;
	tu_name(name, sizeof(name), "kp");
	for (int r = 0; r < WORLD; r++) {
		jobs[r] = (struct job){ .rank = r, .victim = victim, .point = point,
					.pages = pages, .go = go[0], .out = &out[r] };
		snprintf(jobs[r].name, sizeof(jobs[r].name), "%s", name);
	}
	for (int r = WORLD - 1; r >= 0; r--)
		pids[r] = tu_fork(rank_main, &jobs[r]);
	await_ranks(jobs, pids, go[1], v);
	for (int r = 0; r < WORLD; r++)
		if (r != victim)
			judge_survivor(&jobs[r], &out[r], v);
	snprintf(label, sizeof(label), "sseg:%s", name);
	v->holders = hc_memfd_holders(label, NULL, 0);
	if (v->holders)
		fail(v, "%d process(es) still hold the memfd", v->holders);
	if (hc_host_back(before, SZ / 2, 2000, &v->shmem_left, &v->huge_left))
		fail(v, "host memory not back (rank %d killed)", victim);
	close(go[0]);
	close(go[1]);
	munmap(out, sizeof(*out) * WORLD);
}

/* ---- the matrix ---- */

static int set_up_pages(enum sseg_pages pages)
{
	if (pages == SSEG_PAGES_HUGETLB_2M)
		return tu_hugetlb_reserve(SZ / (2u << 20) + 2);
	if (pages != SSEG_PAGES_THP)
		return 0;
	if (tu_knob_set(THP_KNOB, "advise"))
		return TU_SKIP;
	if (access(THP_KNOB_2M, W_OK) == 0 && tu_knob_set(THP_KNOB_2M, "inherit"))
		return TU_SKIP;
	return sseg_check_support(SSEG_BACKEND_MEMFD, SSEG_PAGES_THP) ? TU_SKIP : 0;
}

static int run_pages(enum sseg_pages pages, int repeat, int *cases, int *survived)
{
	int rc = set_up_pages(pages);

	if (rc) {
		fprintf(stderr, "kill_points: pages=%s cannot be set up here: %s\n",
			sseg_pages_name(pages), sseg_last_error());
		return rc;
	}
	for (int victim = OWNER; victim <= PEER; victim += PEER - OWNER) {
		for (int p = 0; p < NPOINTS; p++) {
			for (int n = 0; n < repeat; n++) {
				struct verdict v;
				char why[600];

				run_case(pages, victim, (enum point)p, &v);
				(*cases)++;
				*survived += v.ok;
				hc_record("{\"test\":\"kill_points\",\"pages\":\"%s\",\"victim\":\"%s\","
					  "\"point\":\"%s\",\"ok\":%d,\"worst_fail_s\":%.3f,"
					  "\"shmem_left\":%lld,\"huge_pages_left\":%lld,"
					  "\"holders\":%d,\"why\":\"%s\"}",
					  sseg_pages_name(pages), victim == OWNER ? "owner" : "peer",
					  point_names[p], v.ok, v.worst_fail_s,
					  (long long)v.shmem_left, (long long)v.huge_left, v.holders,
					  hc_json(v.why, why, sizeof(why)));
				printf("%-8s %-5s killed at %-9s: %s (slowest survivor %.2f s, Shmem %+lld)\n",
				       sseg_pages_name(pages), victim == OWNER ? "owner" : "peer",
				       point_names[p], v.ok ? "ok" : "FAILED", v.worst_fail_s,
				       (long long)v.shmem_left);
			}
		}
	}
	return 0;
}

int main(void)
{
	static const enum sseg_pages kinds[] = { SSEG_PAGES_BASE, SSEG_PAGES_THP,
						 SSEG_PAGES_HUGETLB_2M };
	int repeat = hc_scale("SSEG_KILL_REPEAT", 1), cases = 0, survived = 0, skipped = 0;

	/* No test changes a knob or the pool under these measurements. */
	tu_lock_machine();
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		int rc = run_pages(kinds[k], repeat, &cases, &survived);

		if (rc == TU_SKIP && getuid() == 0)
			return 1; /* root can set every knob: a skip would hide a failure */
		skipped += rc == TU_SKIP;
	}
	printf("kill_points: %d of %d kill points survived with nothing leaked\n", survived, cases);
	hc_record("{\"test\":\"kill_points_total\",\"cases\":%d,\"survived\":%d}", cases, survived);
	if (survived != cases)
		return 1;
	return skipped ? TU_SKIP : 0;
}
