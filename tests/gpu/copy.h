/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check copy SIZE REPS. */
#ifndef SSEG_GPU_COPY_H
#define SSEG_GPU_COPY_H

/* The exit status: 0, or 1 when a kind of segment failed. */
int copy_main(unsigned long long size, int reps);

#endif
