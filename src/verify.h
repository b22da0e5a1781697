/* SPDX-License-Identifier: Apache-2.0 */
/* Verification of every rank's blob before anything is mapped (verify.c). */
#ifndef SSEG_VERIFY_H
#define SSEG_VERIFY_H

#include "blob.h"

struct sseg;

/* Decodes raw (world_size blobs) into blobs and checks them all; each
 * failure names the rank, the field and both values. */
SSEG_HIDDEN int sseg_verify_blobs(const struct sseg *seg, const void *raw,
				  struct sseg_blob *blobs);

#endif
