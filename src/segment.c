/* SPDX-License-Identifier: Apache-2.0 */
/* The segment's life: create (phase 1), complete (phase 3), destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "background.h"
#include "backend/backend.h"
#include "fdchannel.h"
#include "host_identity.h"
#include "hostreg.h"
#include "layout.h"
#include "segment_types.h"
#include "options.h"
#include "os/sock.h"
#include "registry.h"
#include "release.h"
#include "tag.h"
#include "verify.h"

static void fill_blob(const struct sseg *seg, struct sseg_blob *b)
{
	memset(b, 0, sizeof(*b));
	b->rank = (uint32_t)seg->opts.rank;
	sseg_decl_of(seg, &b->decl);
	b->layout = seg->layout ? sseg_layout_describe(seg->layout) : NULL;
	b->host = seg->host;
	b->pid = (uint32_t)getpid();
	if (sseg_os_random(&b->nonce, sizeof(b->nonce)))
		b->nonce = (uint32_t)(sseg_now() * 1e9);
	b->fingerprint = sseg_blob_fingerprint(b);
}

static int prepare(struct sseg *seg, const struct sseg_opts *opts)
{
	struct sseg_probe_backend facts = { .sz = sizeof(facts) };
	int rc;

	rc = sseg_opts_load(seg, opts);
	if (rc)
		return rc;
	rc = sseg_backend_probe(seg->ops, &facts);
	if (rc)
		return sseg_err(rc, "backend %s: %s", seg->ops->name, facts.reason);
	if (seg->opts.flags & SSEG_F_HOST_REGISTER) {
		rc = sseg_hostreg_check(seg);
		if (rc)
			return rc;
	}
	return sseg_host_id(&seg->host);
}

static struct sseg *new_segment(void)
{
	struct sseg *seg = calloc(1, sizeof(*seg));

	if (!seg)
		return NULL;
	sseg_channel_init(&seg->channel);
	sseg_registry_track(seg);
	return seg;
}

/* The cause goes back to the caller, not the cleanup's trouble. */
static void undo_create(struct sseg *seg, int rc)
{
	char why[SSEG_ERR_MAX];

	snprintf(why, sizeof(why), "%s", sseg_last_error());
	if (sseg_release(seg))
		sseg_registry_defer(seg, rc, "create");
	else
		sseg_registry_free(seg);
	sseg_err(rc, "%s", why);
}

static int create(struct sseg *seg, const struct sseg_opts *opts, void *blob)
{
	struct sseg_blob b;
	int rc;

	rc = prepare(seg, opts);
	if (!rc && !seg->is_owner)
		rc = sseg_background_check_peer(seg);
	if (!rc)
		rc = seg->is_owner ? sseg_backend_create_owner(seg) : sseg_backend_reserve(seg);
	if (rc)
		return rc;
	fill_blob(seg, &b);
	rc = seg->is_owner ? sseg_backend_export(seg, &b.handle)
			   : sseg_backend_peer_handle(seg, &b.handle);
	if (rc)
		return rc;
	sseg_blob_encode(&b, seg->blob);
	memcpy(blob, seg->blob, SSEG_BLOB_SIZE);
	return 0;
}

int sseg_create(const struct sseg_opts *opts, sseg_t **out, void *blob)
{
	struct sseg *seg;
	double t0 = sseg_now();
	int rc = 0;

	sseg_err_clear();
	if (!out)
		rc = sseg_err(-EINVAL, "the segment out-pointer is NULL");
	else if (!blob)
		rc = sseg_err(-EINVAL, "the blob buffer is NULL");
	if (rc)
		goto fail_blob;
	*out = NULL;
	sseg_registry_retry_pending();
	seg = new_segment();
	if (!seg) {
		rc = sseg_err(-ENOMEM, "out of memory");
		goto fail_blob;
	}
	rc = create(seg, opts, blob);
	if (rc) {
		undo_create(seg, rc);
		goto fail_blob;
	}
	seg->create_s = sseg_now() - t0;
	*out = seg;
	return 0;

fail_blob:
	if (blob)
		sseg_blob_failure(blob, opts, rc, sseg_last_error());
	return rc;
}

/* populate=spread: each copy is faulted by the ranks that map it (one host's
 * ranks), each its slice. */
static int populate_spread(struct sseg *seg, const struct sseg_blob *blobs)
{
	int slice = 0, nslices = 0;

	if (seg->opts.populate != SSEG_POPULATE_SPREAD)
		return 0;
	for (int r = 0; r < seg->opts.world_size; r++) {
		if (blobs[r].decl.owner_rank != (uint64_t)seg->opts.owner_rank)
			continue;
		if (r < seg->opts.rank)
			slice++;
		nslices++;
	}
	return sseg_populate_slice(seg, slice, nslices);
}

static int map_and_share(struct sseg *seg, const struct sseg_blob *blobs)
{
	int rc = seg->is_owner ? sseg_backend_serve(seg, blobs) : sseg_backend_import(seg, blobs);

	if (!rc && !(seg->ops->caps & SSEG_CAP_PINNED))
		rc = populate_spread(seg, blobs);
	if (!rc && (seg->opts.flags & SSEG_F_HOST_REGISTER))
		rc = sseg_hostreg_register(seg);
	return rc;
}

static int check_completable(const struct sseg *seg, const void *raw)
{
	if (!seg || !raw)
		return sseg_err(-EINVAL, "sseg_complete needs a segment and the blobs");
	if (seg->completed)
		return sseg_err(-EALREADY, "segment '%s' is already complete", seg->name);
	if (seg->failed)
		return sseg_err(-EINVAL,
				"segment '%s' failed in an earlier sseg_complete: destroy it and create "
				"again",
				seg->name);
	return 0;
}

int sseg_complete(sseg_t *seg, const void *raw)
{
	struct sseg_blob *blobs;
	double t0 = sseg_now();
	int rc;

	sseg_err_clear();
	rc = check_completable(seg, raw);
	if (rc)
		return rc;
	blobs = calloc((size_t)seg->opts.world_size, sizeof(*blobs));
	if (!blobs)
		return sseg_err(-ENOMEM, "out of memory");
	/* Verification takes nothing: the caller may fix the blobs and call
	 * again. A failure after it leaves stages half taken: destroy only. */
	rc = sseg_verify_blobs(seg, raw, blobs);
	if (!rc) {
		seg->group_pid = blobs[seg->opts.owner_rank].pid;
		seg->group_nonce = blobs[seg->opts.owner_rank].nonce;
		sseg_os_set_interrupt(seg->opts.interrupt, seg->opts.interrupt_ctx);
		rc = map_and_share(seg, blobs);
		sseg_os_set_interrupt(NULL, NULL);
		seg->failed = rc != 0;
	}
	free(blobs);
	if (rc)
		return rc;
	sseg_backend_settle(seg);
	sseg_tag_place(seg);
	seg->completed = 1;
	/* Nothing else needs the pages in place: a failure to start leaves
	 * them to first touch, which is what the work would be stopped into. */
	if (sseg_background_start(seg))
		sseg_log(SSEG_LOG_WARN, "segment '%s': %s; pages are faulted at first touch",
			 seg->name, sseg_last_error());
	seg->complete_s = sseg_now() - t0;
	sseg_registry_add(seg);
	return 0;
}

#define DESTROY_TRIES 3

int sseg_destroy(sseg_t *seg)
{
	char name[SSEG_NAME_MAX + 1];
	int rc;

	if (!seg)
		return 0;
	sseg_err_clear();
	sseg_log_flush(); /* refusals held back while the group met */
	rc = sseg_registry_remove(seg);
	if (rc)
		return rc;
	rc = sseg_release(seg);
	if (!rc) {
		sseg_registry_free(seg);
		return 0;
	}
	if (++seg->destroy_failures < DESTROY_TRIES)
		return rc;
	/* Once deferred, another thread's create may retry and free it. */
	snprintf(name, sizeof(name), "%s", seg->name);
	sseg_registry_defer(seg, rc, "destroy");
	return sseg_err(-EINPROGRESS,
			"segment '%s' failed to tear down %d times; the library retries it on later "
			"creates (see sseg_pending_count)",
			name, DESTROY_TRIES);
}

void *sseg_base(const sseg_t *seg)
{
	return seg && seg->completed ? seg->base : NULL;
}

uint64_t sseg_size(const sseg_t *seg)
{
	return seg ? seg->size : 0;
}

static void describe_core(const struct sseg *seg, struct sseg_info *out)
{
	memset(out, 0, sizeof(*out));
	out->sz = sizeof(*out);
	out->backend = seg->backend;
	out->pages = seg->pages;
	out->page_size = seg->page_size;
	out->pages_verified = seg->pages_verified;
	out->huge_bytes = seg->huge_bytes;
	out->base = sseg_base(seg);
	out->size = seg->size;
	out->mapped_size = seg->mapped_size;
	out->rank = seg->opts.rank;
	out->world_size = seg->opts.world_size;
	out->owner_rank = seg->opts.owner_rank;
	out->is_owner = seg->is_owner;
	out->readonly = seg->readonly;
	out->numa = seg->opts.numa;
	out->numa_node = seg->opts.numa_node;
	out->numa_nodes = seg->numa_nodes;
	out->create_s = seg->create_s;
	out->complete_s = seg->complete_s;
	out->populate_s = seg->background ? sseg_background_seconds(seg) : seg->populate_s;
	snprintf(out->pages_reason, sizeof(out->pages_reason), "%s", seg->pages_reason);
	out->device = -1;
	out->pinned = (seg->ops->caps & SSEG_CAP_PINNED) != 0;
	out->kept = seg->kept;
	if (seg->opts.flags & SSEG_F_HOST_REGISTER) {
		out->device = seg->opts.device;
		out->device_addr = sseg_hostreg_device_addr(seg);
		out->registered_chunks = sseg_hostreg_chunks(seg);
		out->pinned = out->registered_chunks > 0;
	}
}

int sseg_info(const sseg_t *seg, struct sseg_info *info)
{
	struct sseg_info out;
	size_t n;

	if (!seg || !info || info->sz < offsetof(struct sseg_info, pages_reason))
		return sseg_err(-EINVAL, "sseg_info needs a segment and info with info->sz set");
	describe_core(seg, &out);
	sseg_backend_describe(seg, &out);
	n = info->sz < sizeof(out) ? info->sz : sizeof(out);
	memcpy(info, &out, n);
	info->sz = n;
	return 0;
}
