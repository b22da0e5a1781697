/* SPDX-License-Identifier: Apache-2.0 */
/* fork() after ascend segments exist: ACL does not work in the child (the
 * fake fails every call there and counts it as a bug; torch_npu refuses it
 * outright), so neither the core's atfork handler nor anything the child
 * does with the inherited segments (sseg_info, sseg_destroy) may call the
 * runtime: no aclrtUnmapMem, aclrtFreePhysical, aclrtResetDevice or
 * aclrtHostUnregister. The runtime's handles, mappings, registrations and
 * device references stay the parent's, which tears down cleanly; the
 * driver does not copy its mappings into a child (don't-fork), so a child
 * that touches the segment's address dies of SIGSEGV (a grandchild tries). */
#include "aclutil.h"
#include "forkcheck.h"
#include "testutil.h"

static struct ta_fake fake;

/* The runtime counts a call made in the child as a bug. */
static int no_bugs(void)
{
	CHECK(fake.bugs() == 0);
	return 0;
}

int main(void)
{
	ta_fake_load("devices=1", &fake);
	tu_fork_after_segments(&(struct tu_fork_check){
		.prefix = "acl-fork",
		.device = SSEG_BACKEND_ASCEND,
		.registrar = SSEG_BACKEND_ASCEND,
		.calls = fake.calls,
		.live_registrations = fake.live_registrations,
		.live_mappings = fake.live_mappings,
		.child_checks = no_bugs,
		.device_pages = TU_FORK_PAGES_ABSENT,
	});
	CHECK(ta_fake_clean(&fake));
	printf("ascend_fork: ok\n");
	return 0;
}
