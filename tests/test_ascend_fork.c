/* SPDX-License-Identifier: Apache-2.0 */
/* fork() after ascend segments exist: ACL does not work in the child (the
 * fake fails every call there and counts it as a bug; torch_npu refuses it
 * outright), so neither the core's atfork handler nor anything the child
 * does with the inherited segments (sseg_info, sseg_destroy) may call the
 * runtime: no aclrtUnmapMem, aclrtFreePhysical, aclrtResetDevice or
 * aclrtHostUnregister. The runtime's handles, mappings, registrations and
 * device references stay the parent's, which tears down cleanly. */
#include <string.h>

#include "aclutil.h"
#include "testutil.h"

static struct ta_fake fake;
static sseg_t *vmm, *registered;
static long calls_before_fork;

static sseg_t *solo(const char *name, enum sseg_backend backend)
{
	SSEG_OPTS(o, .name = name, .size = 4 << 20, .world_size = 1, .backend = backend,
		  .pages = backend == SSEG_BACKEND_MEMFD ? SSEG_PAGES_BASE : SSEG_PAGES_AUTO,
		  .flags = backend == SSEG_BACKEND_MEMFD ? SSEG_F_HOST_REGISTER : 0,
		  .device_backend = SSEG_BACKEND_ASCEND);
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_complete(seg, blob), 0);
	return seg;
}

static int child(void *arg)
{
	struct sseg_info info = { .sz = sizeof(info) };

	(void)arg;
	CHECK(fake.calls(NULL) == calls_before_fork); /* the atfork handler made none */
	CHECK_RC(sseg_info(vmm, &info), 0);
	CHECK_RC(sseg_info(registered, &info), 0);
	CHECK_RC(sseg_destroy(vmm), 0);
	CHECK_RC(sseg_destroy(registered), 0);
	CHECK(fake.calls(NULL) == calls_before_fork);
	CHECK(fake.bugs() == 0);
	return 0;
}

int main(void)
{
	struct sseg_info info = { .sz = sizeof(info) };

	ta_fake_load("devices=1", &fake);
	vmm = solo("acl-fork-vmm", SSEG_BACKEND_ASCEND);
	registered = solo("acl-fork-hostreg", SSEG_BACKEND_MEMFD);
	CHECK_RC(sseg_info(registered, &info), 0);
	CHECK(info.registered_chunks == 1 && fake.live_registrations() == 1);
	calls_before_fork = fake.calls(NULL);
	CHECK(tu_wait(tu_fork(child, NULL), 10000) == 0);
	/* The parent's segments are whole. */
	((unsigned char *)sseg_base(vmm))[1] = 1;
	CHECK(fake.live_registrations() == 1 && fake.live_mappings() == 1);
	CHECK_RC(sseg_destroy(vmm), 0);
	CHECK_RC(sseg_destroy(registered), 0);
	CHECK(ta_fake_clean(&fake));
	printf("ascend_fork: ok\n");
	return 0;
}
