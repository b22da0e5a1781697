/* SPDX-License-Identifier: Apache-2.0 */
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

static void free_once(struct ta_fake *fake)
{
	uint64_t abandoned = sseg_abandoned_handles();
	sseg_t *seg = tu_one_rank("free-once", SSEG_BACKEND_ASCEND);
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

/* The cleanup-pending contract (tu_pending_contract) on this backend. */
static void pending(struct ta_fake *fake)
{
	const struct tu_pending contract = {
		"acl-pending", SSEG_BACKEND_ASCEND, fake->fail, "aclrtUnmapMem", 507000,
		"aclrtUnmapMem failed: ACL_ERROR_RT_INTERNAL_ERROR",
	};
	char first[1024] = "";

	tu_pending_contract(&contract, first, sizeof(first));
	CHECK(strstr(first, "segment 'acl-pending'"));
	CHECK(strstr(first, "aclrtUnmapMem failed: ACL_ERROR_RT_INTERNAL_ERROR"));
	CHECK(ta_fake_clean(fake));
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
