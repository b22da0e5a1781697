/* SPDX-License-Identifier: Apache-2.0 */
/* One rank of `sharedseg demo`: join the group, open the segment, check that
 * every rank sees the owner's bytes and the owner sees every rank's mark,
 * measure, and report to the parent. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo_shared.h"

#define OWNER 0

/* The word at 8-byte index i that the owner writes. */
static inline uint64_t pattern_word(uint64_t i)
{
	return (i + 1) * 0x9e3779b97f4a7c15ull ^ 0x5348415245445347ull;
}

static inline unsigned char pattern_byte(uint64_t off)
{
	return (unsigned char)(off * 131u + 7u);
}

static uint64_t mark_of(int rank)
{
	return 0x4d41524b00000000ull | ((uint64_t)(rank + 1) * 0x10001ull);
}

static uint64_t slice_offset(const struct demo_config *c, int rank)
{
	return (uint64_t)rank * ((c->size / (uint64_t)c->ranks) & ~7ull);
}

static void fail(struct rank_report *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void fail(struct rank_report *r, const char *fmt, ...)
{
	va_list ap;

	if (r->failed)
		return; /* the first failure explains the rest */
	r->failed = true;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
}

static void fill_pattern(unsigned char *base, uint64_t size)
{
	uint64_t *w = (uint64_t *)base, n = size / 8;

	for (uint64_t i = 0; i < n; i++)
		w[i] = pattern_word(i);
	for (uint64_t off = n * 8; off < size; off++)
		base[off] = pattern_byte(off);
}

/* Offset of the first byte that differs from the pattern, or size. */
static uint64_t check_pattern(const unsigned char *base, uint64_t size)
{
	const uint64_t *w = (const uint64_t *)base;
	uint64_t n = size / 8;

	for (uint64_t i = 0; i < n; i++)
		if (w[i] != pattern_word(i))
			return i * 8;
	for (uint64_t off = n * 8; off < size; off++)
		if (base[off] != pattern_byte(off))
			return off;
	return size;
}

/* A barrier that also tells every rank whether every rank is still fine:
 * 1 all fine, 0 someone is not, negative on an exchange failure. */
static int barrier(struct sseg_local_group *g, int ranks, bool fine)
{
	unsigned char mine = fine, *all;
	int rc, all_fine = 1;

	if (ranks < 1)
		return -1;
	all = malloc((size_t)ranks);
	if (!all)
		return -1;
	rc = sseg_local_allgather(&mine, all, 1, g);
	for (int i = 0; !rc && i < ranks; i++)
		all_fine &= all[i];
	free(all);
	return rc ? rc : all_fine;
}

static void write_marks(const struct demo_config *c, int rank, unsigned char *base)
{
	if (rank != OWNER && !c->readonly_peers) {
		uint64_t mark = mark_of(rank);

		memcpy(base + slice_offset(c, rank), &mark, 8);
	} else if (rank == OWNER) {
		for (int r = 0; r < c->ranks; r++) {
			uint64_t mark = mark_of(r);

			if (r == OWNER || c->readonly_peers)
				memcpy(base + slice_offset(c, r), &mark, 8);
		}
	}
}

static void check_marks(const struct demo_config *c, const unsigned char *base,
			struct rank_report *r)
{
	for (int peer = 0; peer < c->ranks; peer++) {
		uint64_t got;

		memcpy(&got, base + slice_offset(c, peer), 8);
		if (got != mark_of(peer)) {
			fail(r, "the owner read 0x%016llx at offset %llu, rank %d's mark is 0x%016llx",
			     (unsigned long long)got, (unsigned long long)slice_offset(c, peer), peer,
			     (unsigned long long)mark_of(peer));
			return;
		}
	}
	r->verified = true;
}

static void record_info(sseg_t *seg, struct rank_report *r)
{
	struct sseg_info info = { .sz = sizeof(info) };

	if (sseg_info(seg, &info)) {
		fail(r, "sseg_info: %s", sseg_last_error());
		return;
	}
	r->backend = info.backend;
	r->pages = info.pages;
	r->page_size = info.page_size;
	r->pages_verified = info.pages_verified;
	r->huge_bytes = info.huge_bytes;
	r->numa_nodes = info.numa_nodes;
	r->create_s = info.create_s;
	r->complete_s = info.complete_s;
	r->populate_s = info.populate_s;
	snprintf(r->pages_reason, sizeof(r->pages_reason), "%s", info.pages_reason);
}

/* Every rank measures its mapping while every rank still maps it: its
 * resident bytes and its share of them, Pss (a page mapped by N ranks
 * counts 1/N in each). Pss leaves HugeTLB pages out: its own ones count
 * whole, those another process maps too (every rank maps every page here)
 * 1/N. */
static void measure(const struct demo_config *c, sseg_t *seg, struct rank_report *r)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct vma_use use;

	if (sseg_info(seg, &info) || vma_use_read(info.base, info.mapped_size, &use))
		return;
	r->measured = true;
	r->rss = use.rss + use.hugetlb_shared + use.hugetlb_private;
	r->pss = use.pss + use.hugetlb_private + use.hugetlb_shared / (uint64_t)c->ranks;
	record_info(seg, r);
}

/* The steps between open and destroy; every rank takes every barrier until
 * an exchange itself fails. */
static void exercise(const struct demo_config *c, sseg_t *seg, struct sseg_local_group *g,
		     int rank, struct rank_report *r)
{
	unsigned char *base = sseg_base(seg);
	int fine;

	if (rank == OWNER)
		fill_pattern(base, c->size);
	fine = barrier(g, c->ranks, true);
	if (rank != OWNER && fine > 0) {
		uint64_t bad = check_pattern(base, c->size);

		r->verified = bad == c->size;
		if (!r->verified)
			fail(r, "rank %d found a byte at offset %llu that differs from the owner's "
			     "pattern", rank, (unsigned long long)bad);
	}
	if (fine >= 0)
		fine = barrier(g, c->ranks, !r->failed);
	if (fine > 0)
		write_marks(c, rank, base);
	if (fine >= 0)
		fine = barrier(g, c->ranks, !r->failed);
	if (rank == OWNER && fine > 0)
		check_marks(c, base, r);
	if (fine >= 0)
		measure(c, seg, r);
	if (fine >= 0)
		fine = barrier(g, c->ranks, !r->failed);
	if (fine < 0)
		fail(r, "a barrier (sseg_local_allgather) failed: %s", sseg_last_error());
	else if (!fine && !r->failed)
		fail(r, "another rank failed; see its message");
}

/* Usable since open returned; the demo fills every page, so it lets the
 * background work finish first and reports how long that took. */
static void wait_resident(const struct demo_config *c, sseg_t *seg, struct rank_report *r)
{
	double t0 = cli_now();

	if (sseg_populate_wait(seg, c->wait_ms))
		fail(r, "waiting for the pages: %s", sseg_last_error());
	r->resident_s = cli_now() - t0;
}

static void open_and_exercise(const struct demo_config *c, int rank,
			      struct sseg_local_group *g, struct rank_report *r)
{
	SSEG_OPTS(o, .name = c->name, .size = c->size, .world_size = c->ranks, .rank = rank,
		  .owner_rank = OWNER, .backend = c->backend, .pages = c->pages, .numa = c->numa,
		  .numa_node = c->numa_node, .populate = c->populate,
		  .populate_threads = c->threads, .timeout_ms = c->wait_ms,
		  .flags = (c->readonly_peers ? SSEG_F_READONLY_PEERS : 0) |
			   (c->host_register ? SSEG_F_HOST_REGISTER : 0),
		  .device = rank % (c->gpus > 0 ? c->gpus : 1));
	sseg_t *seg = NULL;
	int rc;

	if (sseg_open(&o, sseg_local_allgather, g, &seg)) {
		fail(r, "%s", sseg_last_error());
		return;
	}
	r->opened = true;
	record_info(seg, r);
	if (c->populate == SSEG_POPULATE_BACKGROUND)
		wait_resident(c, seg, r);
	if (!r->failed)
		exercise(c, seg, g, rank, r);
	rc = sseg_destroy(seg);
	if (rc)
		fail(r, "sseg_destroy: %s", sseg_last_error());
}

int demo_rank_main(const struct demo_config *c, int rank, int report_fd)
{
	struct rank_report r;
	struct sseg_local_group *g = NULL;
	ssize_t n;

	memset(&r, 0, sizeof(r));
	r.rank = rank;
	if (sseg_local_group_open(c->name, rank, c->ranks, c->wait_ms, &g))
		fail(&r, "joining the group: %s", sseg_last_error());
	else
		open_and_exercise(c, rank, g, &r);
	if (g)
		sseg_local_group_close(g);
	n = write(report_fd, &r, sizeof(r));
	return n == (ssize_t)sizeof(r) && !r.failed && r.verified ? 0 : 1;
}
