/* SPDX-License-Identifier: Apache-2.0 */
/* Our ACL declarations (src/driver/acl_abi.h) against the values, sizes and
 * offsets of the CANN runtime reference, and against the toolkit's own
 * acl_rt.h where it is installed (compiled in by tests/CMakeLists.txt). */
#include <stddef.h>
#include <stdio.h>

#include "abi/ascend_abi_list.h"
#include "driver/acl_abi.h"

#ifdef SSEG_HAVE_ACL_H
int sseg_acl_abi_toolkit_mismatches(void);
#endif

int main(void)
{
	const char *header = "src/driver/acl_abi.h";
	int bad = 0;

	SSEG_ACL_ABI_EXPECTED(SSEG_ACL_ABI_COUNT)
#ifdef SSEG_HAVE_ACL_H
	bad += sseg_acl_abi_toolkit_mismatches();
	printf("ascend_abi: acl_abi.h and the toolkit's acl_rt.h checked, %d differ\n", bad);
#else
	printf("ascend_abi: acl_abi.h checked, %d differ (no CANN toolkit here to compare "
	       "acl_rt.h)\n", bad);
#endif
	return bad ? 1 : 0;
}
