/* SPDX-License-Identifier: Apache-2.0 */
/* What the CANN runtime and driver refuse, as the fake ACL runtime now
 * refuses it, and what the backend does about each, one child per case:
 * an NPU on PCIe (device access to host VMM memory needs HCCS: the probe
 * says the backend is not available and why, create names it), a driver without HOST_NUMA allocations (HOST
 * with id 0 instead, unless a node was asked for), ASCEND_RT_VISIBLE_DEVICES
 * (access is granted to the driver's device, not the user's ordinal), a
 * runtime that needs no aclInit (the framework's aclInit stays the first),
 * and the runtime's own error codes by name and errno. */
#include <dlfcn.h>
#include <string.h>

#include "aclutil.h"
#include "runcases.h"
#include "testutil.h"

#define SZ (4u << 20)

/* Create and complete; after a failed complete the segment is the
 * caller's to destroy (*seg stays set), after a failed create NULL. */
static int solo(const struct sseg_opts *o, sseg_t **seg)
{
	unsigned char blob[SSEG_BLOB_SIZE];
	int rc;

	*seg = NULL;
	rc = sseg_create(o, seg, blob);
	if (rc)
		*seg = NULL;
	else
		rc = sseg_complete(*seg, blob);
	return rc;
}

static void destroy_failed(sseg_t *seg)
{
	if (seg)
		CHECK_RC(sseg_destroy(seg), 0);
}

/* PCIe: the probe does what a segment does and fails where it fails; the
 * backend is not available, and the reason names the link and what serves
 * such a device (memfd + SSEG_F_HOST_REGISTER); a create says the same. */
static int pcie(void *arg)
{
	SSEG_OPTS(o, .name = "acl-pcie", .size = SZ, .world_size = 1,
		  .backend = SSEG_BACKEND_ASCEND);
	struct sseg_probe_device d = { .sz = sizeof(d) };
	struct sseg_probe_backend b = { .sz = sizeof(b) };
	struct ta_fake fake;
	sseg_t *seg = NULL;

	(void)arg;
	ta_fake_load("devices=2;hccs=0", &fake);
	CHECK_RC(sseg_probe_device(SSEG_BACKEND_ASCEND, 1, &d), 0);
	CHECK(d.vmm == 1 && d.host_vmm_works == 0);
	CHECK_RC(sseg_probe_backend(SSEG_BACKEND_ASCEND, &b), 0);
	fprintf(stderr, "reason: %s\n", b.reason);
	CHECK(!b.available && b.ndevices == 2 && b.pinned);
	CHECK(!strncmp(b.reason, "not available: device 0 ", 24));
	CHECK(strstr(b.reason, "over HCCS only, not PCIe"));
	CHECK(strstr(b.reason, "backend=memfd with SSEG_F_HOST_REGISTER"));
	CHECK_RC(sseg_check_support(SSEG_BACKEND_ASCEND, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK_ERR_HAS("over HCCS only, not PCIe");
	CHECK_RC(solo(&o, &seg), -EOPNOTSUPP);
	CHECK_ERR_HAS("over HCCS only, not PCIe");
	CHECK_ERR_HAS("SSEG_F_HOST_REGISTER");
	destroy_failed(seg);
	/* What does serve it: a memfd segment the runtime registers. */
	o.backend = SSEG_BACKEND_MEMFD;
	o.pages = SSEG_PAGES_BASE;
	o.flags = SSEG_F_HOST_REGISTER;
	o.device_backend = SSEG_BACKEND_ASCEND;
	CHECK_RC(solo(&o, &seg), 0);
	CHECK_RC(sseg_destroy(seg), 0);
	CHECK(ta_fake_clean(&fake));
	return 0;
}

/* An older driver: HOST_NUMA refused, HOST (id 0) taken, as public users
 * fall back; a node the caller chose is not traded for another. */
static int no_host_numa(void *arg)
{
	SSEG_OPTS(o, .name = "acl-host", .size = SZ, .world_size = 1,
		  .backend = SSEG_BACKEND_ASCEND);
	struct sseg_info info = { .sz = sizeof(info) };
	struct ta_fake fake;
	sseg_t *seg = NULL;

	(void)arg;
	ta_fake_load("host_numa=0", &fake);
	CHECK_RC(solo(&o, &seg), 0);
	CHECK_RC(sseg_info(seg, &info), 0);
	CHECK(strstr(info.pages_reason, "where the driver placed it (HOST_NUMA refused)"));
	((unsigned char *)sseg_base(seg))[SZ - 1] = 1;
	CHECK_RC(sseg_destroy(seg), 0);
	o.numa = SSEG_NUMA_NODE;
	o.numa_node = 0;
	CHECK_RC(solo(&o, &seg), -EOPNOTSUPP);
	CHECK_ERR_HAS("alloc mem via numa id");
	destroy_failed(seg);
	CHECK(ta_fake_clean(&fake));
	return 0;
}

/* ASCEND_RT_VISIBLE_DEVICES=1: the user's device 0 is the driver's 1. */
static int visible(void *arg)
{
	SSEG_OPTS(o, .name = "acl-visible", .size = SZ, .world_size = 1,
		  .backend = SSEG_BACKEND_ASCEND, .device = 0);
	struct ta_fake fake;
	sseg_t *seg = NULL;
	int devices = 0;
	size_t bytes;
	void *at;

	(void)arg;
	setenv("ASCEND_RT_VISIBLE_DEVICES", "1", 1);
	ta_fake_load("devices=2", &fake);
	CHECK_RC(solo(&o, &seg), 0);
	CHECK(fake.mapping(0, &at, &bytes, &devices) == 0 && at == sseg_base(seg));
	CHECK(devices == 1 << 1);
	CHECK_RC(sseg_destroy(seg), 0);
	CHECK(ta_fake_clean(&fake));
	return 0;
}

/* A runtime that answers without aclInit: this library does not call it,
 * and the framework's own aclInit, with its configuration, is the first. */
static int init_order(void *arg)
{
	void *lib;
	int (*init)(const char *);
	struct ta_fake fake;

	(void)arg;
	ta_fake_load("need_init=0", &fake);
	CHECK(fake.init_config() == NULL);
	lib = dlopen(ta_fake_path(), RTLD_NOW | RTLD_NOLOAD);
	CHECK(lib);
	*(void **)&init = dlsym(lib, "aclInit");
	CHECK(init && init("/dev/null") == 0);
	CHECK(!strcmp(fake.init_config(), "/dev/null"));
	return 0;
}

/* The runtime's codes by name, with the errno they mean. */
static int error_codes(void *arg)
{
	SSEG_OPTS(o, .name = "acl-codes", .size = SZ, .world_size = 1,
		  .backend = SSEG_BACKEND_ASCEND);
	SSEG_OPTS(r, .name = "acl-codes-reg", .size = SZ, .world_size = 1,
		  .backend = SSEG_BACKEND_MEMFD, .pages = SSEG_PAGES_BASE,
		  .flags = SSEG_F_HOST_REGISTER, .device_backend = SSEG_BACKEND_ASCEND);
	struct ta_fake fake;
	sseg_t *seg = NULL;

	(void)arg;
	ta_fake_load("", &fake);
	fake.fail("aclrtMallocPhysical", 1, -1, 207018);
	CHECK_RC(solo(&o, &seg), -ENOMEM);
	CHECK_ERR_HAS("ACL_ERROR_RT_DEVICE_OOM (207018)");
	destroy_failed(seg);
	fake.fail(NULL, 0, 0, 0);
	fake.fail("aclrtHostRegister", 1, 1, 507910);
	CHECK_RC(solo(&r, &seg), -EEXIST);
	CHECK_ERR_HAS("ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED (507910)");
	destroy_failed(seg);
	fake.fail("aclrtHostUnregister", 1, 1, 507911);
	CHECK_RC(solo(&r, &seg), 0);
	CHECK_RC(sseg_destroy(seg), -ENOENT);
	CHECK_ERR_HAS("ACL_ERROR_HOST_MEMORY_NOT_REGISTERED (507911)");
	CHECK_RC(sseg_destroy(seg), 0);
	CHECK(ta_fake_clean(&fake));
	return 0;
}

static const struct tu_case cases[] = {
	{ "PCIe", pcie, NULL, 0 },
	{ "no HOST_NUMA", no_host_numa, NULL, 0 },
	{ "visible devices", visible, NULL, 0 },
	{ "aclInit order", init_order, NULL, 0 },
	{ "error codes", error_codes, NULL, 0 },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	if (tu_run_cases(argc, argv, cases))
		return 1;
	printf("ascend_stack: ok\n");
	return 0;
}
