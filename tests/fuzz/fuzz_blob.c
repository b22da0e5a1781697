/* SPDX-License-Identifier: Apache-2.0 */
/* Blob decoding and verification: the bytes every rank trusts from the
 * exchange. A real 4-rank group (in-process, with a layout, so blobs carry
 * its description) gives the blobs; the input edits them and the edited
 * group is verified as one of the ranks would in sseg_complete.
 *
 * Input: a flags byte (bits 0-1: the rank that verifies; bit 2: leave the
 * checksums as the edits left them, else recompute them so that the
 * fields behind them are reached), then edits: offset (2 bytes, into the
 * four blobs), length (1 byte), bytes. The empty input is the valid group.
 * Invariants: no crash or undefined behaviour; every refusal has a
 * sentence; an accepted group is what verification promises. */
#include <string.h>

#include "blob.h"
#include "fuzz.h"
#include "segment_types.h"
#include "testutil.h"
#include "verify.h"

#define WORLD 4
#define OFF_CHECKSUM (SSEG_BLOB_SIZE - 4)

static struct tu_rank ranks[WORLD];
static unsigned char *valid;

static void make_group(void)
{
	static const struct sseg_block_desc blocks[] = {
		{ .name = "k", .count = 3, .bytes = 1024, .shape = "bfloat16[512]" },
		{ .name = "v", .count = 2, .bytes = 100, .align = 64, .shape = "float16[50]" },
	};
	struct sseg_layout *layout;

	sseg_set_log_level(SSEG_LOG_OFF);
	if (sseg_layout_create(blocks, 2, SSEG_LAYOUT_INTERLEAVED, 0, &layout))
		abort();
	for (int r = 0; r < WORLD; r++)
		ranks[r].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts),
						    .name = "fuzz-blob", .world_size = WORLD,
						    .rank = r, .pages = SSEG_PAGES_BASE,
						    .populate = SSEG_POPULATE_LAZY,
						    .layout = layout, .timeout_ms = 1 };
	valid = tu_create_inproc(ranks, WORLD);
	for (int r = 0; r < WORLD; r++)
		if (ranks[r].create_rc)
			abort();
	sseg_layout_destroy(layout);
}

/* The blob format's checksum (blob.c): FNV-1a over all but the last four
 * bytes, folded to 32 bits. */
static void fix_checksum(uint8_t *blob)
{
	uint64_t h = sseg_hash64(blob, OFF_CHECKSUM, 0x5353);

	sseg_put32(blob + OFF_CHECKSUM, (uint32_t)(h ^ (h >> 32)));
}

static void apply_edits(struct fz *in, uint8_t *raw)
{
	while (in->n >= 3) {
		size_t off = (fz_u8(in) | (size_t)fz_u8(in) << 8) % (WORLD * SSEG_BLOB_SIZE);
		size_t len = fz_u8(in);

		if (len > in->n)
			len = in->n;
		if (len > WORLD * SSEG_BLOB_SIZE - off)
			len = WORLD * SSEG_BLOB_SIZE - off;
		memcpy(raw + off, in->p, len);
		in->p += len;
		in->n -= len;
	}
}

/* What an accepted group must be. */
static void check_accepted(const struct sseg *seg, const struct sseg_blob *blobs)
{
	for (int r = 0; r < WORLD; r++) {
		const struct sseg_decl *d = &blobs[r].decl;
		const struct sseg_blob *owner;

		FUZZ_CHECK(d->owner_rank < WORLD);
		owner = &blobs[d->owner_rank];
		FUZZ_CHECK(blobs[r].rank == (uint32_t)r && blobs[r].status == 0);
		FUZZ_CHECK(d->world_size == WORLD);
		FUZZ_CHECK(d->size == blobs[0].decl.size && d->pages == blobs[0].decl.pages);
		FUZZ_CHECK(owner->handle.kind != SSEG_HANDLE_NONE);
		FUZZ_CHECK(owner->handle.page_size >= 4096 &&
			   owner->handle.mapped_size >= owner->decl.size);
		FUZZ_CHECK(strlen(owner->handle.sock) < sizeof(owner->handle.sock));
	}
	FUZZ_CHECK(!memcmp(blobs[seg->opts.rank].decl.name, seg->name, strlen(seg->name) + 1));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t raw[WORLD * SSEG_BLOB_SIZE];
	struct sseg_blob blobs[WORLD];
	struct fz in = { data, size };
	uint8_t flags = fz_u8(&in);
	const struct sseg *seg;
	int rc;

	if (!valid)
		make_group();
	seg = ranks[flags & 3].seg;
	memcpy(raw, valid, sizeof(raw));
	apply_edits(&in, raw);
	if (!(flags & 4))
		for (int r = 0; r < WORLD; r++)
			fix_checksum(raw + (size_t)r * SSEG_BLOB_SIZE);
	sseg_err_clear();
	rc = sseg_verify_blobs(seg, raw, blobs);
	FUZZ_CHECK(rc <= 0);
	if (rc)
		FUZZ_CHECK(sseg_last_error()[0] != '\0');
	else
		check_accepted(seg, blobs);
	/* Each blob alone, as the index it would be found at. */
	for (int r = 0; r < WORLD; r++) {
		struct sseg_blob one;

		rc = sseg_blob_decode(raw + (size_t)r * SSEG_BLOB_SIZE, r, &one);
		FUZZ_CHECK(rc == 0 || sseg_last_error()[0] != '\0');
		FUZZ_CHECK(rc != 0 || one.layout_len <= SSEG_BLOB_LAYOUT_MAX);
	}
	return 0;
}
