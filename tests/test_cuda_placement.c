/* SPDX-License-Identifier: Apache-2.0 */
/* Placement and sizing rules of the cuda backend: device-local takes the
 * rank's GPU's node, an explicit node is the only node checked, interleave
 * is refused, and a granularity that is not a power of two is rejected.
 * Page kinds: only auto, since VMM host memory comes at the driver's
 * granularity; sseg_info reports that granularity and pinned=1. Pinned
 * memory is never populated by the library (population loops over it are
 * pointless, and their errors would blame the HugeTLB pool). One device
 * check serves the backend and host registration: a bad ordinal is
 * -ENODEV on both, naming how many devices the driver sees. */
#include <string.h>

#include "fakeutil.h"
#include "testutil.h"

static int solo(enum sseg_numa numa, int node, int device, struct sseg_info *info)
{
	SSEG_OPTS(o, .name = "placement", .size = 3 << 20, .world_size = 1,
		  .backend = SSEG_BACKEND_CUDA, .numa = numa, .numa_node = node, .device = device);

	return tu_solo(&o, info);
}

static int with_pages(enum sseg_pages pages, enum sseg_populate populate, struct sseg_info *info)
{
	SSEG_OPTS(o, .name = "pages", .size = 3 << 20, .world_size = 1,
		  .backend = SSEG_BACKEND_CUDA, .pages = pages, .populate = populate);

	return tu_solo(&o, info);
}

static void pages_and_population(void)
{
	static const enum sseg_pages refused[] = { SSEG_PAGES_BASE, SSEG_PAGES_THP,
						   SSEG_PAGES_HUGETLB_2M, SSEG_PAGES_HUGETLB_1G };
	struct sseg_info info;

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		CHECK_RC(with_pages(refused[i], SSEG_POPULATE_OWNER, &info), -EOPNOTSUPP);
		CHECK_ERR_HAS("the cuda backend allocates pinned VMM host memory");
		CHECK_ERR_HAS("pages must be auto");
		CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, refused[i]), -EOPNOTSUPP);
	}
	CHECK_RC(with_pages(SSEG_PAGES_AUTO, SSEG_POPULATE_OWNER, &info), 0);
	CHECK(info.pages == SSEG_PAGES_AUTO && info.page_size == (2u << 20) && info.pinned == 1);
	CHECK(strstr(info.pages_reason, "granularity 2097152"));
	CHECK(info.populate_s == 0.0);
	CHECK_RC(with_pages(SSEG_PAGES_AUTO, SSEG_POPULATE_SPREAD, &info), 0);
	CHECK(info.populate_s == 0.0);
}

/* Host registration of a memfd segment on a device that does not exist:
 * complete fails as the backend's create does. */
static void register_on(int device, const char *why)
{
	SSEG_OPTS(o, .name = "hostreg-device", .size = 2 << 20, .world_size = 1,
		  .pages = SSEG_PAGES_BASE, .flags = SSEG_F_HOST_REGISTER, .device = device);
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;
	int rc;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	rc = sseg_complete(seg, blob);
	CHECK_RC(rc, -ENODEV);
	CHECK_ERR_HAS(why);
	CHECK_RC(sseg_destroy(seg), 0);
}

int main(void)
{
	struct sseg_info info;
	struct tu_fake fake;
	/* Device 1 sits on host node 1 (the driver's word), device 0 on 0. */
	void *ctx = (void *)1;

	tu_fake_load("devices=2;numa=0,1", &fake);
	CHECK_RC(solo(SSEG_NUMA_DEVICE_LOCAL, 0, 1, &info), 0);
	CHECK(info.numa_node == 1 && info.device == 1);
	/* The caller's thread keeps its own context (none here). */
	CHECK(fake.ctx_get_current(&ctx) == 0 && ctx == NULL);
	CHECK_RC(solo(SSEG_NUMA_NONE, 0, 0, &info), 0); /* device-local is the default */
	CHECK(info.numa_node == 0);
	CHECK(info.mapped_size == 4 << 20); /* padded to the 2 MiB granularity */

	/* Device 1's node is not on this host: device-local follows the
	 * driver's word, and an explicit node is the only node checked, so
	 * device 1's odd node does not block node 0. */
	CHECK(fake.configure("numa=0,7") == 0);
	CHECK_RC(solo(SSEG_NUMA_DEVICE_LOCAL, 0, 1, &info), 0);
	CHECK(info.numa_node == 7);
	CHECK_RC(solo(SSEG_NUMA_NODE, 0, 1, &info), 0);
	CHECK(info.numa_node == 0 && info.device == 1);
	/* A failing HOST_NUMA_ID query names the call. */
	fake.fail("cuDeviceGetAttribute", 1, -1, 999);
	CHECK(solo(SSEG_NUMA_DEVICE_LOCAL, 0, 1, &info) < 0);
	CHECK_ERR_HAS("cuDeviceGetAttribute");
	fake.fail(NULL, 0, 0, 0);
	CHECK_RC(solo(SSEG_NUMA_NODE, 63, 0, &info), -EINVAL);
	CHECK_ERR_HAS("numa node 63 has no memory on this host");
	CHECK_RC(solo(SSEG_NUMA_INTERLEAVE, 0, 0, &info), -EOPNOTSUPP);
	CHECK_ERR_HAS("interleave");
	CHECK_RC(solo(SSEG_NUMA_NONE, 0, 2, &info), -ENODEV);
	CHECK_ERR_HAS("device=2, but the driver sees 2 device(s)");
	register_on(2, "device=2, but the driver sees 2 device(s)");
	pages_and_population();

	/* The driver's granularity must be a power of two. */
	CHECK(fake.configure("granularity=3145728") == 0);
	CHECK_RC(solo(SSEG_NUMA_NONE, 0, 0, &info), -EINVAL);
	CHECK_ERR_HAS("granularity 3145728 is not a power of two");
	CHECK(fake.configure("granularity=2097152") == 0);

	/* sseg_check_support says why the backend cannot run. */
	CHECK(fake.configure("vmm=0") == 0);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK_ERR_HAS("device 0 does not support VMM");
	CHECK(fake.configure("vmm=1;host_numa_vmm=0") == 0);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK_ERR_HAS("cannot allocate VMM host memory");
	CHECK(fake.configure("host_numa_vmm=1;devices=0") == 0);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), -ENODEV);
	CHECK_ERR_HAS("no CUDA device");
	CHECK(fake.configure("devices=2") == 0);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), 0);
	CHECK(tu_fake_clean(&fake));
	printf("cuda_placement: ok\n");
	return 0;
}
