/* SPDX-License-Identifier: Apache-2.0 */
/* A failure injected at every ACL call of create, complete and destroy, on
 * the owner and on the peer (two processes: the reference forbids export
 * and import in one), for the in-server handle, the fabric handle and host
 * registration: a failure that stops create, complete or destroy is named
 * by the call's name (the other rank names the failing one), nothing stays
 * alive in the fake afterwards (but for a physical handle whose free
 * failed: abandoned, never freed twice), and the next attempt succeeds. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "aclutil.h"
#include "internal.h"
#include "testutil.h"

#define SZ (4u << 20)
#define INJECTED 207001 /* ACL_ERROR_RT_MEMORY_ALLOCATION */

struct scenario {
	const char *label;
	const char *config;
	enum sseg_backend backend;
	uint32_t flags;
	const char *const *entries;
	const char *const *absorbed; /* calls whose failure is harmless */
};

/* What each rank of a round saw, in memory shared with the parent. */
struct outcome {
	int warmed;   /* the group before the injection went through */
	int reached;  /* the injected call happened */
	int failed;   /* create, complete or the first destroy failed here */
	int clean;    /* nothing left in the fake after destroy */
	int retried;  /* a second group with no failure went through */
	char error[512];
};

struct round {
	const struct scenario *sc;
	const char *entry;
	int nth;
	int target;
	char name[64];
	int rank;
	struct outcome *out; /* [2] */
};

static struct ta_fake fake;

static int allgather(struct sseg_local_group *g, const void *mine, void *all, size_t len)
{
	return sseg_local_allgather(mine, all, len, g);
}

static void note(struct outcome *o, const char *what)
{
	if (!o->error[0])
		snprintf(o->error, sizeof(o->error), "%s: %s", what, sseg_last_error());
	o->failed = 1;
}

/* A destroy that fails names the call; once the runtime recovers the next
 * one finishes (resumable). */
static void destroy(const struct round *rd, sseg_t *seg, struct outcome *o)
{
	if (!seg || !sseg_destroy(seg))
		return;
	note(o, "destroy");
	fake.fail(NULL, 0, 0, 0);
	CHECK_RC(sseg_destroy(seg), 0);
}

/* One group: create, exchange, complete, agree, destroy. */
static int attempt(const struct round *rd, const char *name, struct outcome *o)
{
	int ascend = rd->sc->backend == SSEG_BACKEND_ASCEND;
	/* Node 0 for the ascend backend: its probes are cached per node, and
	 * a rank moving to another node would run them again mid-sweep. */
	SSEG_OPTS(opts, .name = name, .size = SZ, .world_size = 2, .rank = rd->rank,
		  .backend = rd->sc->backend, .flags = rd->sc->flags,
		  .device_backend = SSEG_BACKEND_ASCEND, .pages = SSEG_PAGES_BASE * !ascend,
		  .numa = ascend ? SSEG_NUMA_NODE : SSEG_NUMA_NONE, .numa_node = 0,
		  .device = rd->rank, .timeout_ms = 5000);
	unsigned char blob[SSEG_BLOB_SIZE], blobs[2 * SSEG_BLOB_SIZE];
	struct sseg_local_group *g;
	sseg_t *seg = NULL;
	int rc, rcs[2];

	CHECK_RC(sseg_local_group_open(name, rd->rank, 2, 10000, &g), 0);
	rc = sseg_create(&opts, &seg, blob);
	if (rc)
		note(o, "create");
	CHECK_RC(allgather(g, blob, blobs, SSEG_BLOB_SIZE), 0);
	if (!rc && (rc = sseg_complete(seg, blobs)))
		note(o, "complete");
	CHECK_RC(allgather(g, &rc, rcs, sizeof(rc)), 0);
	destroy(rd, seg, o);
	sseg_local_group_close(g);
	return rcs[0] || rcs[1] || o->failed;
}

/* Clean, but for the handles abandoned since `abandoned`. */
static int clean(uint64_t abandoned)
{
	int left = (int)(sseg_abandoned_handles() - abandoned);

	if (left && fake.live_handles() == left && fake.live_mappings() == 0 &&
	    fake.live_reservations() == 0 && fake.live_devices() == 0 && fake.bugs() == 0)
		return 1;
	return ta_fake_clean(&fake);
}

static int rank_main(void *arg)
{
	struct round *rd = arg;
	struct outcome *o = &rd->out[rd->rank];
	struct outcome warm = { 0 }, again = { 0 };
	char name[80];
	uint64_t abandoned;
	long before;

	ta_fake_load(rd->sc->config, &fake);
	abandoned = sseg_abandoned_handles();
	/* A group with no failure first: the backend's probes (the fabric
	 * export's granule) run once per process and are cached, so every
	 * failure injected afterwards is the segment's own. */
	snprintf(name, sizeof(name), "%s-warm", rd->name);
	o->warmed = !attempt(rd, name, &warm) && clean(abandoned);
	before = fake.calls(rd->entry);
	if (rd->rank == rd->target)
		fake.fail(rd->entry, rd->nth, 1, INJECTED);
	attempt(rd, rd->name, o);
	o->reached = fake.calls(rd->entry) - before >= rd->nth;
	fake.fail(NULL, 0, 0, 0);
	o->clean = clean(abandoned);
	snprintf(name, sizeof(name), "%s-again", rd->name);
	o->retried = !attempt(rd, name, &again) && clean(abandoned);
	return 0;
}

static int listed(const char *const *list, const char *entry)
{
	for (; *list; list++)
		if (!strcmp(*list, entry))
			return 1;
	return 0;
}

/* A failure that stopped a rank is named: by the call's name on a rank
 * that failed (a destroy always names it), the other rank by naming the
 * failing rank; the runtime's error code alone does not say which call. */
static int named(const struct scenario *sc, const char *entry, int nth, int target,
		 const struct outcome *out)
{
	int by_name = 0;

	for (int r = 0; r < 2; r++) {
		int has = out[r].failed && strstr(out[r].error, entry);

		by_name += has;
		if (out[r].failed && !has &&
		    (!strncmp(out[r].error, "destroy", 7) || !strstr(out[r].error, "rank "))) {
			fprintf(stderr, "%s: call %d of %s on rank %d: rank %d: %s\n", sc->label,
				nth, entry, target, r, out[r].error);
			CHECK(!"the error names neither the call nor the failing rank");
		}
	}
	if (!by_name)
		fprintf(stderr, "%s: no rank named %s (call %d on rank %d): %s | %s\n", sc->label,
			entry, nth, target, out[0].error, out[1].error);
	CHECK(by_name);
	return 1;
}

/* Fails the nth call of entry on rank target; 0 when that rank never made
 * that call (the entry is exhausted there), 1 otherwise. */
static int inject(const struct scenario *sc, const char *entry, int nth, int target,
		  struct outcome *out)
{
	struct round rd[2];
	pid_t pids[2];
	char name[64];
	int failed = 0;

	memset(out, 0, 2 * sizeof(*out));
	tu_name(name, sizeof(name), "acl-faults");
	for (int r = 0; r < 2; r++) {
		rd[r] = (struct round){ .sc = sc, .entry = entry, .nth = nth, .target = target,
					.rank = r, .out = out };
		snprintf(rd[r].name, sizeof(rd[r].name), "%s", name);
		pids[r] = tu_fork(rank_main, &rd[r]);
	}
	for (int r = 0; r < 2; r++)
		CHECK(tu_wait(pids[r], 60000) == 0);
	for (int r = 0; r < 2; r++) {
		CHECK(out[r].warmed && out[r].clean && out[r].retried);
		failed += out[r].failed;
	}
	if (!out[target].reached) {
		CHECK(failed == 0);
		return 0;
	}
	if (failed == 0) {
		if (!listed(sc->absorbed, entry))
			fprintf(stderr, "%s: failing call %d of %s on rank %d went unnoticed\n",
				sc->label, nth, entry, target);
		CHECK(listed(sc->absorbed, entry));
		return 1;
	}
	return named(sc, entry, nth, target, out);
}

static void every_call(const struct scenario *sc, struct outcome *out)
{
	for (const char *const *e = sc->entries; *e; e++) {
		int used = 0;

		for (int target = 0; target < 2; target++) {
			int n = 1;

			while (inject(sc, *e, n, target, out))
				n++;
			used += n > 1;
		}
		if (!used)
			fprintf(stderr, "%s: %s was never called\n", sc->label, *e);
		CHECK(used); /* each entry is used at least once */
	}
	fprintf(stderr, "%s: every call failed in turn\n", sc->label);
}

int main(void)
{
	/* The only calls whose failure is harmless, and then only at some of
	 * their call numbers (any other is named like every call): asking
	 * for the caller's context before the device's is made current (a
	 * failure means the thread has none: nothing to put back), and
	 * putting the caller's context back afterwards (logged; the work is
	 * done). The probes' calls (granularity, allocation, fabric export,
	 * free) ran in the group before the injection and are cached: a
	 * failure of those calls in the sweep is the segment's own. */
	static const char *const context_calls[] = { "aclrtGetCurrentContext",
						     "aclrtSetCurrentContext", NULL };
	static const char *const in_server[] = {
		"aclrtGetDeviceCount", "aclrtSetDevice", "aclrtGetCurrentContext",
		"aclrtSetCurrentContext", "aclrtDeviceGetBareTgid",
		"aclrtMemGetAllocationGranularity", "aclrtMallocPhysical",
		"aclrtReserveMemAddress", "aclrtMapMem", "aclrtMemSetAccess",
		"aclrtMemExportToShareableHandle", "aclrtMemSetPidToShareableHandle", "aclrtMemImportFromShareableHandleV2",
		"aclrtUnmapMem", "aclrtFreePhysical", "aclrtReleaseMemAddress",
		"aclrtResetDevice", NULL
	};
	static const char *const fabric[] = {
		"aclrtGetDeviceCount", "aclrtSetDevice", "aclrtGetCurrentContext",
		"aclrtSetCurrentContext", "aclrtMemGetAllocationGranularity",
		"aclrtMallocPhysical", "aclrtReserveMemAddress", "aclrtMapMem",
		"aclrtMemSetAccess", "aclrtMemExportToShareableHandleV2",
		"aclrtMemImportFromShareableHandleV2", "aclrtUnmapMem", "aclrtFreePhysical",
		"aclrtReleaseMemAddress", "aclrtResetDevice", NULL
	};
	static const char *const hostreg[] = {
		"aclrtGetDeviceCount", "aclrtSetDevice", "aclrtGetCurrentContext",
		"aclrtSetCurrentContext", "aclrtHostRegister", "aclrtHostUnregister",
		"aclrtResetDevice", NULL
	};
	static const struct scenario scenarios[] = {
		{ "in-server handle", "devices=2;fabric=0", SSEG_BACKEND_ASCEND, 0, in_server,
		  context_calls },
		{ "fabric handle", "devices=2;fabric=1", SSEG_BACKEND_ASCEND, 0, fabric,
		  context_calls },
		{ "host registration", "devices=2", SSEG_BACKEND_MEMFD, SSEG_F_HOST_REGISTER,
		  hostreg, context_calls },
	};
	struct outcome *out = mmap(NULL, 2 * sizeof(*out), PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	CHECK(out != MAP_FAILED);
	for (size_t i = 0; i < ARRAY_SIZE(scenarios); i++)
		every_call(&scenarios[i], out);
	printf("ascend_faults: ok\n");
	return 0;
}
