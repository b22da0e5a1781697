/* SPDX-License-Identifier: Apache-2.0 */
/* The cuda backend's probes are real and cached per (device, node): a
 * minimum-size HOST_NUMA create + release and a fabric create + export +
 * import + release, each under the device's primary context, whatever
 * context the caller has (none here). Attribute 141 unknown (drivers 12.2
 * to 12.8) is not "no"; drivers before 12.6 are refused unless the knob
 * says otherwise; a container that blocks HOST_NUMA makes sseg_check_support
 * say "not available" and names CAP_SYS_NICE; a probe handle whose release
 * fails is counted as abandoned. Each case is a child with
 * its own driver configuration (the driver version is read once). */
#include <string.h>

#include "backend/cuda/cuda_probe.h"
#include "fakeutil.h"
#include "runcases.h"
#include "testutil.h"

#define CUDA_ERROR_NOT_PERMITTED 800

static int solo(int device, struct sseg_info *info)
{
	SSEG_OPTS(o, .name = "probe", .size = 2 << 20, .world_size = 1,
		  .backend = SSEG_BACKEND_CUDA, .device = device);

	return tu_solo(&o, info);
}

static struct sseg_probe_device device_facts(int index)
{
	struct sseg_probe_device d = { .sz = sizeof(d) };

	CHECK_RC(sseg_probe_device(SSEG_BACKEND_CUDA, index, &d), 0);
	return d;
}

/* No context is current in this thread: the probes take the device's. */
static int case_without_context(void *arg)
{
	struct sseg_probe_device d;
	struct tu_fake fake;
	void *ctx = (void *)1;

	tu_fake_load("devices=2;numa=0,0;fabric=1", &fake);
	CHECK(fake.ctx_get_current(&ctx) == 0 && ctx == NULL);
	d = device_facts(1);
	CHECK(d.host_vmm_works == 1 && d.fabric_claimed == 1 && d.fabric_works == 1);
	CHECK(!strncmp(d.uuid, "GPU-", 4) && strlen(d.uuid) == 40);
	CHECK(d.host_register == 1 && d.host_register_readonly == 1);
	CHECK(fake.ctx_get_current(&ctx) == 0 && ctx == NULL); /* put back */
	CHECK(tu_fake_clean(&fake));
	return 0;
}

/* Device 0 moves from node 0 to node 1 and back (numa=): each (device,
 * node) has its own answer, asked once. */
static int case_cache_per_node(void *arg)
{
	struct sseg_info info;
	struct tu_fake fake;

	tu_fake_load("devices=1;numa=0;fabric=1", &fake);
	/* Node 0's fabric probe fails (its create is refused). */
	fake.fail("cuMemCreate", 1, 1, CUDA_ERROR_NOT_PERMITTED);
	CHECK_RC(solo(0, &info), 0);
	CHECK(info.numa_node == 0 && !strcmp(info.handle_type, "cuda-fd"));
	CHECK(fake.configure("numa=1") == 0);
	CHECK_RC(solo(0, &info), 0);
	CHECK(info.numa_node == 1 && !strcmp(info.handle_type, "cuda-fabric"));
	CHECK(fake.configure("numa=0") == 0);
	CHECK_RC(solo(0, &info), 0);
	CHECK(info.numa_node == 0 && !strcmp(info.handle_type, "cuda-fd"));
	/* HOST_NUMA: refused on a node seen first while blocked, not on the
	 * node that passed before. */
	CHECK(fake.configure("host_numa_blocked=1;numa=1") == 0);
	CHECK(device_facts(0).host_vmm_works == 1); /* node 1 passed above */
	CHECK(fake.configure("numa=2") == 0);
	CHECK(device_facts(0).host_vmm_works == 0);
	CHECK(fake.configure("numa=0") == 0);
	CHECK(device_facts(0).host_vmm_works == 1);
	CHECK(tu_fake_clean(&fake));
	return 0;
}

/* Drivers 12.2 to 12.8 do not know attribute 141: the real probe decides. */
static int case_attribute_unknown(void *arg)
{
	struct sseg_probe_device d;
	struct sseg_info info;
	struct tu_fake fake;

	tu_fake_load("devices=1;driver=12080", &fake);
	d = device_facts(0);
	CHECK(d.host_vmm == -1 && d.host_vmm_works == 1);
	CHECK_RC(solo(0, &info), 0);
	CHECK(tu_fake_clean(&fake));
	return 0;
}

/* 12.5: refused by default, as NCCL does; the knob accepts it. */
static int case_old_driver(void *arg)
{
	struct sseg_info info;
	struct tu_fake fake;

	setenv("SHAREDSEG_CUDA_HOST_NUMA_MIN_DRIVER", "12050", 1);
	tu_fake_load("devices=1;driver=12050", &fake); /* loads with the knob set */
	unsetenv("SHAREDSEG_CUDA_HOST_NUMA_MIN_DRIVER");
	CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK_ERR_HAS("driver 12.5: VMM host memory (HOST_NUMA) is used from driver 12.6 on");
	CHECK_ERR_HAS("SHAREDSEG_CUDA_HOST_NUMA_MIN_DRIVER=12050 accepts this driver");
	CHECK_RC(solo(0, &info), -EOPNOTSUPP);
	setenv("SHAREDSEG_CUDA_HOST_NUMA_MIN_DRIVER", "12050", 1);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), 0);
	CHECK_RC(solo(0, &info), 0);
	/* The spelling of 0.2 and before still counts. */
	unsetenv("SHAREDSEG_CUDA_HOST_NUMA_MIN_DRIVER");
	setenv("SSEG_CUDA_HOST_NUMA_MIN_DRIVER", "12050", 1);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), 0);
	unsetenv("SSEG_CUDA_HOST_NUMA_MIN_DRIVER");
	CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK(tu_fake_clean(&fake));
	return 0;
}

/* A container that blocks get_mempolicy: not available, and why. */
static int case_blocked(void *arg)
{
	struct sseg_probe_backend b = { .sz = sizeof(b) };
	struct sseg_info info;
	struct tu_fake fake;

	tu_fake_load("devices=2;numa=0,0", &fake);
	/* The first answer passed (the load itself asked); a create on a
	 * blocked host says what to change. */
	CHECK(fake.configure("host_numa_blocked=1") == 0);
	CHECK_RC(solo(0, &info), -EIO);
	CHECK_ERR_HAS("cuMemCreate(HOST_NUMA) failed: CUDA_ERROR_OPERATING_SYSTEM (304)");
	CHECK_ERR_HAS("CAP_SYS_NICE");
	CHECK_ERR_HAS("get_mempolicy");
	sseg_cuda_forget_probes();
	CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK_ERR_HAS("HOST_NUMA cuMemCreate on node 0 failed: CUDA_ERROR_OPERATING_SYSTEM");
	CHECK_ERR_HAS("CAP_SYS_NICE");
	CHECK_RC(sseg_probe_backend(SSEG_BACKEND_CUDA, &b), 0);
	CHECK(!b.available && strstr(b.reason, "not available") && strstr(b.reason, "get_mempolicy"));
	CHECK(device_facts(1).host_vmm == 1 && device_facts(1).host_vmm_works == 0);
	CHECK_RC(solo(0, &info), -EOPNOTSUPP);
	CHECK(tu_fake_clean(&fake));
	return 0;
}

/* The probes' handles whose release fails are abandoned and counted, as
 * a segment's own are: one HOST_NUMA handle, the fabric one and its
 * import. */
static int case_release_fails(void *arg)
{
	uint64_t abandoned;
	struct tu_fake fake;
	long before;

	tu_fake_load("devices=1;numa=0;fabric=1", &fake);
	sseg_cuda_forget_probes();
	abandoned = sseg_abandoned_handles();
	before = fake.calls("cuMemRelease");
	fake.fail("cuMemRelease", 1, -1, 999);
	sseg_set_log_level(SSEG_LOG_OFF);
	CHECK(device_facts(0).host_vmm_works == 1);
	fake.fail(NULL, 0, 0, 0);
	CHECK(fake.calls("cuMemRelease") - before == 3); /* each handle once */
	CHECK(sseg_abandoned_handles() == abandoned + 3);
	CHECK(fake.live_handles() == 3 && fake.bugs() == 0);
	return 0;
}

static const struct tu_case cases[] = {
	{ "without_context", case_without_context, NULL, 0 },
	{ "cache_per_node", case_cache_per_node, NULL, 0 },
	{ "attribute_unknown", case_attribute_unknown, NULL, 0 },
	{ "old_driver", case_old_driver, NULL, 0 },
	{ "blocked", case_blocked, NULL, 0 },
	{ "release_fails", case_release_fails, NULL, 0 },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	if (tu_run_cases(argc, argv, cases))
		return 1;
	printf("cuda_probe: ok\n");
	return 0;
}
