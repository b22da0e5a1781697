/* SPDX-License-Identifier: Apache-2.0 */
/* The layout's representation, shared by layout.c (building it) and
 * layout_query.c (reading it) only. */
#ifndef SSEG_LAYOUT_IMPL_H
#define SSEG_LAYOUT_IMPL_H

#include <stdint.h>

#include "internal.h"

struct layout_block {
	char *name;
	char *shape;          /* "" when none was given */
	uint64_t count;
	uint64_t bytes;
	uint64_t align;       /* as declared */
	uint64_t entry_align; /* max(layout align, declared align) */
	uint64_t stride;      /* bytes rounded up to entry_align */
	uint64_t first;       /* offset of entry 0 */
};

/* Interleaved rows [row_begin, row_end) hold the same blocks (those whose
 * count exceeds row_begin), so they share one row size. A new run starts
 * each time a block's count runs out. */
struct layout_run {
	uint64_t row_begin;
	uint64_t row_end;
	uint64_t start; /* offset of row row_begin */
	uint64_t row_size;
};

struct sseg_layout {
	enum sseg_layout_order order;
	uint64_t align;
	uint64_t size;
	int nblocks;
	int nruns;
	struct layout_block *blocks;
	struct layout_run *runs; /* interleaved only */
	char *description;
	uint64_t hash;
};

static inline uint64_t align_to(uint64_t v, uint64_t align)
{
	return (v + align - 1) & ~(align - 1);
}

/* Row-relative offset of block's entry in a row of run; UINT64_MAX when the
 * block has no entry there. Sizes were overflow-checked at create. */
static inline uint64_t row_offset(const struct sseg_layout *l, const struct layout_run *run, int block)
{
	uint64_t pos = 0;

	for (int b = 0; b <= block; b++) {
		const struct layout_block *blk = &l->blocks[b];

		if (blk->count <= run->row_begin)
			continue;
		pos = align_to(pos, blk->entry_align);
		if (b == block)
			return pos;
		pos += blk->stride;
	}
	return UINT64_MAX;
}

#endif
