/* SPDX-License-Identifier: Apache-2.0 */
/* Host registration of a memfd segment (hostreg.c): each rank pins its own
 * mapping for device DMA through the host-registration driver of a backend
 * (backend.h: struct sseg_hostreg_ops). */
#ifndef SSEG_HOSTREG_H
#define SSEG_HOSTREG_H

#include "internal.h"

struct sseg;

/* In create: 0 when a driver can serve opts.device_backend. */
SSEG_HIDDEN int sseg_hostreg_check(const struct sseg *seg);
/* In complete, after mapping: register this rank's mapping. */
SSEG_HIDDEN int sseg_hostreg_register(struct sseg *seg);
/* Resumable teardown of what register took. */
SSEG_HIDDEN int sseg_hostreg_release(struct sseg *seg);
SSEG_HIDDEN uint64_t sseg_hostreg_device_addr(const struct sseg *seg);
SSEG_HIDDEN int sseg_hostreg_chunks(const struct sseg *seg);

#endif
