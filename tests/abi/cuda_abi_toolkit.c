/* SPDX-License-Identifier: Apache-2.0 */
/* The list of tests/abi/cuda_abi_list.h over the toolkit's cuda.h. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <stddef.h>

#include "cuda_abi_list.h"

const struct sseg_abi_item sseg_abi_toolkit[] = {
	SSEG_CUDA_ABI_LIST(SSEG_ABI_V, SSEG_ABI_S, SSEG_ABI_O, SSEG_ABI_P_TOOLKIT) { 0, 0 }
};
