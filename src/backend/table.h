/* SPDX-License-Identifier: Apache-2.0 */
/* The backend table: one line per backend, in the order AUTO picks a
 * device driver for host registration. Adding a backend is one line here
 * and its own files (src/backend/NAME/, src/driver/NAME.c). */
#ifndef SSEG_BACKEND_TABLE_H
#define SSEG_BACKEND_TABLE_H

#include "hidden.h"

/* X(enum value, ops symbol) */
#define SSEG_BACKEND_TABLE(X)                   \
	X(SSEG_BACKEND_MEMFD, sseg_memfd_ops)   \
	X(SSEG_BACKEND_CUDA, sseg_cuda_ops)     \
	X(SSEG_BACKEND_ASCEND, sseg_ascend_ops)

struct sseg_backend_ops;

#define SSEG_BACKEND_DECLARE(kind, ops) SSEG_HIDDEN extern const struct sseg_backend_ops ops;
SSEG_BACKEND_TABLE(SSEG_BACKEND_DECLARE)
#undef SSEG_BACKEND_DECLARE

#endif
