/* SPDX-License-Identifier: Apache-2.0 */
/* What `sharedseg ls` shows, for its tests (listing.c): the helper
 * library's document, compact, and the built tool's output. */
#ifndef SSEG_LISTING_H
#define SSEG_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sseg_list;

/* The document of a scan made now, or of l; free() it. */
char *listing_now(void);
char *listing_of(const struct sseg_list *l);
/* The JSON object of the first segment named name at or after from. */
const char *segment_of(const char *from, const char *name);
/* Whether needle occurs in the segment object at seg (up to the next). */
bool in_segment(const char *seg, const char *needle);
/* Whether pid is among the segment's processes. */
bool has_pid(const char *seg, pid_t pid);
/* What `sharedseg ls ARGS` (SSEG_BUILD_DIR's) prints, NUL-ended; *len its
 * length; free() it. */
char *run_ls(const char *args, size_t *len);

#endif
