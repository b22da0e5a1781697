/* SPDX-License-Identifier: Apache-2.0 */
/* A failure injected at every driver call of create, complete and destroy:
 * the error names the call and the driver's error, nothing stays alive in
 * the driver afterwards, and the next attempt succeeds. cuMemRelease is
 * called at most once per handle, failure included. */
#include <string.h>

#include "fakeutil.h"
#include "internal.h"
#include "testutil.h"

#define SZ (4u << 20)

static const char *const entries[] = {
	"cuDeviceGetCount", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxGetCurrent",
	"cuCtxSetCurrent", "cuDeviceGetAttribute", "cuDeviceGetUuid",
	"cuMemGetAllocationGranularity", "cuMemCreate", "cuMemAddressReserve", "cuMemMap",
	"cuMemSetAccess", "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle",
	"cuMemUnmap", "cuMemAddressFree", "cuDevicePrimaryCtxRelease",
};
/* cuMemRelease is not in the sweep: a handle whose release failed is never
 * released again (release_once below). */

static struct tu_fake fake;

static void ranks(struct tu_rank *r)
{
	memset(r, 0, sizeof(*r) * 2);
	for (int i = 0; i < 2; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "cuda-faults",
						.size = SZ, .world_size = 2, .rank = i,
						.backend = SSEG_BACKEND_CUDA, .timeout_ms = 3000 };
}

/* Destroys every rank, retrying a destroy that failed (resumable). */
static int destroy_all(struct tu_rank *r, const char *entry)
{
	int failed = 0;

	for (int i = 0; i < 2; i++) {
		int rc;

		if (!r[i].seg)
			continue;
		rc = sseg_destroy(r[i].seg);
		if (rc) {
			failed++;
			CHECK(strstr(sseg_last_error(), entry));
			fake.fail(NULL, 0, 0, 0);
			CHECK_RC(sseg_destroy(r[i].seg), 0);
		}
		r[i].seg = NULL;
	}
	return failed;
}

/* Fails the nth call of entry from now; returns 0 when the run never got
 * that far (the entry is exhausted), 1 otherwise. */
static int inject(const char *entry, int nth)
{
	struct tu_rank r[2];
	long before = fake.calls(entry);
	int failed, destroy_failed;

	fake.fail(entry, nth, 1, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);
	ranks(r);
	failed = tu_run_inproc(r, 2);
	destroy_failed = destroy_all(r, entry);
	failed += destroy_failed;
	fake.fail(NULL, 0, 0, 0);
	if (fake.calls(entry) - before < nth) {
		CHECK(failed == 0);
		return 0;
	}
	/* Calls whose failure the library absorbs by design: attribute,
	 * and UUID queries (a missing capability is reported, not
	 * fatal), access for devices other than the rank's own (logged,
	 * skipped), and putting the caller's context back (logged). The
	 * probes' own calls (cuMemCreate, granularity, export, import,
	 * their primary context) ran once when the fake was loaded and are
	 * cached: a failure of those calls here is the segment's own and
	 * must be noticed. */
	if (failed == 0) {
		static const char *const absorbed[] = {
			"cuDeviceGetAttribute", "cuDeviceGetCount", "cuCtxSetCurrent", "cuDeviceGet",
			"cuDeviceGetUuid", "cuMemSetAccess",
		};
		int known = 0;

		for (size_t a = 0; a < ARRAY_SIZE(absorbed); a++)
			known |= !strcmp(entry, absorbed[a]);
		if (!known)
			fprintf(stderr, "a failure of %s (call %d) went unnoticed\n", entry, nth);
		CHECK(known);
	} else {
		/* The failing rank names the call (or destroy did, checked
		 * in destroy_all); the other one names the failing rank. */
		int named = 0;

		for (int i = 0; i < 2; i++) {
			if (!r[i].create_rc && !r[i].complete_rc)
				continue;
			named += strstr(r[i].error, entry) != NULL;
			CHECK(strstr(r[i].error, entry) || strstr(r[i].error, "rank "));
		}
		if (!named && !destroy_failed)
			fprintf(stderr, "no rank named %s (call %d): %s | %s\n", entry, nth,
				r[0].error, r[1].error);
		CHECK(named || destroy_failed);
	}
	CHECK(tu_fake_clean(&fake));
	return 1;
}

static void every_call(void)
{
	for (size_t e = 0; e < ARRAY_SIZE(entries); e++) {
		int n = 1;

		while (inject(entries[e], n))
			n++;
		CHECK(n > 1); /* each entry is used at least once */
		/* After all that, a clean run. */
		{
			struct tu_rank r[2];

			ranks(r);
			CHECK(tu_run_inproc(r, 2) == 0);
			tu_destroy_all(r, 2);
			CHECK(tu_fake_clean(&fake));
		}
	}
}

/* A failed cuMemRelease is not retried: the handle's state is unknown. The
 * destroy that met it says so and counts it; the next one finishes. */
static void release_once(void)
{
	uint64_t abandoned = sseg_abandoned_handles();
	struct tu_rank r[2];
	long before;

	ranks(r);
	CHECK(tu_run_inproc(r, 2) == 0);
	before = fake.calls("cuMemRelease");
	fake.fail("cuMemRelease", 1, -1, 999);
	for (int i = 0; i < 2; i++) {
		CHECK_RC(sseg_destroy(r[i].seg), -EIO);
		CHECK_ERR_HAS("the driver handle was abandoned: cuMemRelease failed: "
			      "CUDA_ERROR_UNKNOWN");
		CHECK_RC(sseg_destroy(r[i].seg), 0);
	}
	CHECK(sseg_abandoned_handles() == abandoned + 2);
	fake.fail(NULL, 0, 0, 0);
	CHECK(fake.calls("cuMemRelease") - before == 2); /* once per handle */
	CHECK(fake.bugs() == 0);
	CHECK(fake.live_handles() == 2); /* what the failed releases left: reported, not retried */
	CHECK(fake.live_mappings() == 0 && fake.live_reservations() == 0);
}

int main(void)
{
	tu_fake_load("devices=2;numa=0,0;fabric=1;fabric_works=0", &fake);
	every_call();
	release_once();
	printf("cuda_faults: ok\n");
	return 0;
}
