/* SPDX-License-Identifier: Apache-2.0 */
/* Our CUDA ABI declarations against the toolkit's cuda.h: every value, size
 * and offset the backend relies on must agree. Where the toolkit's headers
 * are not installed there is nothing to compare with (exit 77). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "abi/cuda_abi_list.h"
#include "driver/cuda_abi.h"

/* Our PFN types against the signatures the list spells out: a typo in
 * either fails the build here; cuda.h's side is compared at run time. */
#define SSEG_ABI_P_ASSERT(ours, theirs, ...) \
	_Static_assert(__builtin_types_compatible_p(ours, __VA_ARGS__), #ours " signature");
SSEG_CUDA_PFN_LIST(SSEG_ABI_P_ASSERT)

static const struct sseg_abi_item ours[] = {
	SSEG_CUDA_ABI_LIST(SSEG_ABI_V, SSEG_ABI_S, SSEG_ABI_O, SSEG_ABI_P_OURS) { 0, 0 }
};

#ifdef SSEG_HAVE_CUDA_H
extern const struct sseg_abi_item sseg_abi_toolkit[];

int main(void)
{
	int bad = 0, n = 0;

	for (; ours[n].name; n++) {
		if (!sseg_abi_toolkit[n].name || strcmp(ours[n].name, sseg_abi_toolkit[n].name))
			return fprintf(stderr, "the two tables differ in shape at %d\n", n), 1;
		if (ours[n].value != sseg_abi_toolkit[n].value) {
			fprintf(stderr, "%s: ours %lld, cuda.h %lld\n", ours[n].name, ours[n].value,
				sseg_abi_toolkit[n].value);
			bad++;
		}
	}
	printf("cuda_abi: %d items checked against cuda.h, %d differ\n", n, bad);
	return bad ? 1 : 0;
}
#else
int main(void)
{
	(void)ours;
	fprintf(stderr, "the CUDA toolkit's cuda.h is not installed: nothing to compare with\n");
	return 77;
}
#endif
