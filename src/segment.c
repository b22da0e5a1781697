/* The segment's life: create (phase 1), complete (phase 3), destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cuda_device.h"
#include "driver/cuda.h"
#include "hostreg.h"
#include "layout.h"
#include "segment.h"

SSEG_HIDDEN int sseg_opts_load(struct sseg *seg, const struct sseg_opts *o);

int sseg_timeout_ms(const struct sseg *seg)
{
	return seg->opts.timeout_ms ? seg->opts.timeout_ms : SSEG_DEFAULT_TIMEOUT_MS;
}

static __thread char host_override[16];
static __thread bool host_overridden;

void sseg_test_host(const char *boot)
{
	host_overridden = boot != NULL;
	memset(host_override, 0, sizeof(host_override));
	if (boot)
		memcpy(host_override, boot, strnlen(boot, sizeof(host_override)));
}

int sseg_host_id(struct os_host_id *id)
{
	int rc = os_host_id(id);

	if (!rc && host_overridden)
		memcpy(id->boot_id, host_override, sizeof(id->boot_id));
	return rc;
}

static void fill_blob(const struct sseg *seg, struct sseg_blob *b)
{
	memset(b, 0, sizeof(*b));
	b->rank = (uint32_t)seg->opts.rank;
	b->world_size = (uint32_t)seg->opts.world_size;
	b->owner_rank = (uint32_t)seg->opts.owner_rank;
	b->size = seg->size;
	b->pages = seg->opts.pages;
	b->backend = seg->backend;
	b->flags = seg->opts.flags;
	b->populate = seg->opts.populate;
	b->layout_hash = seg->layout ? sseg_layout_hash(seg->layout) : 0;
	b->name_hash = sseg_hash64(seg->name, strlen(seg->name), 0);
	snprintf(b->name, sizeof(b->name), "%s", seg->name);
	b->host = seg->host;
	b->pid = (uint32_t)getpid();
	if (os_random(&b->nonce, sizeof(b->nonce)))
		b->nonce = (uint32_t)(sseg_now() * 1e9);
	b->fingerprint = sseg_blob_fingerprint(b);
}

static int prepare(struct sseg *seg, const struct sseg_opts *opts)
{
	char why[160];
	int rc;

	rc = sseg_opts_load(seg, opts);
	if (rc)
		return rc;
	seg->ops = sseg_backend_get(seg->backend);
	rc = sseg_backend_probe(seg->ops, why, sizeof(why));
	if (rc)
		return sseg_err(rc, "backend %s: %s", seg->ops->name, why);
	if (seg->opts.flags & SSEG_F_HOST_REGISTER) {
		const struct sseg_cuda *cuda;

		rc = sseg_cuda_get(&cuda);
		if (rc)
			return sseg_err_wrap(rc, "SSEG_F_HOST_REGISTER needs the CUDA driver");
	}
	return sseg_host_id(&seg->host);
}

int sseg_create(const struct sseg_opts *opts, sseg_t **out, void *blob)
{
	struct sseg_blob b;
	struct sseg *seg;
	double t0 = sseg_now();
	int rc;

	sseg_err_clear();
	if (!out)
		rc = sseg_err(-EINVAL, "the segment out-pointer is NULL");
	else if (!blob)
		rc = sseg_err(-EINVAL, "the blob buffer is NULL");
	else
		rc = 0;
	if (rc)
		goto fail_blob;
	*out = NULL;
	sseg_registry_retry_pending();
	seg = calloc(1, sizeof(*seg));
	if (!seg) {
		rc = sseg_err(-ENOMEM, "out of memory");
		goto fail_blob;
	}
	seg->memfd = -1;
	seg->channel_fd = -1;
	rc = prepare(seg, opts);
	if (!rc)
		rc = seg->is_owner ? sseg_backend_create_owner(seg) : sseg_backend_reserve(seg);
	if (rc)
		goto fail_release;
	fill_blob(seg, &b);
	if (seg->is_owner) {
		rc = sseg_backend_export(seg, &b.handle);
		if (rc)
			goto fail_release;
	}
	sseg_blob_encode(&b, seg->blob);
	memcpy(blob, seg->blob, SSEG_BLOB_SIZE);
	seg->create_s = sseg_now() - t0;
	*out = seg;
	return 0;

fail_release:
	{
		char why[SSEG_ERR_MAX];

		snprintf(why, sizeof(why), "%s", sseg_last_error());
		if (sseg_release(seg))
			sseg_registry_defer(seg, rc, "create");
		else
			free(seg);
		sseg_err(rc, "%s", why); /* the cause, not the cleanup's trouble */
	}
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
		if (blobs[r].owner_rank != (uint32_t)seg->opts.owner_rank)
			continue;
		if (r < seg->opts.rank)
			slice++;
		nslices++;
	}
	return sseg_populate_slice(seg, slice, nslices);
}

static int complete_owner(struct sseg *seg, const struct sseg_blob *blobs)
{
	int rc = sseg_backend_serve(seg, blobs);

	return rc ? rc : populate_spread(seg, blobs);
}

static int complete_peer(struct sseg *seg, const struct sseg_blob *blobs)
{
	int rc = sseg_backend_import(seg, blobs);

	return rc ? rc : populate_spread(seg, blobs);
}

int sseg_complete(sseg_t *seg, const void *raw)
{
	struct sseg_blob *blobs;
	double t0 = sseg_now();
	int rc;

	sseg_err_clear();
	if (!seg || !raw)
		return sseg_err(-EINVAL, "sseg_complete needs a segment and the blobs");
	if (seg->completed)
		return sseg_err(-EALREADY, "segment '%s' is already complete", seg->name);
	if (seg->failed)
		return sseg_err(-EINVAL,
				"segment '%s' failed in an earlier sseg_complete: destroy it and create "
				"again",
				seg->name);
	blobs = calloc((size_t)seg->opts.world_size, sizeof(*blobs));
	if (!blobs)
		return sseg_err(-ENOMEM, "out of memory");
	/* Verification takes nothing: the caller may fix the blobs and call
	 * again. A failure after it leaves stages half taken: destroy only. */
	rc = sseg_verify_blobs(seg, raw, blobs);
	if (rc) {
		free(blobs);
		return rc;
	}
	rc = seg->is_owner ? complete_owner(seg, blobs) : complete_peer(seg, blobs);
	free(blobs);
	if (!rc && (seg->opts.flags & SSEG_F_HOST_REGISTER))
		rc = sseg_hostreg_register(seg);
	if (rc) {
		seg->failed = 1;
		return rc;
	}
	if (seg->backend == SSEG_BACKEND_MEMFD) {
		sseg_pages_verify(seg);
		os_numa_where(seg->window, seg->mapped_size, seg->page_size, &seg->numa_nodes);
	}
	seg->completed = 1;
	seg->complete_s = sseg_now() - t0;
	sseg_registry_add(seg);
	return 0;
}

int sseg_release(struct sseg *seg)
{
	int rc;

	rc = sseg_hostreg_release(seg);
	if (!rc)
		rc = sseg_channel_release(seg);
	if (!rc && (seg->held & SSEG_HELD_MEMFD)) {
		close(seg->memfd);
		seg->memfd = -1;
		seg->held &= ~SSEG_HELD_MEMFD;
	}
	if (!rc)
		rc = sseg_backend_release(seg);
	if (!rc && (seg->held & SSEG_HELD_WINDOW)) {
		rc = os_window_release(seg->window, seg->window_size);
		if (!rc)
			seg->held &= ~SSEG_HELD_WINDOW;
	}
	if (!rc) {
		sseg_layout_destroy(seg->layout);
		seg->layout = NULL;
	}
	return rc;
}

#define DESTROY_TRIES 3

int sseg_destroy(sseg_t *seg)
{
	int rc;

	if (!seg)
		return 0;
	sseg_err_clear();
	rc = sseg_registry_remove(seg);
	if (rc)
		return rc;
	rc = sseg_release(seg);
	if (!rc) {
		free(seg);
		return 0;
	}
	if (++seg->destroy_failures < DESTROY_TRIES)
		return rc;
	sseg_registry_defer(seg, rc, "destroy");
	return sseg_err(-EINPROGRESS,
			"segment '%s' failed to tear down %d times; the library retries it on later "
			"creates (see sseg_cleanup_pending)",
			seg->name, DESTROY_TRIES);
}

void *sseg_base(const sseg_t *seg)
{
	return seg && seg->completed ? seg->window : NULL;
}

uint64_t sseg_size(const sseg_t *seg)
{
	return seg ? seg->size : 0;
}

int sseg_info(const sseg_t *seg, struct sseg_info *info)
{
	struct sseg_info out;
	size_t n;

	if (!seg || !info || info->sz < offsetof(struct sseg_info, pages_reason))
		return sseg_err(-EINVAL, "sseg_info needs a segment and info with info->sz set");
	memset(&out, 0, sizeof(out));
	out.sz = sizeof(out);
	out.backend = seg->backend;
	out.pages = seg->pages;
	out.page_size = seg->page_size;
	out.pages_verified = seg->pages_verified;
	out.huge_bytes = seg->huge_bytes;
	/* Huge pages show in smaps as they are faulted: measure now. */
	if (seg->completed && seg->backend == SSEG_BACKEND_MEMFD)
		os_huge_bytes(seg->window, seg->mapped_size, &out.huge_bytes);
	out.pages_verified = seg->pages_verified || out.huge_bytes > 0;
	out.base = sseg_base(seg);
	out.size = seg->size;
	out.mapped_size = seg->mapped_size;
	out.rank = seg->opts.rank;
	out.world_size = seg->opts.world_size;
	out.owner_rank = seg->opts.owner_rank;
	out.is_owner = seg->is_owner;
	out.readonly = seg->readonly;
	out.numa = seg->opts.numa;
	out.numa_node = seg->opts.numa_node;
	out.numa_nodes = seg->numa_nodes;
	out.create_s = seg->create_s;
	out.complete_s = seg->complete_s;
	out.populate_s = seg->populate_s;
	snprintf(out.pages_reason, sizeof(out.pages_reason), "%s", seg->pages_reason);
	out.device_addr = seg->backend == SSEG_BACKEND_CUDA ? sseg_cuda_segment_device_addr(seg)
							      : sseg_hostreg_device_addr(seg);
	out.device = seg->backend == SSEG_BACKEND_CUDA || (seg->opts.flags & SSEG_F_HOST_REGISTER)
			     ? seg->opts.device : -1;
	snprintf(out.handle_type, sizeof(out.handle_type), "%s",
		 seg->backend == SSEG_BACKEND_CUDA ? sseg_cuda_segment_handle_type(seg)
		 : seg->opts.world_size > 1	   ? "fd"
						   : "");
	out.registered_chunks = sseg_hostreg_chunks(seg);
	n = info->sz < sizeof(out) ? info->sz : sizeof(out);
	memcpy(info, &out, n);
	info->sz = n;
	return 0;
}
