/* Placement and sizing rules of the cuda backend: device-local takes the
 * rank's GPU's node, an explicit node is the only node checked, interleave
 * is refused, and a granularity that is not a power of two is rejected. */
#include <string.h>

#include "fakeutil.h"
#include "testutil.h"

static int solo(enum sseg_numa numa, int node, int device, struct sseg_info *info)
{
	SSEG_OPTS(o, .name = "placement", .size = 3 << 20, .world_size = 1,
		  .backend = SSEG_BACKEND_CUDA, .numa = numa, .numa_node = node, .device = device);
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;
	int rc;

	rc = sseg_create(&o, &seg, blob);
	if (rc)
		return rc;
	CHECK_RC(sseg_complete(seg, blob), 0);
	info->sz = sizeof(*info);
	CHECK_RC(sseg_info(seg, info), 0);
	CHECK_RC(sseg_destroy(seg), 0);
	return 0;
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

	/* The driver's granularity must be a power of two. */
	CHECK(fake.configure("granularity=3145728") == 0);
	CHECK_RC(solo(SSEG_NUMA_NONE, 0, 0, &info), -EINVAL);
	CHECK_ERR_HAS("granularity 3145728 is not a power of two");
	CHECK(fake.configure("granularity=2097152") == 0);

	/* sseg_supported says why the backend cannot run. */
	CHECK(fake.configure("vmm=0") == 0);
	CHECK_RC(sseg_supported(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK_ERR_HAS("device 0 does not support VMM");
	CHECK(fake.configure("vmm=1;host_numa_vmm=0") == 0);
	CHECK_RC(sseg_supported(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK_ERR_HAS("cannot allocate VMM host memory");
	CHECK(fake.configure("host_numa_vmm=1;devices=0") == 0);
	CHECK_RC(sseg_supported(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), -ENODEV);
	CHECK_ERR_HAS("no CUDA device");
	CHECK(fake.configure("devices=2") == 0);
	CHECK_RC(sseg_supported(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), 0);
	CHECK(tu_fake_clean(&fake));
	printf("cuda_placement: ok\n");
	return 0;
}
