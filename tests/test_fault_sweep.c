/* SPDX-License-Identifier: Apache-2.0 */
/* Every fault site of the library (src/fault.c), failed at each of its
 * first calls in a 4-rank group (ranks as threads: the n-th call of the
 * group fails): memfd_create, the fallocate of kernels without
 * MADV_POPULATE_WRITE, connect, sending the fd, mapping the segment into
 * its window (the owner's and each peer's), munmap in destroy. The
 * rank that meets the fault fails saying so, every failing rank has a
 * sentence and none waits past its timeout; destroy, retried, releases
 * everything (no fd, no mapping, nothing pending); the next group
 * completes as if nothing had happened. A backlog that stays full is
 * named as such. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "fault.h"
#include "hostcheck.h"
#include "testutil.h"

#define WORLD 4
#define SZ (4u << 20)
#define TIMEOUT_MS 1000

struct sweep {
	const char *site;
	int calls;       /* the first calls to fail, one at a time */
	int err;
	const char *says; /* what the failing rank's sentence holds */
	int old_kernel;   /* MADV_POPULATE_WRITE missing too */
};

static const struct sweep sweeps[] = {
	{ "memfd_create", 5, -EMFILE, "injected fault", 0 },
	{ "fallocate", 1, -ENOSPC, "out of memory", 1 },
	{ "connect", 3, -ENOBUFS, "injected fault", 0 },
	{ "send_fd", 3, -EPIPE, "injected fault", 0 },
	{ "munmap", 4, -EIO, "injected fault", 0 },
	{ "window_map", 4, -ENOMEM, "injected fault", 0 },
};

static void group(struct tu_rank *r, const char *name)
{
	memset(r, 0, sizeof(*r) * WORLD);
	for (int i = 0; i < WORLD; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = name,
						.size = SZ, .world_size = WORLD, .rank = i,
						.pages = SSEG_PAGES_BASE, .timeout_ms = TIMEOUT_MS };
}

/* Destroy as an application would: again while it says to. */
static int destroy_all(struct tu_rank *r)
{
	int retries = 0;

	for (int i = 0; i < WORLD; i++) {
		int rc;

		while (r[i].seg && (rc = sseg_destroy(r[i].seg)) != 0 && rc != -EINPROGRESS)
			retries++;
		r[i].seg = NULL;
	}
	return retries;
}

struct outcome {
	int failed;     /* ranks that failed */
	int said;       /* of them, saying what the fault was */
	int mute;       /* failing without a sentence */
	double took;
	int retries;
	char first[512];
};

static void run_one(const struct sweep *s, int call, struct outcome *o)
{
	struct tu_rank r[WORLD];
	char name[64];
	double t0 = tu_now();

	memset(o, 0, sizeof(*o));
	tu_name(name, sizeof(name), "sweep");
	group(r, name);
	if (s->old_kernel)
		sseg_test_fault("madv_populate", 0, -1, -EINVAL);
	sseg_test_fault(s->site, call - 1, 1, s->err);
	tu_run_inproc(r, WORLD);
	o->took = tu_now() - t0;
	for (int i = 0; i < WORLD; i++) {
		if (!r[i].create_rc && !r[i].complete_rc)
			continue;
		o->failed++;
		o->said += strstr(r[i].error, s->says) != NULL;
		o->mute += !r[i].error[0];
		if (!o->first[0])
			snprintf(o->first, sizeof(o->first), "rank %d: %s", i, r[i].error);
	}
	o->retries = destroy_all(r);
	sseg_test_fault(NULL, 0, 0, 0);
}

/* The next group, without faults, completes and shares its pages. */
static int clean_group(void)
{
	struct tu_rank r[WORLD];
	int failed;

	group(r, "sweep-after");
	failed = tu_run_inproc(r, WORLD);
	if (!failed) {
		((unsigned char *)sseg_base(r[0].seg))[7] = 7;
		failed = ((unsigned char *)sseg_base(r[3].seg))[7] != 7;
	}
	destroy_all(r);
	return failed;
}

/* Every connect finds the owner's backlog full until the peers' deadline:
 * each peer says so, rather than passing on EAGAIN's "try again". */
static int backlog_full(void)
{
	struct tu_rank r[WORLD];
	int named = 0;

	group(r, "sweep-backlog");
	sseg_test_fault("connect", 0, -1, -EAGAIN);
	tu_run_inproc(r, WORLD);
	sseg_test_fault(NULL, 0, 0, 0);
	for (int i = 1; i < WORLD; i++)
		named += r[i].complete_rc == -EAGAIN &&
			 strstr(r[i].error, "could not reach owner rank 0") &&
			 strstr(r[i].error, "listen backlog of its fd channel stayed full") &&
			 strstr(r[i].error, "not accepting");
	printf("backlog full: %d of %d peers said so%s%s\n", named, WORLD - 1,
	       named == WORLD - 1 ? "" : "\n    rank 1: ", named == WORLD - 1 ? "" : r[1].error);
	destroy_all(r);
	return named == WORLD - 1;
}

int main(void)
{
	int cases = 0, held = 0;

	mallopt(M_ARENA_MAX, 1);
	sseg_set_log_level(SSEG_LOG_OFF);
	for (size_t i = 0; i < sizeof(sweeps) / sizeof(sweeps[0]); i++) {
		const struct sweep *s = &sweeps[i];

		for (int call = 1; call <= s->calls; call++) {
			struct tu_maps maps = tu_maps();
			int fds = tu_count_fds(), ok;
			struct outcome o;
			char first[600];

			run_one(s, call, &o);
			ok = !o.mute && o.took < 2.0 * TIMEOUT_MS / 1000 + 1.0 && !clean_group() &&
			     sseg_pending_count() == 0 && tu_count_fds() == fds &&
			     tu_maps_same(maps, tu_maps());
			/* munmap fails in destroy: the group itself completed. */
			if (strcmp(s->site, "munmap"))
				ok &= o.failed > 0 && o.said > 0;
			else
				ok &= o.failed == 0 && o.retries == 1;
			printf("%-13s call %d: %d rank(s) failed, %.2f s, %d destroy retries: %s%s%s\n",
			       s->site, call, o.failed, o.took, o.retries, ok ? "ok" : "FAILED",
			       o.first[0] ? "\n    " : "", o.first);
			hc_record("{\"test\":\"fault_sweep\",\"site\":\"%s\",\"call\":%d,\"failed\":%d,"
				  "\"said\":%d,\"seconds\":%.3f,\"retries\":%d,\"ok\":%d,"
				  "\"first\":\"%s\"}",
				  s->site, call, o.failed, o.said, o.took, o.retries, ok,
				  hc_json(o.first, first, sizeof(first)));
			cases++;
			held += ok;
		}
	}
	cases++;
	held += backlog_full();
	printf("fault_sweep: %d of %d injected faults handled, nothing leaked\n", held, cases);
	return held == cases ? 0 : 1;
}
