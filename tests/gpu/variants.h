/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check variants SIZE. */
#ifndef SSEG_GPU_VARIANTS_H
#define SSEG_GPU_VARIANTS_H

/* The exit status: 0, or 1 when a variant failed. */
int variants_main(unsigned long long size);

#endif
