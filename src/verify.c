/* SPDX-License-Identifier: Apache-2.0 */
/* Verification of every rank's blob before anything is mapped. Each failure
 * names the rank, the field and both values, and every rank compares against
 * rank 0 so all ranks report the same sentence. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "blob.h"
#include "layout.h"
#include "os/host.h"
#include "segment_types.h"
#include "verify.h"

/* Names the first block and field that differ, with both values, from the
 * descriptions the blobs carry. */
static int layout_mismatch(const struct sseg_blob *b, const struct sseg_blob *ref, int r)
{
	char la[32], diff[SSEG_ERR_MAX - 64];

	snprintf(la, sizeof(la), "rank %d", r);
	if (!b->layout_len || !ref->layout_len)
		return sseg_err(-EINVAL, "%s declared %s layout, rank 0 %s",
				la, b->layout_len ? "a" : "no", ref->layout_len ? "one" : "none");
	if (sseg_layout_diff(b->layout, b->layout_len, la, ref->layout, ref->layout_len, "rank 0",
			     diff, sizeof(diff)))
		return sseg_err(-EINVAL,
				"%s declared layout=%016" PRIx64 ", rank 0 declared layout=%016" PRIx64
				": they differ beyond the part of the description a blob carries",
				la, b->decl.layout, ref->decl.layout);
	return sseg_err(-EINVAL, "the layouts differ: %s", diff);
}

/* Compares the declared fields of rank r with rank 0's (decl.h's GROUP
 * rows, in the table's order: the layout comes before the size, since a
 * different shape changes both, and names the cause). */
static int check_declaration(const struct sseg_blob *b, const struct sseg_blob *ref, int r)
{
	struct sseg_decl_diff d;

	if (sseg_decl_differs(&b->decl, &ref->decl, SSEG_DECL_GROUP, &d)) {
		if (d.field == SSEG_DECL_layout)
			return layout_mismatch(b, ref, r);
		return sseg_err(-EINVAL, "rank %d declared %s=%s, rank 0 declared %s=%s", r, d.name,
				d.a, d.name, d.b);
	}
	if (b->fingerprint != sseg_blob_fingerprint(b))
		return sseg_err(-EPROTO,
				"rank %d's fingerprint does not match its declaration (a blob from "
				"another build of sharedseg?)",
				r);
	return 0;
}

static void host_text(const struct sseg_os_host_id *h, char *buf, size_t len)
{
	snprintf(buf, len, "boot id %02x%02x%02x%02x..., netns %" PRIu64, h->boot_id[0],
		 h->boot_id[1], h->boot_id[2], h->boot_id[3], h->netns);
}

/* The owner's handle section: what peers will map must be the declared
 * segment, in whole pages of a sane size. */
/* The page size a page kind has; 0 for auto, which only a device backend
 * reports (its granularity, whatever the driver's). */
static uint64_t kind_page_size(uint32_t pages)
{
	switch (pages) {
	case SSEG_PAGES_BASE:
		return sseg_os_base_page_size();
	case SSEG_PAGES_THP:
	case SSEG_PAGES_HUGETLB_2M:
		return SSEG_2M;
	case SSEG_PAGES_HUGETLB_1G:
		return SSEG_1G;
	}
	return 0;
}

/* The page kind and size the owner reports must agree with each other. */
static int check_page_kind(const struct sseg *seg, const struct sseg_blob *b)
{
	const struct sseg_blob_handle *h = &b->handle;
	uint64_t want = kind_page_size(h->pages);

	if (h->pages == SSEG_PAGES_AUTO && (seg->ops->caps & SSEG_CAP_PINNED))
		return 0;
	if (want && want == h->page_size)
		return 0;
	return sseg_err(-EPROTO, "owner rank %u reports pages=%s with %llu-byte pages: that page "
			"kind's pages are %llu bytes here",
			b->rank, sseg_pages_name(h->pages), (unsigned long long)h->page_size,
			(unsigned long long)want);
}

static int check_handle(const struct sseg *seg, const struct sseg_blob *b)
{
	const struct sseg_blob_handle *h = &b->handle;
	uint64_t ceiling;
	int rc;

	if (h->kind == SSEG_HANDLE_NONE || h->kind > SSEG_HANDLE_FABRIC)
		return sseg_err(-EPROTO, "owner rank %u's blob carries no valid handle section (kind %u)",
				b->rank, h->kind);
	if (h->pages > SSEG_PAGES_HUGETLB_1G || !sseg_is_pow2(h->page_size) ||
	    h->page_size < 4096 || h->page_size > SSEG_1G)
		return sseg_err(-EPROTO, "owner rank %u reports pages=%u of %llu bytes: not a page size",
				b->rank, h->pages, (unsigned long long)h->page_size);
	rc = check_page_kind(seg, b);
	if (rc)
		return rc;
	if (sseg_round_up(b->decl.size, h->page_size, &ceiling) || h->mapped_size != ceiling)
		return sseg_err(-EPROTO,
				"owner rank %u maps %llu bytes for a declared size of %llu in %llu-byte "
				"pages",
				b->rank, (unsigned long long)h->mapped_size, (unsigned long long)b->decl.size,
				(unsigned long long)h->page_size);
	return 0;
}

/* Two owners on one host. Ranks of different users pick their own owners
 * (the host identity holds the uid), and that is the cause to name. */
static int two_owners(const struct sseg_blob *blobs, int s, int r)
{
	if (blobs[s].host.uid != blobs[r].host.uid)
		return sseg_err(-EPERM,
				"ranks %d and %d run on one host as different users (uid %u and %u): "
				"an owner hands its pages only to its own user, so every rank of a "
				"host must run as one user",
				s, r, blobs[s].host.uid, blobs[r].host.uid);
	return sseg_err(-EINVAL,
			"ranks %d and %d run on one host but name different owners (%u and %u): "
			"there must be exactly one owner per host",
			s, r, (unsigned)blobs[s].decl.owner_rank,
			(unsigned)blobs[r].decl.owner_rank);
}

/* Every rank's owner is an owner, on the rank's host; one owner per host. */
static int check_owners(const struct sseg *seg, const struct sseg_blob *blobs, int world)
{
	char a[64], c[64];
	bool local;

	for (int r = 0; r < world; r++) {
		uint64_t o64 = blobs[r].decl.owner_rank;
		uint32_t o = o64 > UINT32_MAX ? UINT32_MAX : (uint32_t)o64;

		if (o >= (uint32_t)world)
			return sseg_err(-EINVAL, "rank %d names owner rank %u, outside the group of %d",
					r, o, world);
		if (blobs[o].decl.owner_rank != o)
			return sseg_err(-EINVAL,
					"rank %d names rank %u as its owner, but rank %u names rank %u",
					r, o, o, (unsigned)blobs[o].decl.owner_rank);
		/* Only a fabric handle reaches a rank on another host (one
		 * NVLink domain); an fd never leaves its host. */
		local = sseg_blob_same_host(&blobs[r], &blobs[o]);
		if (!local && blobs[o].handle.kind != SSEG_HANDLE_FABRIC) {
			host_text(&blobs[r].host, a, sizeof(a));
			host_text(&blobs[o].host, c, sizeof(c));
			return sseg_err(-EINVAL,
					"rank %d names rank %u as its owner, but they run on different "
					"hosts (%s against %s) and only a fabric handle crosses "
					"hosts: each host needs its own owner",
					r, o, a, c);
		}
		if (r == (int)o) {
			int rc = check_handle(seg, &blobs[o]);

			if (rc)
				return rc;
		}
		if (local && blobs[r].host.uid != blobs[o].host.uid)
			return sseg_err(-EPERM,
					"rank %d runs as uid %u but its owner rank %u runs as uid %u: "
					"the owner hands its pages only to its own user",
					r, blobs[r].host.uid, o, blobs[o].host.uid);
		for (int s = 0; s < r; s++)
			if (sseg_blob_same_host(&blobs[r], &blobs[s]) &&
			    blobs[s].decl.owner_rank != o)
				return two_owners(blobs, s, r);
	}
	return 0;
}

static int check_identity(const struct sseg_blob *blobs, int world)
{
	for (int i = 0; i < world; i++) {
		if (blobs[i].status)
			return sseg_err(sseg_errno_or(blobs[i].status, -EPROTO),
					"rank %d failed in sseg_create: %s", i, blobs[i].error);
		for (int j = 0; j < i; j++)
			if (blobs[j].rank == blobs[i].rank)
				return sseg_err(-EINVAL,
						"blobs at index %d and %d both claim rank %u: two processes "
						"were started with the same rank",
						j, i, blobs[i].rank);
	}
	for (int i = 0; i < world; i++) {
		if (blobs[i].decl.world_size != (uint64_t)world)
			return sseg_err(-EINVAL,
					"rank %d declared world_size=%llu, this rank declared world_size=%d",
					i, (unsigned long long)blobs[i].decl.world_size, world);
		if (blobs[i].rank != (uint32_t)i)
			return sseg_err(-EINVAL,
					"blob at index %d carries rank %u: the all-gather must return "
					"blobs in rank order",
					i, blobs[i].rank);
	}
	return 0;
}

int sseg_verify_blobs(const struct sseg *seg, const void *raw, struct sseg_blob *blobs)
{
	const uint8_t *bytes = raw;
	int world = seg->opts.world_size;
	int rc;


	for (int i = 0; i < world; i++) {
		rc = sseg_blob_decode(bytes + (size_t)i * SSEG_BLOB_SIZE, i, &blobs[i]);
		if (rc)
			return rc;
	}
	rc = check_identity(blobs, world);
	if (rc)
		return rc;
	/* Stale blobs from an earlier create would send peers to a socket
	 * that is gone: this rank's own must be the one it just made. */
	if (memcmp(bytes + (size_t)seg->opts.rank * SSEG_BLOB_SIZE, seg->blob, SSEG_BLOB_SIZE))
		return sseg_err(-EINVAL,
				"the blob at index %d is not the one this rank's sseg_create made "
				"(blobs from another create?)",
				seg->opts.rank);

	for (int r = 0; r < world; r++) {
		rc = check_declaration(&blobs[r], &blobs[0], r);
		if (rc)
			return rc;
	}
	return check_owners(seg, blobs, world);
}
