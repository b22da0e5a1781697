/* SPDX-License-Identifier: Apache-2.0 */
/* sseg_open: the two phases with a caller-supplied all-gather, and a final
 * all-gather of every rank's status so one rank's failure fails all ranks
 * (naming it) instead of leaving some waiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "internal.h"

/* One rank's status in the all-gather: frame.h's record, kind STATUS,
 * code 0 or the failure's errno, body the sentence. */
#define STATUS_LEN 256

struct group_status {
	int first_failed;
	int nfailed;
	int err;
	char message[SSEG_ERR_MAX];
};

static void encode_status(uint8_t *rec, int rc)
{
	struct sseg_frame f = { .kind = SSEG_FRAME_STATUS, .code = rc };
	const char *why = rc ? sseg_last_error() : "";

	f.len = (uint32_t)strlen(why);
	sseg_frame_record(rec, STATUS_LEN, &f, why);
}

/* A record that is none (the all-gather returned other bytes than a rank
 * sent) counts as that rank's failure, with the sentence that says so. */
static void decode_statuses(const uint8_t *all, int world, struct group_status *st)
{
	memset(st, 0, sizeof(*st));
	st->first_failed = -1;
	for (int r = 0; r < world; r++) {
		const uint8_t *rec = all + (size_t)r * STATUS_LEN, *body;
		char why[SSEG_ERR_MAX];
		struct sseg_frame f;
		int err;

		if (sseg_frame_from_record(rec, STATUS_LEN, SSEG_FRAME_STATUS, &f, &body)) {
			err = -EPROTO;
			snprintf(why, sizeof(why), "its status record: %s", sseg_last_error());
		} else if (f.code) {
			err = f.code;
			snprintf(why, sizeof(why), "%.*s", (int)f.len, (const char *)body);
		} else {
			continue;
		}
		if (st->first_failed < 0) {
			st->first_failed = r;
			st->err = err;
			snprintf(st->message, sizeof(st->message), "%s", why);
		}
		st->nfailed++;
	}
}

/* Every rank learns whether every rank succeeded. */
static int agree(const struct sseg_opts *opts, sseg_allgather_fn allgather, void *ctx,
		 int rc, const char *phase)
{
	uint8_t mine[STATUS_LEN], *all;
	struct group_status st;
	int grc;

	all = malloc((size_t)STATUS_LEN * (size_t)opts->world_size);
	if (!all)
		return rc ? rc : sseg_err(-ENOMEM, "out of memory");
	encode_status(mine, rc);
	grc = allgather(mine, all, STATUS_LEN, ctx);
	if (grc) {
		free(all);
		return rc ? rc : sseg_err_wrap(grc, "the all-gather after %s failed", phase);
	}
	decode_statuses(all, opts->world_size, &st);
	free(all);
	if (st.first_failed < 0)
		return 0;
	if (rc)
		return rc;
	return sseg_err(st.err, "%d rank(s) failed in %s; rank %d: %s", st.nfailed, phase,
			st.first_failed, st.message);
}

int sseg_open(const struct sseg_opts *opts, sseg_allgather_fn allgather, void *ctx,
	      sseg_t **out)
{
	uint8_t blob[SSEG_BLOB_SIZE], *blobs;
	sseg_t *seg = NULL;
	int rc, grc;

	if (!opts || !allgather || !out)
		return sseg_err(-EINVAL, "sseg_open needs options, an all-gather and an out-pointer");
	*out = NULL;
	if (opts->world_size < 1 || opts->world_size > 65536)
		return sseg_err(-EINVAL, "world_size=%d: must be 1 to 65536", opts->world_size);
	blobs = malloc((size_t)SSEG_BLOB_SIZE * (size_t)opts->world_size);
	if (!blobs)
		return sseg_err(-ENOMEM, "out of memory");
	/* A failed create still sends its failure blob: the others then fail
	 * in complete with this rank's message. */
	rc = sseg_create(opts, &seg, blob);
	grc = allgather(blob, blobs, SSEG_BLOB_SIZE, ctx);
	if (!rc && grc)
		rc = sseg_err_wrap(grc, "the all-gather of blobs failed");
	if (!rc)
		rc = sseg_complete(seg, blobs);
	free(blobs);
	if (!grc)
		rc = agree(opts, allgather, ctx, rc, "sseg_open");
	if (rc) {
		char why[SSEG_ERR_MAX];

		snprintf(why, sizeof(why), "%s", sseg_last_error());
		if (seg && sseg_destroy(seg))
			sseg_log(SSEG_LOG_ERROR, "could not release a failed segment: %s",
				 sseg_last_error());
		sseg_err(rc, "%s", why);
		return rc;
	}
	*out = seg;
	return 0;
}
