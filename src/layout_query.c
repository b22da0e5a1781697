/* SPDX-License-Identifier: Apache-2.0 */
/* Reading a layout: block descriptions, entry offsets, and the reverse
 * lookup from an offset to the one entry that starts there. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "layout.h"
#include "layout_impl.h"

struct sseg_layout *sseg_layout_copy(const struct sseg_layout *l)
{
	struct sseg_block_desc *descs = calloc((size_t)l->nblocks, sizeof(*descs));
	struct sseg_layout *copy = NULL;

	if (!descs)
		return NULL;
	for (int b = 0; b < l->nblocks; b++)
		sseg_layout_block(l, b, &descs[b]);
	if (sseg_layout_create(descs, l->nblocks, l->order, l->align, &copy))
		copy = NULL;
	free(descs);
	return copy;
}

/* ---- queries ---- */

uint64_t sseg_layout_size(const struct sseg_layout *layout)
{
	return layout ? layout->size : 0;
}

int sseg_layout_nblocks(const struct sseg_layout *layout)
{
	if (!layout)
		return sseg_err(-EINVAL, "layout is NULL");
	return layout->nblocks;
}

int sseg_layout_find(const struct sseg_layout *layout, const char *name)
{
	if (!layout || !name)
		return sseg_err(-EINVAL, "sseg_layout_find: layout or name is NULL");
	for (int b = 0; b < layout->nblocks; b++)
		if (!strcmp(layout->blocks[b].name, name))
			return b;
	return sseg_err(-ENOENT, "the layout has no block named '%s'", name);
}

static int check_block_index(const struct sseg_layout *layout, int block)
{
	if (!layout)
		return sseg_err(-EINVAL, "layout is NULL");
	if (block < 0 || block >= layout->nblocks)
		return sseg_err(-EINVAL, "layout block %d does not exist (the layout has %d)", block,
				layout->nblocks);
	return 0;
}

int sseg_layout_block(const struct sseg_layout *layout, int block, struct sseg_block_desc *desc)
{
	const struct layout_block *blk;
	int rc = check_block_index(layout, block);

	if (rc)
		return rc;
	if (!desc)
		return sseg_err(-EINVAL, "sseg_layout_block: desc is NULL");
	blk = &layout->blocks[block];
	desc->name = blk->name;
	desc->count = blk->count;
	desc->bytes = blk->bytes;
	desc->align = blk->align;
	desc->shape = blk->shape;
	return 0;
}

/* The run holding row index: the first whose row_end exceeds it. */
static const struct layout_run *find_run(const struct sseg_layout *l, uint64_t index)
{
	int lo = 0, hi = l->nruns - 1;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (l->runs[mid].row_end > index)
			hi = mid;
		else
			lo = mid + 1;
	}
	return &l->runs[lo];
}

static uint64_t entry_offset(const struct sseg_layout *l, int block, uint64_t index)
{
	const struct layout_block *blk = &l->blocks[block];
	const struct layout_run *run;

	if (l->order == SSEG_LAYOUT_GROUPED)
		return blk->first + index * blk->stride;
	run = find_run(l, index);
	return run->start + (index - run->row_begin) * run->row_size + row_offset(l, run, block);
}

int sseg_layout_offset(const struct sseg_layout *layout, int block, uint64_t index,
		       uint64_t *offset)
{
	int rc = check_block_index(layout, block);

	if (rc)
		return rc;
	if (index >= layout->blocks[block].count)
		return sseg_err(-ERANGE, "layout block '%s' has %llu entries, index %llu is past them",
				layout->blocks[block].name,
				(unsigned long long)layout->blocks[block].count,
				(unsigned long long)index);
	if (!offset)
		return sseg_err(-EINVAL, "sseg_layout_offset: offset is NULL");
	*offset = entry_offset(layout, block, index);
	return 0;
}

const char *sseg_layout_describe(const struct sseg_layout *layout)
{
	return layout ? layout->description : "";
}

uint64_t sseg_layout_hash(const struct sseg_layout *layout)
{
	return layout ? layout->hash : 0;
}

/* ---- reverse lookup ---- */

static int grouped_entry_at(const struct sseg_layout *l, uint64_t offset, int *block,
			    uint64_t *index)
{
	int lo = 0, hi = l->nblocks - 1;
	const struct layout_block *blk;
	uint64_t rel;

	while (lo < hi) { /* the last block starting at or before offset */
		int mid = (lo + hi + 1) / 2;

		if (l->blocks[mid].first <= offset)
			lo = mid;
		else
			hi = mid - 1;
	}
	blk = &l->blocks[lo];
	if (offset < blk->first)
		return -ENOENT;
	rel = offset - blk->first;
	if (rel % blk->stride || rel / blk->stride >= blk->count)
		return -ENOENT;
	*block = lo;
	*index = rel / blk->stride;
	return 0;
}

static int interleaved_entry_at(const struct sseg_layout *l, uint64_t offset, int *block,
				uint64_t *index)
{
	const struct layout_run *run = NULL;
	uint64_t rel, row, pos = 0;

	for (int r = l->nruns - 1; r >= 0 && !run; r--)
		if (l->runs[r].start <= offset)
			run = &l->runs[r];
	if (!run || offset >= l->size)
		return -ENOENT;
	rel = offset - run->start;
	row = rel / run->row_size;
	rel %= run->row_size;
	for (int b = 0; b < l->nblocks; b++) { /* the walk row_offset does, once */
		const struct layout_block *blk = &l->blocks[b];

		if (blk->count <= run->row_begin)
			continue;
		pos = align_to(pos, blk->entry_align);
		if (pos == rel) {
			*block = b;
			*index = run->row_begin + row;
			return 0;
		}
		pos += blk->stride;
	}
	return -ENOENT;
}

int sseg_layout_entry_at(const struct sseg_layout *l, uint64_t offset, uint64_t len, int *block,
			 uint64_t *index)
{
	int b = -1, rc;
	uint64_t i = 0;

	if (l->order == SSEG_LAYOUT_GROUPED)
		rc = grouped_entry_at(l, offset, &b, &i);
	else
		rc = interleaved_entry_at(l, offset, &b, &i);
	if (rc || len != l->blocks[b].bytes)
		return sseg_err(-ENOENT, "[%llu, +%llu) is not exactly one entry of the layout",
				(unsigned long long)offset, (unsigned long long)len);
	*block = b;
	*index = i;
	return 0;
}

/* ---- cuts that keep entries whole ---- */

static uint64_t grouped_cut(const struct sseg_layout *l, uint64_t offset)
{
	for (int b = l->nblocks - 1; b >= 0; b--) {
		const struct layout_block *blk = &l->blocks[b];
		uint64_t i, start;

		if (blk->first > offset)
			continue;
		i = (offset - blk->first) / blk->stride;
		if (i >= blk->count)
			return offset;
		start = blk->first + i * blk->stride;
		return offset < start + blk->bytes ? start : offset;
	}
	return offset;
}

static uint64_t interleaved_cut(const struct sseg_layout *l, uint64_t offset)
{
	const struct layout_run *run = NULL;
	uint64_t rel, row_start, pos = 0;

	for (int r = l->nruns - 1; r >= 0 && !run; r--)
		if (l->runs[r].start <= offset)
			run = &l->runs[r];
	if (!run || offset >= l->size)
		return offset;
	rel = (offset - run->start) % run->row_size;
	row_start = offset - rel;
	for (int b = 0; b < l->nblocks; b++) {
		const struct layout_block *blk = &l->blocks[b];

		if (blk->count <= run->row_begin)
			continue;
		pos = align_to(pos, blk->entry_align);
		if (rel >= pos && rel < pos + blk->bytes)
			return row_start + pos;
		pos += blk->stride;
	}
	return offset;
}

uint64_t sseg_layout_cut_before(const struct sseg_layout *l, uint64_t offset)
{
	if (l->order == SSEG_LAYOUT_GROUPED)
		return grouped_cut(l, offset);
	return interleaved_cut(l, offset);
}
