/* SPDX-License-Identifier: Apache-2.0 */
/* Layout placement, lookups, description and validation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "testutil.h"

#define KIB 1024ull

static struct sseg_layout *make(const struct sseg_block_desc *b, int n,
				enum sseg_layout_order order, uint64_t align)
{
	struct sseg_layout *l = NULL;

	CHECK_RC(sseg_layout_create(b, n, order, align, &l), 0);
	return l;
}

static uint64_t offset_of(const struct sseg_layout *l, int block, uint64_t index)
{
	uint64_t off = 0;

	CHECK_RC(sseg_layout_offset(l, block, index, &off), 0);
	return off;
}

static void check_entry_at(const struct sseg_layout *l, uint64_t off, uint64_t len,
			   int block, uint64_t index)
{
	int b = -1;
	uint64_t i = 0;

	CHECK_RC(sseg_layout_entry_at(l, off, len, &b, &i), 0);
	CHECK(b == block && i == index);
}

static void check_no_entry(const struct sseg_layout *l, uint64_t off, uint64_t len)
{
	int b;
	uint64_t i;

	CHECK_RC(sseg_layout_entry_at(l, off, len, &b, &i), -ENOENT);
}

/* k: 3 entries of 5000 bytes (stride 8 KiB), v: 2 of 100 (stride 4 KiB). */
static const struct sseg_block_desc kv[] = {
	{ .name = "k", .count = 3, .bytes = 5000, .shape = "uint8[5000]" },
	{ .name = "v", .count = 2, .bytes = 100 },
};

static void test_interleaved_different_counts(void)
{
	struct sseg_layout *l = make(kv, 2, SSEG_LAYOUT_INTERLEAVED, 0);
	static const uint64_t k[] = { 0, 12 * KIB, 24 * KIB }, v[] = { 8 * KIB, 20 * KIB };

	for (int i = 0; i < 3; i++)
		CHECK(offset_of(l, 0, (uint64_t)i) == k[i]);
	for (int i = 0; i < 2; i++)
		CHECK(offset_of(l, 1, (uint64_t)i) == v[i]);
	CHECK(sseg_layout_size(l) == 3 * 8 * KIB + 2 * 4 * KIB); /* no space wasted */
	check_entry_at(l, 24 * KIB, 5000, 0, 2);
	check_entry_at(l, 20 * KIB, 100, 1, 1);
	check_no_entry(l, 24 * KIB, 8 * KIB); /* the stride is not the entry */
	check_no_entry(l, 24 * KIB + 1, 5000);
	check_no_entry(l, 4 * KIB, 100);      /* inside k's padding */
	check_no_entry(l, 32 * KIB, 100);     /* past the end */
	sseg_layout_destroy(l);
}

static void test_grouped(void)
{
	struct sseg_layout *l = make(kv, 2, SSEG_LAYOUT_GROUPED, 0);

	CHECK(offset_of(l, 0, 0) == 0 && offset_of(l, 0, 2) == 16 * KIB);
	CHECK(offset_of(l, 1, 0) == 24 * KIB && offset_of(l, 1, 1) == 28 * KIB);
	CHECK(sseg_layout_size(l) == 32 * KIB);
	check_entry_at(l, 16 * KIB, 5000, 0, 2);
	check_entry_at(l, 28 * KIB, 100, 1, 1);
	check_no_entry(l, 28 * KIB, 101);
	check_no_entry(l, 32 * KIB, 100);
	check_no_entry(l, 2 * KIB, 100);
	sseg_layout_destroy(l);
}

/* Three counts, three runs: rows {a,b,c}, {b,c}, {b}. */
static void test_three_runs(void)
{
	static const struct sseg_block_desc b[] = {
		{ .name = "a", .count = 1, .bytes = 64 },
		{ .name = "b", .count = 3, .bytes = 100 },
		{ .name = "c", .count = 2, .bytes = 1 },
	};
	struct sseg_layout *l = make(b, 3, SSEG_LAYOUT_INTERLEAVED, 64);

	CHECK(offset_of(l, 0, 0) == 0 && offset_of(l, 1, 0) == 64 && offset_of(l, 2, 0) == 192);
	CHECK(offset_of(l, 1, 1) == 256 && offset_of(l, 2, 1) == 384);
	CHECK(offset_of(l, 1, 2) == 448);
	CHECK(sseg_layout_size(l) == 64 + 3 * 128 + 2 * 64);
	check_entry_at(l, 384, 1, 2, 1);
	check_entry_at(l, 448, 100, 1, 2);
	check_no_entry(l, 512, 100);
	sseg_layout_destroy(l);
}

/* A block asking for more than the layout's alignment. */
static void test_block_alignment(void)
{
	static const struct sseg_block_desc b[] = {
		{ .name = "a", .count = 2, .bytes = 100 },
		{ .name = "b", .count = 2, .bytes = 100, .align = 8 * KIB },
	};
	struct sseg_layout *l = make(b, 2, SSEG_LAYOUT_INTERLEAVED, 0);

	CHECK(offset_of(l, 0, 0) == 0 && offset_of(l, 1, 0) == 8 * KIB);
	CHECK(offset_of(l, 0, 1) == 16 * KIB && offset_of(l, 1, 1) == 24 * KIB);
	CHECK(sseg_layout_size(l) == 32 * KIB);
	sseg_layout_destroy(l);
	l = make(b, 2, SSEG_LAYOUT_GROUPED, 0);
	CHECK(offset_of(l, 0, 1) == 4 * KIB && offset_of(l, 1, 0) == 8 * KIB);
	CHECK(offset_of(l, 1, 1) == 16 * KIB && sseg_layout_size(l) == 24 * KIB);
	sseg_layout_destroy(l);
}

/* Every entry of a layout, in placement order, must be aligned, disjoint,
 * found again by entry_at, and the size must be the sum of the strides. */
static void check_invariants(const struct sseg_layout *l, const struct sseg_block_desc *b,
			     int n, enum sseg_layout_order order, uint64_t align)
{
	uint64_t max_count = 0, end = 0, strides = 0;

	for (int k = 0; k < n; k++)
		max_count = b[k].count > max_count ? b[k].count : max_count;
	for (uint64_t outer = 0; outer < (order == SSEG_LAYOUT_GROUPED ? (uint64_t)n : max_count);
	     outer++) {
		for (uint64_t inner = 0; inner < (order == SSEG_LAYOUT_GROUPED ? b[outer].count
									: (uint64_t)n);
		     inner++) {
			int k = (int)(order == SSEG_LAYOUT_GROUPED ? outer : inner);
			uint64_t i = order == SSEG_LAYOUT_GROUPED ? inner : outer;
			uint64_t a = b[k].align > align ? b[k].align : align;
			uint64_t off;

			if (i >= b[k].count)
				continue;
			off = offset_of(l, k, i);
			CHECK(off % a == 0 && off >= end);
			end = off + (b[k].bytes + a - 1) / a * a;
			strides += (b[k].bytes + a - 1) / a * a;
			check_entry_at(l, off, b[k].bytes, k, i);
		}
	}
	CHECK(sseg_layout_size(l) == end && end == strides);
}

static void test_generated_layouts(void)
{
	struct sseg_block_desc b[6];
	char names[6][8];
	unsigned seed = 7;

	for (int round = 0; round < 200; round++) {
		int n = 1 + round % 6;

		for (int k = 0; k < n; k++) {
			seed = seed * 1103515245u + 12345u;
			snprintf(names[k], sizeof(names[k]), "b%d", k);
			b[k] = (struct sseg_block_desc){ .name = names[k],
							 .count = 1 + (seed >> 8) % 9,
							 .bytes = 1 + (seed >> 12) % 300 };
		}
		for (int order = 0; order < 2; order++) {
			struct sseg_layout *l = make(b, n, (enum sseg_layout_order)order, 64);

			check_invariants(l, b, n, (enum sseg_layout_order)order, 64);
			sseg_layout_destroy(l);
		}
	}
}

static void test_queries(void)
{
	struct sseg_layout *l = make(kv, 2, SSEG_LAYOUT_INTERLEAVED, 0);
	struct sseg_layout *copy;
	struct sseg_block_desc d;
	uint64_t off;

	CHECK(sseg_layout_nblocks(l) == 2);
	CHECK(sseg_layout_find(l, "v") == 1);
	CHECK_RC(sseg_layout_find(l, "q"), -ENOENT);
	CHECK_ERR_HAS("'q'");
	CHECK_RC(sseg_layout_block(l, 0, &d), 0);
	CHECK(d.name != kv[0].name && !strcmp(d.name, "k") && d.count == 3 && d.bytes == 5000);
	CHECK(!strcmp(d.shape, "uint8[5000]") && d.align == 0);
	CHECK_RC(sseg_layout_block(l, 2, &d), -EINVAL);
	CHECK_RC(sseg_layout_offset(l, -1, 0, &off), -EINVAL);
	CHECK_RC(sseg_layout_offset(l, 2, 0, &off), -EINVAL);
	CHECK_RC(sseg_layout_offset(l, 1, 2, &off), -ERANGE);
	CHECK_ERR_HAS("'v' has 2 entries");
	copy = sseg_layout_copy(l);
	CHECK(copy && copy != l);
	CHECK(!strcmp(sseg_layout_describe(copy), sseg_layout_describe(l)));
	CHECK(sseg_layout_hash(copy) == sseg_layout_hash(l));
	sseg_layout_destroy(l);
	CHECK(offset_of(copy, 0, 2) == 24 * KIB); /* owns its names and shapes */
	CHECK(sseg_layout_find(copy, "k") == 0);
	sseg_layout_destroy(copy);
	sseg_layout_destroy(NULL);
}

static void test_description(void)
{
	struct sseg_layout *l = make(kv, 2, SSEG_LAYOUT_INTERLEAVED, 0);

	CHECK(!strcmp(sseg_layout_describe(l),
		      "v1;order=interleaved;align=4096;size=32768"
		      ";k:count=3,bytes=5000,align=4096,offset=0,shape=uint8[5000]"
		      ";v:count=2,bytes=100,align=4096,offset=8192,shape="));
	sseg_layout_destroy(l);
}

/* Each variant changes one field of kv; each must change description and hash. */
static void test_hash_sensitivity(void)
{
	struct sseg_block_desc b[2];
	struct sseg_layout *base = make(kv, 2, SSEG_LAYOUT_INTERLEAVED, 0);
	struct sseg_layout *same = make(kv, 2, SSEG_LAYOUT_INTERLEAVED, 4096);
	struct sseg_layout *l;
	const char *what[] = { "name", "count", "bytes", "align", "shape", "shape-empty" };

	CHECK(!strcmp(sseg_layout_describe(base), sseg_layout_describe(same)));
	CHECK(sseg_layout_hash(base) == sseg_layout_hash(same));
	for (int v = 0; v < 8; v++) {
		enum sseg_layout_order order = SSEG_LAYOUT_INTERLEAVED;
		uint64_t align = 0;

		memcpy(b, kv, sizeof(b));
		switch (v) {
		case 0: b[1].name = "w"; break;
		case 1: b[1].count = 3; break;
		case 2: b[1].bytes = 101; break;
		case 3: b[1].align = 8192; break;
		case 4: b[0].shape = "uint8[4999]"; break;
		case 5: b[0].shape = NULL; break;
		case 6: order = SSEG_LAYOUT_GROUPED; break;
		case 7: align = 8192; break;
		}
		l = make(b, 2, order, align);
		if (!strcmp(sseg_layout_describe(l), sseg_layout_describe(base)) ||
		    sseg_layout_hash(l) == sseg_layout_hash(base)) {
			fprintf(stderr, "variant %d (%s) did not change the description\n", v,
				v < 6 ? what[v] : v == 6 ? "order" : "layout align");
			exit(1);
		}
		sseg_layout_destroy(l);
	}
	sseg_layout_destroy(base);
	sseg_layout_destroy(same);
}

static void expect_invalid(const struct sseg_block_desc *b, int n, enum sseg_layout_order order,
			   uint64_t align, int err, const char *needle)
{
	struct sseg_layout *l = (struct sseg_layout *)&l;

	CHECK_RC(sseg_layout_create(b, n, order, align, &l), err);
	CHECK_ERR_HAS(needle);
}

static void test_validation(void)
{
	struct sseg_block_desc b[2] = { kv[0], kv[1] };
	static struct sseg_block_desc many[257];
	char long_name[65];
	struct sseg_layout *l;

	expect_invalid(kv, 0, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "1 to 256 blocks, not 0");
	expect_invalid(many, 257, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "not 257");
	expect_invalid(NULL, 1, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "blocks is NULL");
	expect_invalid(kv, 2, (enum sseg_layout_order)5, 0, -EINVAL, "order 5");
	expect_invalid(kv, 2, SSEG_LAYOUT_GROUPED, 3000, -EINVAL, "alignment 3000");
	expect_invalid(kv, 2, SSEG_LAYOUT_GROUPED, 2ull << 30, -EINVAL, "up to 1 GiB");
	CHECK_RC(sseg_layout_create(kv, 2, SSEG_LAYOUT_GROUPED, 0, NULL), -EINVAL);
	CHECK_RC(sseg_layout_create(kv, 2, SSEG_LAYOUT_GROUPED, 1ull << 30, &l), 0);
	sseg_layout_destroy(l);

	b[1].name = NULL;
	expect_invalid(b, 2, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "block 1 has no name");
	b[1].name = "";
	expect_invalid(b, 2, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "block 1 has no name");
	memset(long_name, 'x', 64);
	long_name[64] = '\0';
	b[1].name = long_name;
	expect_invalid(b, 2, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "64 bytes, at most 63");
	long_name[63] = '\0';
	CHECK_RC(sseg_layout_create(b, 2, SSEG_LAYOUT_INTERLEAVED, 0, &l), 0);
	sseg_layout_destroy(l);
	for (const char *bad = ";:,="; *bad; bad++) {
		char name[8] = { 'v', *bad, '1', 0 };

		b[1].name = name;
		expect_invalid(b, 2, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "contains one of");
	}
	b[1].name = "k";
	expect_invalid(b, 2, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "0 and 1 are both named 'k'");
	b[1] = kv[1];
	b[1].count = 0;
	expect_invalid(b, 2, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "'v': count must be at least 1");
	b[1] = kv[1];
	b[1].bytes = 0;
	expect_invalid(b, 2, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "'v': bytes must be at least 1");
	b[1] = kv[1];
	b[1].align = 48;
	expect_invalid(b, 2, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "block 'v': alignment 48");
	b[1].align = 1ull << 31;
	expect_invalid(b, 2, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "block 'v': alignment");
	b[1] = kv[1];
	b[1].shape = "a;b";
	expect_invalid(b, 2, SSEG_LAYOUT_INTERLEAVED, 0, -EINVAL, "contains ';'");
}

static void test_overflow(void)
{
	struct sseg_block_desc b[2] = { kv[0], { .name = "huge", .count = 1ull << 32,
						 .bytes = (1ull << 31) + 1 } };
	struct sseg_layout *l;

	for (int order = 0; order < 2; order++) {
		expect_invalid(b, 2, (enum sseg_layout_order)order, 0, -EOVERFLOW, "block 'huge'");
		b[1].count = 1ull << 33;
		b[1].bytes = 1ull << 30;
		b[0] = b[1];
		b[0].name = "first";
		expect_invalid(b, 2, (enum sseg_layout_order)order, 0, -EOVERFLOW, "2^63");
		/* exactly 2^63 bytes is still a layout */
		CHECK_RC(sseg_layout_create(&b[1], 1, (enum sseg_layout_order)order, 0, &l), 0);
		CHECK(sseg_layout_size(l) == 1ull << 63);
		CHECK(offset_of(l, 0, (1ull << 33) - 1) == (1ull << 63) - (1ull << 30));
		sseg_layout_destroy(l);
		b[1].bytes = UINT64_MAX;
		b[1].count = 1;
		expect_invalid(&b[1], 1, (enum sseg_layout_order)order, 0, -EOVERFLOW, "'huge'");
		b[0] = kv[0];
		b[1] = (struct sseg_block_desc){ .name = "huge", .count = 1ull << 32,
						 .bytes = (1ull << 31) + 1 };
	}
}

/* How two descriptions differ: the first differing block and field, with
 * both values; the size (which follows from the blocks) only when they
 * agree; a block only one side has; a difference past what was carried. */
static void expect_diff(const struct sseg_block_desc *a, int na, const struct sseg_block_desc *b,
			int nb, uint64_t align_b, const char *want)
{
	struct sseg_layout *la = make(a, na, SSEG_LAYOUT_INTERLEAVED, 0);
	struct sseg_layout *lb = make(b, nb, SSEG_LAYOUT_INTERLEAVED, align_b);
	const char *da = sseg_layout_describe(la), *db = sseg_layout_describe(lb);
	char out[512];

	CHECK_RC(sseg_layout_diff(da, strlen(da), "rank 2", db, strlen(db), "rank 0", out,
				  sizeof(out)), 0);
	if (!strstr(out, want)) {
		fprintf(stderr, "diff said \"%s\", expected \"%s\"\n", out, want);
		exit(1);
	}
	sseg_layout_destroy(la);
	sseg_layout_destroy(lb);
}

static void test_diff(void)
{
	const struct sseg_block_desc blocks[] = {
		{ .name = "k", .count = 61, .bytes = 8192, .shape = "bfloat16[64,64]" },
		{ .name = "v", .count = 61, .bytes = 4096, .shape = "bfloat16[32,64]" },
	};
	struct sseg_block_desc other[2];
	const char *d;
	char out[256];

	memcpy(other, blocks, sizeof(blocks));
	other[1].shape = "bfloat16[64,32]"; /* the same bytes, transposed */
	expect_diff(blocks, 2, other, 2, 0,
		    "block 'v': rank 2 declared shape=bfloat16[32,64], rank 0 declared "
		    "shape=bfloat16[64,32]");
	memcpy(other, blocks, sizeof(blocks));
	other[0].count = 60;
	expect_diff(blocks, 2, other, 2, 0, "block 'k': rank 2 declared count=61, rank 0 declared count=60");
	memcpy(other, blocks, sizeof(blocks));
	other[1].name = "w";
	expect_diff(blocks, 2, other, 2, 0, "block 1: rank 2 declared 'v', rank 0 declared 'w'");
	expect_diff(blocks, 2, blocks, 1, 0, "rank 2 declared a block 'v' that rank 0 did not");
	expect_diff(blocks, 2, blocks, 2, 8192, "rank 2 declared align=4096, rank 0 declared align=8192");
	/* Carried parts that agree: nothing to name. */
	{
		struct sseg_layout *l = make(blocks, 2, SSEG_LAYOUT_INTERLEAVED, 0);

		d = sseg_layout_describe(l);
		CHECK_RC(sseg_layout_diff(d, 40, "a", d, 40, "b", out, sizeof(out)), -ENOENT);
		sseg_layout_destroy(l);
	}
}

int main(void)
{
	test_interleaved_different_counts();
	test_grouped();
	test_three_runs();
	test_block_alignment();
	test_generated_layouts();
	test_queries();
	test_description();
	test_hash_sensitivity();
	test_validation();
	test_overflow();
	test_diff();
	return 0;
}
