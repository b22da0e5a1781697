/* SPDX-License-Identifier: Apache-2.0 */
/* Each mismatch class fails complete with its own message, naming the rank,
 * the field and both values, before anything is mapped. */
#include <string.h>

#include "blob.h"
#include "testutil.h"

#define SZ (4u << 20)

static struct sseg_layout *layout_with(uint64_t count)
{
	struct sseg_block_desc blocks[] = {
		{ .name = "k", .count = count, .bytes = 8192, .shape = "bfloat16[4096]" },
	};
	struct sseg_layout *l;

	CHECK_RC(sseg_layout_create(blocks, 1, SSEG_LAYOUT_INTERLEAVED, 0, &l), 0);
	return l;
}

static void base_ranks(struct tu_rank *r, int n, const char *name)
{
	memset(r, 0, sizeof(*r) * (size_t)n);
	for (int i = 0; i < n; i++) {
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = name,
						.size = SZ, .world_size = n, .rank = i,
						.pages = SSEG_PAGES_BASE, .timeout_ms = 2000 };
	}
}

/* Creates the group, completes rank `victim` and expects the message. */
static void expect_mismatch(struct tu_rank *r, int n, int victim, int err, const char *needle)
{
	unsigned char *blobs = tu_create_inproc(r, n);

	for (int i = 0; i < n; i++)
		if (r[i].create_rc) {
			fprintf(stderr, "rank %d create failed: %s\n", i, r[i].error);
			exit(1);
		}
	CHECK_RC(sseg_complete(r[victim].seg, blobs), err);
	CHECK_ERR_HAS(needle);
	/* The owner fails the same way: every rank compares with rank 0. */
	CHECK_RC(sseg_complete(r[0].seg, blobs), err);
	CHECK_ERR_HAS(needle);
	free(blobs);
	tu_destroy_all(r, n);
}

static void declared_fields(void)
{
	struct tu_rank r[3];
	struct sseg_layout *l1 = layout_with(4), *l2 = layout_with(5);

	base_ranks(r, 3, "verify-size");
	r[2].opts.size = SZ * 2;
	expect_mismatch(r, 3, 1, -EINVAL, "rank 2 declared size=8 MiB, rank 0 declared size=4 MiB");

	base_ranks(r, 3, "verify-pages");
	r[1].opts.pages = SSEG_PAGES_AUTO;
	expect_mismatch(r, 3, 2, -EINVAL, "rank 1 declared pages=auto, rank 0 declared pages=base");

	base_ranks(r, 3, "verify-flags");
	r[2].opts.flags = SSEG_F_READONLY_PEERS;
	expect_mismatch(r, 3, 1, -EINVAL, "rank 2 declared flags=readonly-peers, rank 0 declared flags=none");

	base_ranks(r, 3, "verify-populate");
	r[1].opts.populate = SSEG_POPULATE_LAZY;
	expect_mismatch(r, 3, 1, -EINVAL, "rank 1 declared populate=lazy, rank 0 declared populate=owner");

	base_ranks(r, 3, "verify-layout");
	r[0].opts.layout = l1;
	r[1].opts.layout = l1;
	r[2].opts.layout = l2;
	/* The first differing block and field, with both values. */
	expect_mismatch(r, 3, 1, -EINVAL,
			"the layouts differ: block 'k': rank 2 declared count=5, rank 0 declared "
			"count=4");

	base_ranks(r, 3, "verify-name");
	r[1].opts.name = "verify-other";
	expect_mismatch(r, 3, 2, -EINVAL,
			"rank 1 declared name=\"verify-other\", rank 0 declared name=\"verify-name\"");

	base_ranks(r, 2, "verify-backend");
	{
		unsigned char *blobs = tu_create_inproc(r, 2);
		struct sseg_blob b;

		/* No second backend runs here: forge rank 1's declaration the
		 * way a rank that asked for cuda would send it. */
		CHECK_RC(sseg_blob_decode(blobs + SSEG_BLOB_SIZE, 1, &b), 0);
		b.decl.backend = SSEG_BACKEND_CUDA;
		b.fingerprint = sseg_blob_fingerprint(&b);
		sseg_blob_encode(&b, blobs + SSEG_BLOB_SIZE);
		CHECK_RC(sseg_complete(r[0].seg, blobs), -EINVAL);
		CHECK_ERR_HAS("rank 1 declared backend=cuda, rank 0 declared backend=memfd");
		/* A fingerprint that does not match its declaration. */
		b.decl.backend = SSEG_BACKEND_MEMFD;
		sseg_blob_encode(&b, blobs + SSEG_BLOB_SIZE);
		CHECK_RC(sseg_complete(r[0].seg, blobs), -EPROTO);
		CHECK_ERR_HAS("rank 1's fingerprint does not match");
		free(blobs);
		tu_destroy_all(r, 2);
	}
	sseg_layout_destroy(l1);
	sseg_layout_destroy(l2);
}

static void identity(void)
{
	struct tu_rank r[3];
	unsigned char *blobs, tmp[SSEG_BLOB_SIZE];

	/* All-gather returned the blobs out of order. */
	base_ranks(r, 3, "verify-order");
	blobs = tu_create_inproc(r, 3);
	memcpy(tmp, blobs + SSEG_BLOB_SIZE, SSEG_BLOB_SIZE);
	memcpy(blobs + SSEG_BLOB_SIZE, blobs + 2 * SSEG_BLOB_SIZE, SSEG_BLOB_SIZE);
	memcpy(blobs + 2 * SSEG_BLOB_SIZE, tmp, SSEG_BLOB_SIZE);
	CHECK_RC(sseg_complete(r[1].seg, blobs), -EINVAL);
	CHECK_ERR_HAS("blob at index 1 carries rank 2");
	/* Two processes started as rank 1. */
	memcpy(blobs + 2 * SSEG_BLOB_SIZE, blobs + 0 * SSEG_BLOB_SIZE, SSEG_BLOB_SIZE);
	CHECK_RC(sseg_complete(r[1].seg, blobs), -EINVAL);
	CHECK_ERR_HAS("both claim rank 0");
	free(blobs);
	tu_destroy_all(r, 3);

	/* A rank that believes the group is bigger. */
	base_ranks(r, 3, "verify-world");
	r[2].opts.world_size = 4;
	blobs = tu_create_inproc(r, 3);
	CHECK_RC(sseg_complete(r[0].seg, blobs), -EINVAL);
	CHECK_ERR_HAS("rank 2 declared world_size=4");
	free(blobs);
	tu_destroy_all(r, 3);
}

static void owners(void)
{
	struct tu_rank r[3];
	unsigned char *blobs;

	/* Two owners on one host. */
	base_ranks(r, 3, "verify-owners");
	r[2].opts.owner_rank = 2;
	blobs = tu_create_inproc(r, 3);
	CHECK_RC(sseg_complete(r[1].seg, blobs), -EINVAL);
	CHECK_ERR_HAS("exactly one owner per host");
	free(blobs);
	tu_destroy_all(r, 3);

	/* A rank names an owner that is not one. */
	base_ranks(r, 3, "verify-notowner");
	r[2].opts.owner_rank = 1;
	blobs = tu_create_inproc(r, 3);
	CHECK_RC(sseg_complete(r[0].seg, blobs), -EINVAL);
	CHECK_ERR_HAS("rank 2 names rank 1 as its owner, but rank 1 names rank 0");
	free(blobs);
	tu_destroy_all(r, 3);
}

static void failed_rank(void)
{
	struct tu_rank r[3];
	unsigned char *blobs;

	base_ranks(r, 3, "verify-failed");
	r[2].opts.numa = 99; /* an invalid option: create fails on rank 2 */
	blobs = tu_create_inproc(r, 3);
	CHECK(r[2].create_rc == -EINVAL && r[2].seg == NULL);
	CHECK_RC(sseg_complete(r[0].seg, blobs), -EINVAL);
	CHECK_ERR_HAS("rank 2 failed in sseg_create: numa=99");
	free(blobs);
	tu_destroy_all(r, 3);
}

static void wrong_bytes(void)
{
	struct tu_rank r[2];
	unsigned char *blobs;

	base_ranks(r, 2, "verify-bytes");
	blobs = tu_create_inproc(r, 2);
	blobs[SSEG_BLOB_SIZE + 100] ^= 0xff;
	CHECK_RC(sseg_complete(r[0].seg, blobs), -EBADMSG);
	CHECK_ERR_HAS("blob at index 1 fails its checksum");
	free(blobs);
	tu_destroy_all(r, 2);
}

/* Blobs from an earlier create of the same group are refused. */
static void stale_blobs(void)
{
	struct tu_rank r[2];
	unsigned char *old, *fresh;

	base_ranks(r, 2, "verify-stale");
	old = tu_create_inproc(r, 2);
	tu_destroy_all(r, 2);
	base_ranks(r, 2, "verify-stale");
	fresh = tu_create_inproc(r, 2);
	CHECK_RC(sseg_complete(r[1].seg, old), -EINVAL);
	CHECK_ERR_HAS("the blob at index 1 is not the one this rank's sseg_create made");
	free(old);
	free(fresh);
	tu_destroy_all(r, 2);
}

int main(void)
{
	stale_blobs();
	declared_fields();
	identity();
	owners();
	failed_rank();
	wrong_bytes();
	printf("verify: ok\n");
	return 0;
}
