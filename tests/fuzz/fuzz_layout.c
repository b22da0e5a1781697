/* SPDX-License-Identifier: Apache-2.0 */
/* Layouts from fuzzed block descriptions (what Python and the CLI build
 * from a user's shapes): names, counts, sizes, alignments and shapes of any
 * value, 0 to 9 blocks, both orders. Invariants: no crash, overflow or
 * undefined behaviour, and no walk over entries (counts reach 2^64); a
 * refusal has a sentence; an accepted layout keeps every entry inside its
 * size, aligned, apart from every other block's, found again by the
 * reverse lookup, described identically by a copy. */
#include <string.h>

#include "fuzz.h"
#include "internal.h"
#include "layout.h"

#define MAX_BLOCKS 9

struct input {
	struct sseg_block_desc blocks[MAX_BLOCKS];
	char names[MAX_BLOCKS][80];
	char shapes[MAX_BLOCKS][280];
	int nblocks;
	enum sseg_layout_order order;
	uint64_t align;
};

static uint64_t fz_align(struct fz *in)
{
	uint8_t e = fz_u8(in);

	/* Mostly powers of two (0: the default), sometimes anything. */
	return e < 200 ? (e % 41 ? 1ull << (e % 41 - 1) : 0) : fz_number(in);
}

static void read_input(struct fz *in, struct input *x)
{
	uint8_t head = fz_u8(in);

	x->nblocks = head % 10;
	/* 2 stands for an order that does not exist. */
	x->order = (enum sseg_layout_order)((head >> 4) % 3 == 2 ? 7 : (head >> 4) % 3);
	x->align = fz_align(in);
	for (int b = 0; b < x->nblocks; b++) {
		struct sseg_block_desc *d = &x->blocks[b];

		d->name = fz_text(in, x->names[b], sizeof(x->names[b]));
		d->count = fz_number(in);
		d->bytes = fz_number(in);
		d->align = fz_align(in);
		d->shape = fz_u8(in) & 1 ? fz_text(in, x->shapes[b], sizeof(x->shapes[b])) : NULL;
	}
}

static uint64_t entry_align(const struct sseg_block_desc *d, uint64_t layout_align)
{
	uint64_t a = layout_align ? layout_align : 4096;

	return d->align > a ? d->align : a;
}

/* Entry index of block b: inside, aligned, found again by the lookup. */
static void check_entry(const struct sseg_layout *l, int b, const struct sseg_block_desc *d,
			uint64_t index, uint64_t align, uint64_t *off)
{
	int found_block = -1;
	uint64_t found_index = 0;

	FUZZ_CHECK(sseg_layout_offset(l, b, index, off) == 0);
	FUZZ_CHECK(*off <= sseg_layout_size(l) && d->bytes <= sseg_layout_size(l) - *off);
	FUZZ_CHECK(*off % entry_align(d, align) == 0);
	FUZZ_CHECK(sseg_layout_entry_at(l, *off, d->bytes, &found_block, &found_index) == 0);
	FUZZ_CHECK(found_block == b && found_index == index);
	FUZZ_CHECK(sseg_layout_cut_before(l, *off) == *off);
	FUZZ_CHECK(sseg_layout_cut_before(l, *off + d->bytes - 1) <= *off + d->bytes - 1);
}

static int apart(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a + alen <= b || b + blen <= a;
}

static void check_layout(const struct sseg_layout *l, const struct input *x)
{
	uint64_t first[MAX_BLOCKS], last[MAX_BLOCKS], off;
	struct sseg_block_desc d;
	const char *text = sseg_layout_describe(l);
	struct sseg_layout *copy = sseg_layout_copy(l);
	char diff[256];

	FUZZ_CHECK(sseg_layout_nblocks(l) == x->nblocks);
	for (int b = 0; b < x->nblocks; b++) {
		FUZZ_CHECK(sseg_layout_block(l, b, &d) == 0);
		FUZZ_CHECK(!strcmp(d.name, x->blocks[b].name) && d.count == x->blocks[b].count &&
			   d.bytes == x->blocks[b].bytes);
		FUZZ_CHECK(sseg_layout_find(l, d.name) == b);
		check_entry(l, b, &d, 0, x->align, &first[b]);
		check_entry(l, b, &d, d.count - 1, x->align, &last[b]);
		FUZZ_CHECK(sseg_layout_offset(l, b, d.count, &off) < 0);
		for (int c = 0; c < b; c++) {
			uint64_t cb = x->blocks[c].bytes, bb = d.bytes;

			FUZZ_CHECK(apart(first[b], bb, first[c], cb) && apart(last[b], bb, last[c], cb));
			FUZZ_CHECK(apart(first[b], bb, last[c], cb) && apart(last[b], bb, first[c], cb));
		}
	}
	FUZZ_CHECK(text && copy && !strcmp(text, sseg_layout_describe(copy)));
	FUZZ_CHECK(sseg_layout_hash(copy) == sseg_layout_hash(l));
	FUZZ_CHECK(sseg_layout_diff(text, strlen(text), "a", text, strlen(text), "b", diff,
				    sizeof(diff)) == -ENOENT);
	sseg_layout_destroy(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = { data, size };
	struct sseg_layout *l = NULL;
	struct input x;
	int rc;

	memset(&x, 0, sizeof(x));
	read_input(&in, &x);
	sseg_err_clear();
	rc = sseg_layout_create(x.blocks, x.nblocks, x.order, x.align, &l);
	if (rc) {
		FUZZ_CHECK(rc < 0 && !l && sseg_last_error()[0]);
		return 0;
	}
	check_layout(l, &x);
	sseg_layout_destroy(l);
	return 0;
}
