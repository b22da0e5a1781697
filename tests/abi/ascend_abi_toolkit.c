/* SPDX-License-Identifier: Apache-2.0 */
/* The list of tests/abi/ascend_abi_list.h over the CANN toolkit's acl_rt.h. */
#include <acl/acl_rt.h>
#include <stddef.h>
#include <stdio.h>

#include "ascend_abi_list.h"

int sseg_acl_abi_toolkit_mismatches(void);

int sseg_acl_abi_toolkit_mismatches(void)
{
	const char *header = "acl_rt.h";
	int bad = 0;

	SSEG_ACL_ABI_EXPECTED(SSEG_ACL_ABI_COUNT)
	return bad;
}
