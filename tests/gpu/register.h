/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check register SIZE REPS RANKS. */
#ifndef SSEG_GPU_REGISTER_H
#define SSEG_GPU_REGISTER_H

/* The exit status: 0, or 1 when a page size failed. */
int register_main(unsigned long long size, int reps, int ranks);

#endif
