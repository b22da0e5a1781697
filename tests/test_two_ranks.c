/* SPDX-License-Identifier: Apache-2.0 */
/* Two ranks in one process: one physical copy at two addresses, the
 * registry's exact-range lookup, and pins. */
#include <string.h>

#include "testutil.h"

#define SZ (8u << 20)

static void share(void)
{
	struct sseg_block_desc blocks[] = {
		{ .name = "k", .count = 3, .bytes = 100000 },
		{ .name = "v", .count = 2, .bytes = 5000 },
	};
	struct sseg_layout *layout;
	struct tu_rank r[2];
	struct sseg_lookup_result res;
	struct sseg_info info = { .sz = sizeof(info) };
	unsigned char *a, *b;
	uint64_t off;

	CHECK_RC(sseg_layout_create(blocks, 2, SSEG_LAYOUT_INTERLEAVED, 0, &layout), 0);
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 2; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "two",
						.size = SZ, .world_size = 2, .rank = i,
						.pages = SSEG_PAGES_BASE, .layout = layout };
	CHECK(tu_run_inproc(r, 2) == 0);
	a = sseg_base(r[0].seg);
	b = sseg_base(r[1].seg);
	CHECK(a && b && a != b);
	CHECK(sseg_size(r[1].seg) == SZ);
	for (uint64_t i = 0; i < SZ; i += 4096)
		a[i] = tu_pattern(0, i);
	for (uint64_t i = 0; i < SZ; i += 4096)
		CHECK(b[i] == tu_pattern(0, i));
	b[SZ - 1] = 0x5a;
	CHECK(a[SZ - 1] == 0x5a);

	CHECK_RC(sseg_info(r[1].seg, &info), 0);
	CHECK(!info.is_owner && info.owner_rank == 0 && info.rank == 1);
	CHECK(info.pages == SSEG_PAGES_BASE && info.page_size == 4096);
	CHECK(info.mapped_size == SZ && info.base == b);

	/* Exact ranges only: the whole segment, or exactly one entry. */
	CHECK_RC(sseg_lookup(a, SZ, &res), 0);
	CHECK(res.seg == r[0].seg && res.block == -1);
	CHECK_RC(sseg_layout_offset(layout, 1, 1, &off), 0);
	CHECK_RC(sseg_lookup(b + off, 5000, &res), 0);
	CHECK(res.seg == r[1].seg && res.block == 1 && res.index == 1);
	CHECK_RC(sseg_lookup(b + off, 4999, &res), -ENOENT);
	CHECK_RC(sseg_lookup(b + off + 1, 5000, &res), -ENOENT);
	CHECK_RC(sseg_lookup(a, SZ - 1, &res), -ENOENT);

	/* A pin holds destroy off; unpin lets it through. */
	CHECK_RC(sseg_pin(r[1].seg), 0);
	CHECK_RC(sseg_destroy(r[1].seg), -EBUSY);
	CHECK_ERR_HAS("pinned");
	CHECK(b[SZ - 1] == 0x5a);
	CHECK_RC(sseg_unpin(r[1].seg), 0);
	CHECK_RC(sseg_unpin(r[1].seg), -EINVAL);
	tu_destroy_all(r, 2);
	CHECK_RC(sseg_lookup(a, SZ, &res), -ENOENT);
	sseg_layout_destroy(layout);
}

static void single_rank(void)
{
	SSEG_OPTS(o, .name = "solo", .size = 12345, .world_size = 1, .pages = SSEG_PAGES_BASE);
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;
	int fds = tu_count_fds();

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK(sseg_base(seg) == NULL); /* not before complete */
	CHECK_RC(sseg_complete(seg, blob), 0);
	CHECK_RC(sseg_complete(seg, blob), -EALREADY);
	memset(sseg_base(seg), 1, 12345);
	/* After complete no fd stays open, only the mapping. */
	CHECK(tu_count_fds() == fds);
	CHECK_RC(sseg_destroy(seg), 0);
}

/* Placement: bound to node 0, or interleaved over the nodes with memory;
 * each rank's pages (spread: faulted by both) land where asked. */
static void placement(enum sseg_numa numa)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct tu_rank r[2];

	memset(r, 0, sizeof(r));
	for (int i = 0; i < 2; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "numa",
						.size = SZ, .world_size = 2, .rank = i,
						.pages = SSEG_PAGES_BASE, .numa = numa, .numa_node = 0,
						.populate = SSEG_POPULATE_SPREAD };
	CHECK(tu_run_inproc(r, 2) == 0);
	for (int i = 0; i < 2; i++) {
		CHECK_RC(sseg_info(r[i].seg, &info), 0);
		CHECK(info.numa == numa && (info.numa_nodes & 1));
	}
	tu_destroy_all(r, 2);
}

int main(void)
{
	share();
	placement(SSEG_NUMA_NODE);
	placement(SSEG_NUMA_INTERLEAVE);
	single_rank();
	printf("two_ranks: ok\n");
	return 0;
}
