/* SPDX-License-Identifier: Apache-2.0 */
/* Releasing what a segment holds (release.c). */
#ifndef SSEG_RELEASE_H
#define SSEG_RELEASE_H

#include "internal.h"

struct sseg;

/* Every held stage in reverse order of acquisition; resumable: a stage is
 * marked done only after it succeeded. */
SSEG_HIDDEN int sseg_release(struct sseg *seg);

#endif
