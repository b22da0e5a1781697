/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check pinning: registration against VMM create + export + import, per GiB. */
#ifndef SSEG_GPU_PINNING_H
#define SSEG_GPU_PINNING_H

/* One pair of lines per size; 1 when the driver cannot be loaded. */
int pinning_main(const unsigned long long *sizes, int n);

#endif
