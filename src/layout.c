/* SPDX-License-Identifier: Apache-2.0 */
/* Layouts: named blocks of fixed-size entries at aligned offsets, either
 * interleaved per index or grouped per block. Every offset is decided at
 * create, so a lookup costs O(nblocks) at most and never walks entries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "layout.h"
#include "layout_impl.h"

#define LAYOUT_MAX_BLOCKS 256
#define LAYOUT_NAME_MAX 63
#define LAYOUT_SHAPE_MAX 255
#define LAYOUT_ALIGN_DEFAULT 4096ull
#define LAYOUT_ALIGN_MAX (1ull << 30)
#define LAYOUT_SIZE_MAX (1ull << 63)

/* ---- validation ---- */

static int check_name(const struct sseg_block_desc *d, int b)
{
	size_t len;

	if (!d->name || !d->name[0])
		return sseg_err(-EINVAL, "layout block %d has no name", b);
	len = strlen(d->name);
	if (len > LAYOUT_NAME_MAX)
		return sseg_err(-EINVAL, "layout block %d: name '%.20s...' is %zu bytes, at most %d", b,
				d->name, len, LAYOUT_NAME_MAX);
	if (strpbrk(d->name, ";:,="))
		return sseg_err(-EINVAL, "layout block %d: name '%s' contains one of ';' ':' ',' '='", b,
				d->name);
	return 0;
}

static int check_shape(const struct sseg_block_desc *d)
{
	size_t len;

	if (!d->shape)
		return 0;
	len = strlen(d->shape);
	if (len > LAYOUT_SHAPE_MAX)
		return sseg_err(-EINVAL, "layout block '%s': shape is %zu bytes, at most %d", d->name,
				len, LAYOUT_SHAPE_MAX);
	if (strchr(d->shape, ';'))
		return sseg_err(-EINVAL, "layout block '%s': shape '%s' contains ';'", d->name,
				d->shape);
	return 0;
}

static int check_align(uint64_t align, const char *what)
{
	if (align && (!sseg_is_pow2(align) || align > LAYOUT_ALIGN_MAX))
		return sseg_err(-EINVAL, "%s: alignment %llu is not a power of two up to 1 GiB", what,
				(unsigned long long)align);
	return 0;
}

static int check_block(const struct sseg_block_desc *blocks, int b)
{
	const struct sseg_block_desc *d = &blocks[b];
	char what[96];
	int rc;

	rc = check_name(d, b);
	if (rc)
		return rc;
	for (int o = 0; o < b; o++)
		if (!strcmp(blocks[o].name, d->name))
			return sseg_err(-EINVAL, "layout blocks %d and %d are both named '%s'", o, b,
					d->name);
	if (d->count < 1)
		return sseg_err(-EINVAL, "layout block '%s': count must be at least 1", d->name);
	if (d->bytes < 1)
		return sseg_err(-EINVAL, "layout block '%s': bytes must be at least 1", d->name);
	snprintf(what, sizeof(what), "layout block '%s'", d->name);
	rc = check_align(d->align, what);
	return rc ? rc : check_shape(d);
}

static int check_args(const struct sseg_block_desc *blocks, int nblocks,
		      enum sseg_layout_order order, uint64_t align, struct sseg_layout **layout)
{
	int rc;

	if (!layout)
		return sseg_err(-EINVAL, "sseg_layout_create: layout pointer is NULL");
	if (nblocks < 1 || nblocks > LAYOUT_MAX_BLOCKS)
		return sseg_err(-EINVAL, "a layout has 1 to %d blocks, not %d", LAYOUT_MAX_BLOCKS,
				nblocks);
	if (!blocks)
		return sseg_err(-EINVAL, "sseg_layout_create: blocks is NULL");
	if (order != SSEG_LAYOUT_INTERLEAVED && order != SSEG_LAYOUT_GROUPED)
		return sseg_err(-EINVAL, "unknown layout order %d", (int)order);
	rc = check_align(align, "layout");
	for (int b = 0; !rc && b < nblocks; b++)
		rc = check_block(blocks, b);
	return rc;
}

/* ---- placement ---- */

static int overflow(const struct layout_block *blk)
{
	return sseg_err(-EOVERFLOW,
			"layout exceeds 2^63 bytes at block '%s' (count %llu, %llu bytes each)",
			blk->name, (unsigned long long)blk->count, (unsigned long long)blk->bytes);
}

static int place_grouped(struct sseg_layout *l)
{
	uint64_t pos = 0;

	for (int b = 0; b < l->nblocks; b++) {
		struct layout_block *blk = &l->blocks[b];
		uint64_t span;

		if (sseg_round_up(pos, blk->entry_align, &blk->first) ||
		    __builtin_mul_overflow(blk->count, blk->stride, &span) ||
		    __builtin_add_overflow(blk->first, span, &pos) || pos > LAYOUT_SIZE_MAX)
			return overflow(blk);
	}
	l->size = pos;
	return 0;
}

/* Row size of a run: its blocks in order, each at its alignment, the end
 * rounded up to the largest alignment so that every row repeats the first. */
static int run_row_size(struct sseg_layout *l, struct layout_run *run)
{
	uint64_t pos = 0, row_align = 1;

	for (int b = 0; b < l->nblocks; b++) {
		struct layout_block *blk = &l->blocks[b];

		if (blk->count <= run->row_begin)
			continue;
		if (sseg_round_up(pos, blk->entry_align, &pos) ||
		    __builtin_add_overflow(pos, blk->stride, &pos) || pos > LAYOUT_SIZE_MAX)
			return overflow(blk);
		if (blk->entry_align > row_align)
			row_align = blk->entry_align;
	}
	if (sseg_round_up(pos, row_align, &run->row_size))
		return overflow(&l->blocks[l->nblocks - 1]);
	return 0;
}

/* The smallest count above row_begin: where the next run ends. */
static int run_end(const struct sseg_layout *l, uint64_t row_begin, uint64_t *row_end)
{
	int ender = -1;

	for (int b = 0; b < l->nblocks; b++) {
		uint64_t c = l->blocks[b].count;

		if (c > row_begin && (ender < 0 || c < *row_end)) {
			*row_end = c;
			ender = b;
		}
	}
	return ender;
}

static int place_interleaved(struct sseg_layout *l)
{
	uint64_t row_begin = 0, pos = 0, row_end = 0;
	int ender;

	while ((ender = run_end(l, row_begin, &row_end)) >= 0) {
		struct layout_run *run = &l->runs[l->nruns++];
		uint64_t span;
		int rc;

		run->row_begin = row_begin;
		run->row_end = row_end;
		run->start = pos; /* a later run's alignment never exceeds an earlier one's */
		rc = run_row_size(l, run);
		if (rc)
			return rc;
		if (__builtin_mul_overflow(row_end - row_begin, run->row_size, &span) ||
		    __builtin_add_overflow(pos, span, &pos) || pos > LAYOUT_SIZE_MAX)
			return overflow(&l->blocks[ender]);
		row_begin = row_end;
	}
	for (int b = 0; b < l->nblocks; b++)
		l->blocks[b].first = row_offset(l, &l->runs[0], b);
	l->size = pos;
	return 0;
}

/* ---- description ---- */

static int describe(struct sseg_layout *l)
{
	size_t len = 0;
	FILE *f = open_memstream(&l->description, &len);

	if (!f)
		return sseg_err(-ENOMEM, "no memory for the layout description");
	fprintf(f, "v1;order=%s;align=%llu;size=%llu",
		l->order == SSEG_LAYOUT_GROUPED ? "grouped" : "interleaved",
		(unsigned long long)l->align, (unsigned long long)l->size);
	for (int b = 0; b < l->nblocks; b++) {
		const struct layout_block *blk = &l->blocks[b];

		fprintf(f, ";%s:count=%llu,bytes=%llu,align=%llu,offset=%llu,shape=%s", blk->name,
			(unsigned long long)blk->count, (unsigned long long)blk->bytes,
			(unsigned long long)blk->entry_align, (unsigned long long)blk->first,
			blk->shape);
	}
	if (fclose(f) || !l->description)
		return sseg_err(-ENOMEM, "no memory for the layout description");
	l->hash = sseg_hash64(l->description, len, 0);
	return 0;
}

/* ---- create and destroy ---- */

static int copy_block(struct layout_block *blk, const struct sseg_block_desc *d, uint64_t align)
{
	blk->name = strdup(d->name);
	blk->shape = strdup(d->shape ? d->shape : "");
	if (!blk->name || !blk->shape)
		return sseg_err(-ENOMEM, "no memory for layout block '%s'", d->name);
	blk->count = d->count;
	blk->bytes = d->bytes;
	blk->align = d->align;
	blk->entry_align = d->align > align ? d->align : align;
	if (sseg_round_up(d->bytes, blk->entry_align, &blk->stride))
		return overflow(blk);
	return 0;
}

void sseg_layout_destroy(struct sseg_layout *layout)
{
	if (!layout)
		return;
	for (int b = 0; b < layout->nblocks; b++) {
		free(layout->blocks[b].name);
		free(layout->blocks[b].shape);
	}
	free(layout->blocks);
	free(layout->runs);
	free(layout->description);
	free(layout);
}

int sseg_layout_create(const struct sseg_block_desc *blocks, int nblocks,
		       enum sseg_layout_order order, uint64_t align, struct sseg_layout **layout)
{
	struct sseg_layout *l;
	int rc;

	rc = check_args(blocks, nblocks, order, align, layout);
	if (rc)
		return rc;
	l = calloc(1, sizeof(*l));
	if (!l)
		return sseg_err(-ENOMEM, "no memory for a layout of %d blocks", nblocks);
	l->order = order;
	l->align = align ? align : LAYOUT_ALIGN_DEFAULT;
	l->blocks = calloc((size_t)nblocks, sizeof(*l->blocks));
	l->runs = calloc((size_t)nblocks, sizeof(*l->runs));
	if (!l->blocks || !l->runs) {
		rc = sseg_err(-ENOMEM, "no memory for a layout of %d blocks", nblocks);
		goto fail;
	}
	for (; l->nblocks < nblocks; l->nblocks++) {
		rc = copy_block(&l->blocks[l->nblocks], &blocks[l->nblocks], l->align);
		if (rc) {
			l->nblocks++; /* so that destroy frees what was copied */
			goto fail;
		}
	}
	rc = order == SSEG_LAYOUT_GROUPED ? place_grouped(l) : place_interleaved(l);
	if (!rc)
		rc = describe(l);
	if (rc)
		goto fail;
	*layout = l;
	return 0;
fail:
	sseg_layout_destroy(l);
	return rc;
}
