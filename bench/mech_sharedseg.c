/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg itself, through the public API: create, the blobs all-gathered
 * over the ranks' group, complete. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "case.h"
#include "kernels.h"

static const char *sharedseg_refuses(enum sseg_pages kind)
{
	return sseg_check_support(SSEG_BACKEND_MEMFD, kind) ? sseg_last_error() : NULL;
}

static int exchange_and_complete(const struct mech_ctx *c, struct mech_map *m,
				 const unsigned char *blob, int created)
{
	unsigned char *blobs = malloc((size_t)c->bc->ranks * SSEG_BLOB_SIZE);
	double t0;
	int rc;

	if (!blobs)
		return mech_fail(m, "the blobs", ENOMEM);
	rc = sseg_local_allgather(blob, blobs, SSEG_BLOB_SIZE, c->group);
	t0 = now_s();
	if (!rc && !created)
		rc = sseg_complete(m->seg, blobs);
	m->attach_s = now_s() - t0;
	free(blobs);
	if (created)
		return -1; /* m->error holds create's message */
	if (rc)
		snprintf(m->error, sizeof(m->error), "%s", sseg_last_error());
	return rc ? -1 : 0;
}

static int sharedseg_open(const struct mech_ctx *c, struct mech_map *m)
{
	const struct bench_case *bc = c->bc;
	unsigned char blob[SSEG_BLOB_SIZE];
	SSEG_OPTS(o, .name = c->name, .size = bc->size, .world_size = bc->ranks,
		  .rank = c->rank, .owner_rank = 0, .pages = bc->pages, .populate = bc->populate,
		  .populate_threads = bc->threads, .timeout_ms = bc->timeout_ms);
	double t0 = now_s();
	int created = sseg_create(&o, &m->seg, blob);

	m->create_s = now_s() - t0;
	if (created)
		snprintf(m->error, sizeof(m->error), "%s", sseg_last_error());
	/* A failed create still sends its failure blob: every rank then
	 * fails with this rank's message instead of waiting for it. */
	if (exchange_and_complete(c, m, blob, created))
		return -1;
	m->base = sseg_base(m->seg);
	m->len = sseg_size(m->seg);
	return 0;
}

static void sharedseg_close(const struct mech_ctx *c, struct mech_map *m)
{
	if (m->seg && sseg_destroy(m->seg))
		fprintf(stderr, "sharedseg bench: rank %d: sseg_destroy: %s\n", c->rank,
			sseg_last_error());
	m->seg = NULL;
}

const struct mech_ops mech_sharedseg = {
	.name = "sharedseg",
	.label = "sharedseg",
	.shared = true,
	.attach = "sseg_complete",
	.refuses = sharedseg_refuses,
	.open = sharedseg_open,
	.close = sharedseg_close,
};
