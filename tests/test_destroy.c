/* SPDX-License-Identifier: Apache-2.0 */
/* Teardown: a failing stage leaves the segment valid and destroy resumes
 * without repeating completed stages; a segment that keeps failing goes to
 * the cleanup-pending list and never blocks new segments; failures in
 * create leave nothing behind. */
#include <string.h>

#include "blob.h"
#include "internal.h"
#include "testutil.h"

static sseg_t *solo(const char *name)
{
	SSEG_OPTS(o, .name = name, .size = 1 << 20, .world_size = 1, .pages = SSEG_PAGES_BASE);
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_complete(seg, blob), 0);
	return seg;
}

static void resumable(void)
{
	struct tu_maps maps = tu_maps();
	sseg_t *seg = solo("destroy-resume");
	unsigned char *base = sseg_base(seg);

	sseg_test_fault("munmap", 0, 1, -EIO);
	CHECK_RC(sseg_destroy(seg), -EIO);
	/* Still valid and still mapped. */
	base[0] = 7;
	CHECK(sseg_base(seg) == base);
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_test_fault(NULL, 0, 0, 0);
	CHECK(tu_maps_same(maps, tu_maps()));
}

static void pending(void)
{
	struct tu_maps maps = tu_maps();
	sseg_t *seg = solo("destroy-pending"), *other;

	sseg_test_fault("munmap", 0, -1, -EIO);
	CHECK_RC(sseg_destroy(seg), -EIO);
	CHECK_RC(sseg_destroy(seg), -EIO);
	CHECK(sseg_pending_count() == 0);
	CHECK_RC(sseg_destroy(seg), -EINPROGRESS);
	CHECK_ERR_HAS("sseg_pending_count");
	CHECK(sseg_pending_count() == 1);
	CHECK(sseg_cleanup_pending() == 1); /* the 0.1 name, kept */
	/* Unrelated creates still work while the retry keeps failing. */
	other = solo("destroy-other");
	CHECK(sseg_pending_count() == 1);
	sseg_test_fault(NULL, 0, 0, 0);
	CHECK_RC(sseg_destroy(other), 0);
	/* The next create retries it, now successfully. */
	other = solo("destroy-other2");
	CHECK(sseg_pending_count() == 0);
	CHECK_RC(sseg_destroy(other), 0);
	CHECK(tu_maps_same(maps, tu_maps()));
}

/* A failure at any step of create releases everything it took, and the
 * failure blob carries the message. */
static void create_fails(struct sseg_opts *o, const char *needle)
{
	int fds = tu_count_fds();
	struct tu_maps maps = tu_maps();
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg = (sseg_t *)1;

	CHECK(sseg_create(o, &seg, blob) < 0);
	CHECK_ERR_HAS(needle);
	CHECK(seg == NULL);
	CHECK(tu_count_fds() == fds);
	CHECK(tu_maps_same(maps, tu_maps()));
	{
		struct sseg_blob b;

		CHECK_RC(sseg_blob_decode(blob, 0, &b), 0);
		CHECK(b.status < 0 && strstr(b.error, needle));
	}
}

static void create_failures(void)
{
	SSEG_OPTS(o, .name = "destroy-create", .size = 1 << 20, .world_size = 1,
		  .pages = SSEG_PAGES_BASE);

	/* Before anything is taken. */
	sseg_test_fault("memfd_create", 0, 1, -ENOSPC);
	create_fails(&o, "memfd");
	sseg_test_fault(NULL, 0, 0, 0);
	/* After the memfd and the window were taken: placement fails. */
	o.numa = SSEG_NUMA_NODE;
	o.numa_node = 63;
	create_fails(&o, "63");
	/* Invalid options. */
	o.numa = SSEG_NUMA_NONE;
	o.name = "";
	create_fails(&o, "name must be");
}

int main(void)
{
	/* The first segment starts population threads, whose stacks the C
	 * library keeps for reuse: count mappings after that. */
	CHECK_RC(sseg_destroy(solo("destroy-warmup")), 0);
	resumable();
	pending();
	create_failures();
	printf("destroy: ok\n");
	return 0;
}
