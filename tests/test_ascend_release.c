/* The lifecycle guarantees on the ascend backend: aclrtFreePhysical at most
 * once per handle (a failed free is abandoned and counted, the next destroy
 * goes on), and a segment whose teardown keeps failing (aclrtUnmapMem
 * refused every time) goes to the cleanup-pending list: counted, logged once
 * with the call's error, retried by later creates, never in the way of an
 * unrelated segment, and finished once the runtime recovers. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aclutil.h"
#include "testutil.h"

static sseg_t *solo(const char *name, enum sseg_backend backend)
{
	SSEG_OPTS(o, .name = name, .size = 2 << 20, .world_size = 1, .backend = backend,
		  .pages = backend == SSEG_BACKEND_MEMFD ? SSEG_PAGES_BASE : SSEG_PAGES_AUTO);
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_complete(seg, blob), 0);
	return seg;
}

static void free_once(struct ta_fake *fake)
{
	uint64_t abandoned = sseg_abandoned_handles();
	sseg_t *seg = solo("free-once", SSEG_BACKEND_ASCEND);
	long before = fake->calls("aclrtFreePhysical");

	fake->fail("aclrtFreePhysical", 1, -1, 507899);
	CHECK_RC(sseg_destroy(seg), -EIO);
	CHECK_ERR_HAS("the physical memory handle was abandoned: aclrtFreePhysical failed: "
		      "ACL_ERROR_RT_DRV_INTERNAL_ERROR");
	CHECK_RC(sseg_destroy(seg), 0); /* goes on after it, without freeing again */
	fake->fail(NULL, 0, 0, 0);
	CHECK(fake->calls("aclrtFreePhysical") - before == 1);
	CHECK(sseg_abandoned_handles() == abandoned + 1);
	CHECK(fake->bugs() == 0);
	CHECK(fake->live_handles() == 1); /* what the failed free left: reported, not retried */
	CHECK(fake->live_mappings() == 0 && fake->live_reservations() == 0 &&
	      fake->live_devices() == 0);
}

static int count_lines(const char *path, const char *needle, char *first, size_t len)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle) && n++ == 0)
			snprintf(first, len, "%s", line);
	fclose(f);
	return n;
}

static void pending(struct ta_fake *fake)
{
	char log[] = "/tmp/sseg-acl-pending-XXXXXX", first[1024] = "";
	int saved = dup(2), fd = mkstemp(log);
	sseg_t *seg;

	CHECK(fd >= 0 && saved >= 0);
	seg = solo("acl-pending", SSEG_BACKEND_ASCEND);
	dup2(fd, 2); /* the library logs to stderr */
	fake->fail("aclrtUnmapMem", 1, -1, 507000);
	CHECK_RC(sseg_destroy(seg), -EIO);
	CHECK_ERR_HAS("aclrtUnmapMem failed: ACL_ERROR_RT_INTERNAL_ERROR");
	CHECK_RC(sseg_destroy(seg), -EIO);
	CHECK(sseg_cleanup_pending() == 0);
	CHECK_RC(sseg_destroy(seg), -EINPROGRESS);
	CHECK(sseg_cleanup_pending() == 1);
	/* Unrelated creates go on; each retries the pending one, in vain. */
	for (int i = 0; i < 3; i++) {
		sseg_t *other = solo("unrelated", i == 1 ? SSEG_BACKEND_ASCEND : SSEG_BACKEND_MEMFD);

		CHECK(sseg_cleanup_pending() == 1);
		fake->fail(NULL, 0, 0, 0);
		CHECK_RC(sseg_destroy(other), 0);
		fake->fail("aclrtUnmapMem", 1, -1, 507000);
	}
	fflush(stderr);
	dup2(saved, 2);
	CHECK(count_lines(log, "pending cleanup", first, sizeof(first)) == 1);
	fprintf(stderr, "logged once: %s", first);
	CHECK(strstr(first, "segment 'acl-pending'"));
	CHECK(strstr(first, "aclrtUnmapMem failed: ACL_ERROR_RT_INTERNAL_ERROR"));
	/* The runtime recovers: the next create finishes the teardown. */
	fake->fail(NULL, 0, 0, 0);
	CHECK_RC(sseg_destroy(solo("after", SSEG_BACKEND_MEMFD)), 0);
	CHECK(sseg_cleanup_pending() == 0);
	CHECK(ta_fake_clean(fake));
	unlink(log);
}

int main(void)
{
	struct ta_fake fake;

	ta_fake_load("devices=1", &fake);
	pending(&fake);
	free_once(&fake);
	printf("ascend_release: ok\n");
	return 0;
}
