/* SPDX-License-Identifier: Apache-2.0 */
/* The tag that lets `sharedseg ls` see a rank of a segment whose memory
 * /proc does not name (tag.c). */
#ifndef SSEG_TAG_H
#define SSEG_TAG_H

#include "internal.h"

struct sseg;

/* What /proc/PID/maps shows of a segment: its memfd ("/memfd:sseg:NAME")
 * and each rank's tag ("/memfd:sseg-tag:NAME rank=R world=W owner=O", and
 * for a tag page also " backend=B size=S pages=P page=Z"). */
#define SSEG_MEMFD_LABEL "sseg:"
#define SSEG_TAG_LABEL "sseg-tag:"
#define SSEG_TAG_MAX (SSEG_NAME_MAX + 192)
/* A keeper's one tag page: "sseg-tag:keeper=NAME" (no blank: no rank's). */
#define SSEG_KEEPER_TAG "keeper="

/* The rank's tag into buf (SSEG_TAG_MAX bytes); with what the memory is
 * when /proc cannot tell (a tag page). */
SSEG_HIDDEN void sseg_tag_name(const struct sseg *seg, bool tag_page, char *buf, size_t len);

/* For a backend without SSEG_CAP_TAGGED: a page mapped from a memfd named
 * "sseg-tag:NAME rank=R world=W owner=O backend=B size=S pages=P page=Z".
 * Best effort: a rank without it is only missing from the list. */
SSEG_HIDDEN void sseg_tag_place(struct sseg *seg);
SSEG_HIDDEN void sseg_tag_release(struct sseg *seg);
/* In a fork child, which does not inherit the page. */
SSEG_HIDDEN void sseg_tag_forget(struct sseg *seg);

#endif
