/* SPDX-License-Identifier: Apache-2.0 */
/* What sseg_check_support, the probe and create say about the ascend backend,
 * each case in a child with its own runtime: no runtime, a failing aclInit,
 * one a framework initialized first, no device, the facts of a working one
 * (version, devices, real create-and-export probes), and the requests the
 * backend refuses with the reason (page kinds, read-only peers, placement,
 * a device it does not have). */
#include <dlfcn.h>
#include <string.h>

#include "aclutil.h"
#include "runcases.h"
#include "testutil.h"

/* What the machine cannot do: -EOPNOTSUPP, as for CUDA and host
 * registration. */
static int no_runtime(void *arg)
{
	struct sseg_probe_backend f = { .sz = sizeof(f) };
	struct sseg_probe_device d = { .sz = sizeof(d) };
	unsigned char blob[SSEG_BLOB_SIZE];
	SSEG_OPTS(o, .name = "no-runtime", .size = 4096, .world_size = 1,
		  .backend = SSEG_BACKEND_ASCEND);
	sseg_t *seg = NULL;

	(void)arg;
	setenv("SHAREDSEG_ACL_LIBRARY", "/nonexistent/libascendcl.so", 1);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_ASCEND, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK_ERR_HAS("backend ascend: not available: no ACL runtime");
	CHECK_RC(sseg_create(&o, &seg, blob), -EOPNOTSUPP);
	CHECK_ERR_HAS("no ACL runtime");
	CHECK_RC(sseg_probe_device(SSEG_BACKEND_ASCEND, 0, &d), -EOPNOTSUPP);
	CHECK_ERR_HAS("no ACL runtime");
	CHECK_RC(sseg_probe_backend(SSEG_BACKEND_ASCEND, &f), 0);
	CHECK(!f.available && strstr(f.reason, "no ACL runtime") && !f.driver[0]);
	return 0;
}

/* A library that is not the runtime (the fake CUDA driver): it lacks the
 * first entry point, which is what this machine cannot do too. */
static int entry_missing(void *arg)
{
	unsigned char blob[SSEG_BLOB_SIZE];
	SSEG_OPTS(o, .name = "no-entry", .size = 4096, .world_size = 1,
		  .backend = SSEG_BACKEND_ASCEND);
	sseg_t *seg = NULL;

	(void)arg;
	setenv("SHAREDSEG_ACL_LIBRARY", tu_build_file("libsseg_fake_cuda.so"), 1);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_ASCEND, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK_ERR_HAS("the ACL runtime lacks aclInit");
	CHECK_RC(sseg_create(&o, &seg, blob), -EOPNOTSUPP);
	CHECK_ERR_HAS("the ACL runtime lacks aclInit");
	return 0;
}

static int init_fails(void *arg)
{
	(void)arg;
	setenv("SHAREDSEG_ACL_LIBRARY", ta_fake_path(), 1);
	setenv("SSEG_FAKE_ACL_FAIL", "aclInit:1:ACL_ERROR_INVALID_PARAM", 1);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_ASCEND, SSEG_PAGES_AUTO), -ENODEV);
	CHECK_ERR_HAS("aclInit failed: ACL_ERROR_INVALID_PARAM (100000)");
	return 0;
}

/* A framework called aclInit before us: ACL_ERROR_REPEAT_INITIALIZE is fine. */
static int initialized_before(void *arg)
{
	void *lib = dlopen(ta_fake_path(), RTLD_NOW | RTLD_LOCAL);
	int (*init)(const char *);

	(void)arg;
	CHECK(lib);
	*(void **)&init = dlsym(lib, "aclInit");
	CHECK(init && init(NULL) == 0);
	setenv("SHAREDSEG_ACL_LIBRARY", ta_fake_path(), 1);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_ASCEND, SSEG_PAGES_AUTO), 0);
	return 0;
}

static int no_device(void *arg)
{
	(void)arg;
	setenv("SHAREDSEG_ACL_LIBRARY", ta_fake_path(), 1);
	setenv("SSEG_FAKE_ACL", "devices=0", 1);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_ASCEND, SSEG_PAGES_AUTO), -ENODEV);
	CHECK_ERR_HAS("the ACL runtime sees no device");
	return 0;
}

static int facts(void *arg)
{
	const int fabric = *(int *)arg;
	struct sseg_probe_backend f = { .sz = sizeof(f) };
	struct sseg_probe_device d = { .sz = sizeof(d) };
	struct ta_fake fake;

	ta_fake_load(fabric ? "devices=3;version=1.15.2;fabric=1" : "devices=3;version=1.15.2",
		     &fake);
	CHECK_RC(sseg_probe_backend(SSEG_BACKEND_ASCEND, &f), 0);
	CHECK(f.available && f.pinned && f.host_register == 1 && f.ndevices == 3);
	CHECK(f.driver_version == 1015002 && strstr(f.reason, "ACL runtime 1.15.2"));
	CHECK(f.crosses_hosts == fabric);
	CHECK_RC(sseg_probe_device(SSEG_BACKEND_ASCEND, 2, &d), 0);
	CHECK(d.vmm == 1 && d.host_vmm_works == 1 && d.fabric_works == fabric);
	CHECK(d.host_register == 1 && d.host_register_readonly == 0 && d.ipc_fd == 0);
	CHECK(d.host_vmm == -1 && d.fabric_claimed == -1); /* no attribute to claim them */
	CHECK_RC(sseg_probe_device(SSEG_BACKEND_ASCEND, 3, &d), -ENOENT);
	CHECK(ta_fake_clean(&fake)); /* the probes gave back what they took */
	return 0;
}

static int create_fails(const struct sseg_opts *o, int err, const char *why)
{
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg = NULL;

	CHECK_RC(sseg_create(o, &seg, blob), err);
	CHECK_ERR_HAS(why);
	return 0;
}

static int refusals(void *arg)
{
	SSEG_OPTS(o, .name = "acl-refused", .size = 3 << 20, .world_size = 1,
		  .backend = SSEG_BACKEND_ASCEND);
	struct sseg_info info = { .sz = sizeof(info) };
	unsigned char blob[SSEG_BLOB_SIZE];
	struct ta_fake fake;
	sseg_t *seg;

	(void)arg;
	ta_fake_load("devices=2", &fake);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_ASCEND, SSEG_PAGES_THP), -EOPNOTSUPP);
	CHECK_ERR_HAS("the kernel's THP and HugeTLB pool cannot be asked for");
	CHECK_RC(sseg_check_support(SSEG_BACKEND_ASCEND, SSEG_PAGES_HUGETLB_2M), -EOPNOTSUPP);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_ASCEND, SSEG_PAGES_BASE), 0);
	o.flags = SSEG_F_READONLY_PEERS;
	create_fails(&o, -EOPNOTSUPP, "READWRITE is the one flag supported");
	o.flags = 0;
	o.numa = SSEG_NUMA_INTERLEAVE;
	create_fails(&o, -EOPNOTSUPP, "numa=interleave is not available");
	o.numa = SSEG_NUMA_DEVICE_LOCAL;
	create_fails(&o, -EOPNOTSUPP, "documents no query of a device's host node");
	o.numa = SSEG_NUMA_NODE;
	o.numa_node = 0;
	o.device = 5;
	create_fails(&o, -ENODEV, "device=5, but the ACL runtime sees 2 device(s)");
	/* Normal pages come at 2 MiB too (the driver backs ACL host memory
	 * with huge pages whatever the page type): what was obtained is said. */
	o.device = 1;
	o.pages = SSEG_PAGES_BASE;
	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_complete(seg, blob), 0);
	CHECK_RC(sseg_info(seg, &info), 0);
	CHECK(info.pages == SSEG_PAGES_AUTO && info.page_size == 2u << 20);
	CHECK(info.mapped_size == 4u << 20 && !strcmp(info.handle_type, "acl-trustlist"));
	CHECK(strstr(info.pages_reason, "ACL_DDR_MEM_NORMAL (the driver backs it with 2 MiB"));
	CHECK_RC(sseg_destroy(seg), 0);
	CHECK(ta_fake_clean(&fake));
	return 0;
}

static int zero = 0, one = 1;

static const struct tu_case cases[] = {
	{ "no runtime", no_runtime, NULL, 0 },
	{ "an entry point missing", entry_missing, NULL, 0 },
	{ "aclInit fails", init_fails, NULL, 0 },
	{ "initialized before", initialized_before, NULL, 0 },
	{ "no device", no_device, NULL, 0 },
	{ "facts", facts, &zero, 0 },
	{ "facts with fabric", facts, &one, 0 },
	{ "refusals", refusals, NULL, 0 },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	if (tu_run_cases(argc, argv, cases))
		return 1;
	printf("ascend_supported: ok\n");
	return 0;
}
