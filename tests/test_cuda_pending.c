/* SPDX-License-Identifier: Apache-2.0 */
/* A segment whose teardown keeps failing (cuMemUnmap refused every time)
 * goes to the cleanup-pending list: counted, logged with base, length, stage
 * and the driver's error at most once per interval, retried by later
 * creates, and never in the way of an unrelated segment
 * (tu_pending_contract). */
#include <string.h>

#include "fakeutil.h"
#include "testutil.h"

int main(void)
{
	struct tu_fake fake;
	char first[1024] = "";

	tu_fake_load("devices=1;numa=0", &fake);
	tu_pending_contract(&(struct tu_pending){ "pending", SSEG_BACKEND_CUDA, fake.fail,
						  "cuMemUnmap", 999,
						  "cuMemUnmap failed: CUDA_ERROR_UNKNOWN" },
			    first, sizeof(first));
	CHECK(strstr(first, "segment 'pending' (base 0x"));
	CHECK(strstr(first, "2097152 bytes"));
	CHECK(strstr(first, "in destroy"));
	CHECK(strstr(first, "cuMemUnmap failed: CUDA_ERROR_UNKNOWN"));
	CHECK(tu_fake_clean(&fake));
	printf("cuda_pending: ok\n");
	return 0;
}
