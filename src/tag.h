/* SPDX-License-Identifier: Apache-2.0 */
/* The tag that lets `sharedseg ls` see a rank of a segment whose memory
 * /proc does not name (tag.c). */
#ifndef SSEG_TAG_H
#define SSEG_TAG_H

#include "internal.h"

struct sseg;

/* For a backend without SSEG_CAP_TAGGED: a page mapped from a memfd named
 * "sseg-tag:NAME rank=R world=W owner=O backend=B size=S pages=P page=Z".
 * Best effort: a rank without it is only missing from the list. */
SSEG_HIDDEN void sseg_tag_place(struct sseg *seg);
SSEG_HIDDEN void sseg_tag_release(struct sseg *seg);
/* In a fork child, which does not inherit the page. */
SSEG_HIDDEN void sseg_tag_forget(struct sseg *seg);

#endif
