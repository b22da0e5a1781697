/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check populate: one memfd against several under one mapping, per page kind. */
#ifndef SSEG_GPU_POPULATE_H
#define SSEG_GPU_POPULATE_H

/* One line per size, page kind and file count; never fails (a refusal is a line). */
int populate_main(const unsigned long long *sizes, int n);

#endif
