#ifndef SSEG_HOSTREG_H
#define SSEG_HOSTREG_H

#include "segment.h"

/* Registers this rank's mapping (complete, after mapping). */
SSEG_HIDDEN int sseg_hostreg_register(struct sseg *seg);
/* Resumable teardown of what register took. */
SSEG_HIDDEN int sseg_hostreg_release(struct sseg *seg);
SSEG_HIDDEN uint64_t sseg_hostreg_device_addr(const struct sseg *seg);
SSEG_HIDDEN int sseg_hostreg_chunks(const struct sseg *seg);

#endif
