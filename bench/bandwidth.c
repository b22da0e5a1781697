/* SPDX-License-Identifier: Apache-2.0 */
/* The bandwidth phase: sequential read, sequential copy into a private
 * buffer, and the KV-block gather, on a rank's mapping of the segment and
 * on a private buffer of the same page kind in the same process,
 * alternated so that drift hits both alike. */
#include <stdio.h>
#include <string.h>

#include "hostmem.h"
#include "kernels.h"
#include "report.h"

#define GATHER_MAX_BYTES (512ull << 20)

/* Blocks a repetition gathers: half the segment's bytes, at most 512 MiB. */
static uint64_t gather_count(const struct bench_case *bc, uint64_t block)
{
	uint64_t bytes = bc->size / 2 < GATHER_MAX_BYTES ? bc->size / 2 : GATHER_MAX_BYTES;

	return bytes / block;
}

struct buffers {
	const void *src[2];   /* BW_SEGMENT, BW_PRIVATE */
	struct mapping priv;  /* the private buffer of the same kind */
	struct mapping dst;   /* where sequential copies land */
	struct mapping ring;  /* where gathered blocks land */
};

static void gather_each(const struct bench_case *bc, const struct buffers *b, int s,
			struct bw_samples *bw, int rep)
{
	for (int k = 0; k < GATHER_BLOCKS && bc->blocks[k]; k++) {
		struct gather g = { .block = bc->blocks[k], .count = gather_count(bc, bc->blocks[k]),
				    .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(rep * GATHER_BLOCKS + k + 1),
				    .ring_len = b->ring.len };

		bw->gather[s][k][rep] = time_gather(b->ring.base, b->src[s], bc->size, &g);
	}
}

static void round_of(const struct bench_case *bc, const struct buffers *b,
		     struct bw_samples *bw, int rep)
{
	for (int i = 0; i < 2; i++) {
		int s = rep % 2 ? 1 - i : i; /* alternate which goes first */

		if (bw->sequential) {
			bw->read[s][rep] = time_read(b->src[s], bc->size);
			bw->copy[s][rep] = time_copy(b->dst.base, b->src[s], bc->size);
		}
		gather_each(bc, b, s, bw, rep);
	}
}

static int populated(enum sseg_pages kind, uint64_t size, struct mapping *m)
{
	int rc = map_private(kind, size, m);

	if (!rc)
		touch_write(m->base, m->len);
	return rc;
}

static int allocate(const struct bench_case *bc, bool sequential, struct buffers *b)
{
	int rc = populated(bc->pages, bc->size, &b->priv);

	if (!rc && sequential)
		rc = populated(bc->pages, bc->size, &b->dst);
	if (!rc)
		rc = populated(bc->pages, BW_RING_BYTES, &b->ring);
	b->src[BW_PRIVATE] = b->priv.base;
	return rc;
}

uint64_t bw_largest_block(const struct bench_case *bc)
{
	return bc->size / 2 < BW_RING_BYTES ? bc->size / 2 : BW_RING_BYTES;
}

void bw_need(const struct bench_case *bc, struct room_need *n)
{
	room_hold(n, bc->pages, bc->size); /* the private buffer */
	room_hold(n, bc->pages, bc->size); /* the sequential copies' destination */
	room_hold(n, bc->pages, BW_RING_BYTES);
}

int bw_measure(const struct bench_case *bc, const void *shared, bool sequential,
	       struct bw_samples *bw, char *error, int error_len)
{
	struct buffers b;
	double huge;
	int rc;

	memset(&b, 0, sizeof(b));
	b.src[BW_SEGMENT] = shared;
	bw->sequential = sequential;
	rc = allocate(bc, sequential, &b);
	if (rc) {
		snprintf(error, (size_t)error_len, "a private %s buffer for the bandwidth phase: %s",
			 sseg_pages_name(bc->pages), strerror(-rc));
		goto out;
	}
	snprintf(bw->private_pages, sizeof(bw->private_pages), "%s",
		 pages_obtained(b.priv.base, b.priv.len, &huge));
	round_of(bc, &b, bw, 0); /* untimed: faults and caches settle */
	for (int rep = 0; rep < bc->reps; rep++)
		round_of(bc, &b, bw, rep);
	bw->reps = bc->reps;
out:
	unmap(&b.ring);
	unmap(&b.dst);
	unmap(&b.priv);
	return rc;
}

struct bw_row {
	const char *bench;
	const char *role;   /* "peer", "owner" */
	int source;         /* BW_SEGMENT, BW_PRIVATE */
	uint64_t block;     /* kv_gather only */
};

static void print_row(const struct bench_case *bc, const char *pages, const struct bw_samples *bw,
		      const struct bw_row *br, const double *seconds, double bytes)
{
	bool priv = br->source == BW_PRIVATE;
	struct row r = { br->bench, priv ? mech_private.label : bc->mech->label, bc->ranks,
			 bc->size, sseg_pages_name(bc->pages), priv ? bw->private_pages : pages,
			 "GB/s" };
	double rates[ROW_MAX_REPS];

	for (int i = 0; i < bw->reps; i++)
		rates[i] = seconds[i] > 0 ? bytes / seconds[i] / 1e9 : 0;
	row_begin(&r, rates, bw->reps);
	row_str("role", priv ? "private" : br->role);
	row_str("pair", br->role);
	row_str("paired_with", bc->mech->label);
	if (bc->mech == &mech_sharedseg)
		row_str("populate", sseg_populate_name(bc->populate));
	if (br->block)
		row_u64("block", br->block);
	row_end();
}

void bw_print(const struct bench_case *bc, const char *pages, const char *role,
	      const struct bw_samples *bw)
{
	if (bw->reps <= 0)
		return;
	for (int s = BW_SEGMENT; bw->sequential && s <= BW_PRIVATE; s++) {
		struct bw_row read = { "seq_read", role, s, 0 }, copy = { "seq_copy", role, s, 0 };

		print_row(bc, pages, bw, &read, bw->read[s], (double)bc->size);
		print_row(bc, pages, bw, &copy, bw->copy[s], (double)bc->size);
	}
	for (int k = 0; k < GATHER_BLOCKS && bc->blocks[k]; k++) {
		double bytes = (double)(gather_count(bc, bc->blocks[k]) * bc->blocks[k]);

		for (int s = BW_SEGMENT; s <= BW_PRIVATE; s++) {
			struct bw_row gather = { "kv_gather", role, s, bc->blocks[k] };

			print_row(bc, pages, bw, &gather, bw->gather[s][k], bytes);
		}
	}
}
