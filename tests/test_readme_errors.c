/* SPDX-License-Identifier: Apache-2.0 */
/* The error sentences docs/c-api.md shows, produced for real: a declaration
 * that differs, layouts that differ, a HugeTLB pool too small, memory that
 * cannot back a segment, an owner that is gone. With --print the sentences
 * go to stdout for tests/readme.py, which checks that document's block
 * against them (numbers aside). */
#include <string.h>

#include "testutil.h"

#define SZ (4u << 20)

static int printing;

static void say(const char *needle)
{
	CHECK_ERR_HAS(needle);
	if (printing)
		printf("%s\n", sseg_last_error());
}

static void ranks(struct tu_rank *r, int n, const char *name)
{
	memset(r, 0, sizeof(*r) * (size_t)n);
	for (int i = 0; i < n; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = name,
						.size = SZ, .world_size = n, .rank = i,
						.pages = SSEG_PAGES_BASE, .timeout_ms = 2000 };
}

static void complete_fails(struct tu_rank *r, int n, int victim, const char *needle)
{
	unsigned char *blobs = tu_create_inproc(r, n);

	for (int i = 0; i < n; i++)
		CHECK(r[i].create_rc == 0);
	CHECK(sseg_complete(r[victim].seg, blobs) < 0);
	say(needle);
	free(blobs);
	tu_destroy_all(r, n);
}

static struct sseg_layout *kv(uint64_t count)
{
	struct sseg_block_desc b[] = {
		{ .name = "k", .count = count, .bytes = 4096 * 2, .shape = "bfloat16[4096]" },
	};
	struct sseg_layout *l;

	CHECK_RC(sseg_layout_create(b, 1, SSEG_LAYOUT_INTERLEAVED, 0, &l), 0);
	return l;
}

static void mismatches(void)
{
	struct sseg_layout *l60 = kv(60), *l61 = kv(61);
	struct tu_rank r[4];

	ranks(r, 4, "readme-pages");
	r[3].opts.pages = SSEG_PAGES_AUTO;
	complete_fails(r, 4, 1, "rank 3 declared pages=auto, rank 0 declared pages=base");
	ranks(r, 2, "readme-layout");
	r[0].opts.layout = l60;
	r[1].opts.layout = l61;
	r[0].opts.size = r[1].opts.size = 0;
	complete_fails(r, 2, 1, "block 'k': rank 1 declared count=61, rank 0 declared count=60");
	sseg_layout_destroy(l60);
	sseg_layout_destroy(l61);
}

static void refusals(void)
{
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg = NULL;
	SSEG_OPTS(o, .name = "readme-pool", .size = 64ull << 30, .world_size = 1,
		  .pages = SSEG_PAGES_HUGETLB_2M);

	CHECK(sseg_create(&o, &seg, blob) < 0);
	say("HugeTLB pool has");
	o.size = 1ull << 46;
	o.pages = SSEG_PAGES_BASE;
	CHECK_RC(sseg_create(&o, &seg, blob), -ENOMEM);
	say("refused before allocating rather than OOM-killed while populating");
}

/* The owner is gone before the peer came for the segment. */
static void owner_gone(void)
{
	unsigned char *blobs;
	struct tu_rank r[2];

	ranks(r, 2, "readme-gone");
	blobs = tu_create_inproc(r, 2);
	CHECK(r[0].create_rc == 0 && r[1].create_rc == 0);
	CHECK_RC(sseg_destroy(r[0].seg), 0);
	r[0].seg = NULL;
	CHECK_RC(sseg_complete(r[1].seg, blobs), -ECONNREFUSED);
	say("is not listening on its fd channel: it exited or failed before handing the "
	    "segment over");
	free(blobs);
	tu_destroy_all(r, 2);
}

int main(int argc, char **argv)
{
	printing = argc > 1 && !strcmp(argv[1], "--print");
	sseg_set_log_level(SSEG_LOG_OFF);
	mismatches();
	refusals();
	owner_gone();
	if (!printing)
		printf("readme_errors: ok\n");
	return 0;
}
