/* SPDX-License-Identifier: Apache-2.0 */
/* Internal layout helpers for the registry and the segment code. */
#ifndef SSEG_LAYOUT_H
#define SSEG_LAYOUT_H

#include <stdint.h>

#include "internal.h"

/* 0 when [offset, offset+len) is exactly one entry (len equal to its block's
 * bytes), with *block and *index set; -ENOENT otherwise. Costs O(nblocks),
 * never a walk over the entries. */
SSEG_HIDDEN int sseg_layout_entry_at(const struct sseg_layout *l, uint64_t offset, uint64_t len,
				     int *block, uint64_t *index);

/* The largest offset <= offset that no entry straddles: offset itself when
 * it falls between entries, else the start of the entry it falls in. A cut
 * there keeps every entry whole (host registration chunks). */
SSEG_HIDDEN uint64_t sseg_layout_cut_before(const struct sseg_layout *l, uint64_t offset);

/* The first difference between two canonical descriptions (a_len, b_len
 * bytes, maybe cut short), labelled la and lb: "block 'k': rank 2 declared
 * count=61, rank 0 declared count=60". 0 with the text, -ENOENT when the
 * carried parts do not differ. */
SSEG_HIDDEN int sseg_layout_diff(const char *a, size_t a_len, const char *la, const char *b,
				 size_t b_len, const char *lb, char *out, size_t len);

/* A deep copy, or NULL when memory is short. */
SSEG_HIDDEN struct sseg_layout *sseg_layout_copy(const struct sseg_layout *l);

#endif
