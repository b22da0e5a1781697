/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check variants: quick sharing checks, two ranks each. */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "driver.h"
#include "lines.h"
#include "ranks.h"
#include "variants.h"

struct variant {
	const char *name;
	enum sseg_backend backend;
	uint32_t flags;
	enum sseg_populate populate;
	int odd_layout; /* entries of 12345 bytes, 64-byte aligned, 2 MiB chunks */
};

static const struct variant variants[] = {
	{ "readonly-cuda", SSEG_BACKEND_CUDA, SSEG_F_READONLY_PEERS, SSEG_POPULATE_OWNER, 0 },
	{ "readonly-hostreg", SSEG_BACKEND_MEMFD, SSEG_F_READONLY_PEERS | SSEG_F_HOST_REGISTER,
	  SSEG_POPULATE_OWNER, 0 },
	{ "odd-layout-hostreg", SSEG_BACKEND_MEMFD, SSEG_F_HOST_REGISTER, SSEG_POPULATE_OWNER, 1 },
	{ "spread-cuda", SSEG_BACKEND_CUDA, 0, SSEG_POPULATE_SPREAD, 0 },
};

struct variant_job {
	const struct variant *v;
	unsigned long long size;
	char name[64];
};

/* What the device reads at the segment's start is what the owner wrote. */
static int device_view(const unsigned char *base, size_t len, char *why, size_t wlen)
{
	unsigned char *back = malloc(len);
	CUdeviceptr dev = 0;
	CUresult r = back ? cu.cuMemAlloc(&dev, len) : CUDA_ERROR_OUT_OF_MEMORY;
	int ok;

	if (r == CUDA_SUCCESS)
		r = cu.cuMemcpyHtoD(dev, base, len);
	if (r == CUDA_SUCCESS)
		r = cu.cuMemcpyDtoH(back, dev, len);
	ok = r == CUDA_SUCCESS && pattern_holds(back, len);
	if (r != CUDA_SUCCESS)
		snprintf(why, wlen, "device copy of the segment failed: %s", cu_name(r));
	else if (!ok)
		snprintf(why, wlen, "the device read other bytes than the owner wrote");
	if (dev)
		cu.cuMemFree(dev);
	free(back);
	return ok ? 0 : -1;
}

static int check_segment(sseg_t *seg, struct sseg_local_group *g, int rank, struct record *rec,
			 uint32_t flags)
{
	struct sseg_info info = { .sz = sizeof(info) };
	unsigned char *base = sseg_base(seg);
	size_t window;

	if (sseg_info(seg, &info) || barrier(g))
		return -1;
	if (info.is_owner)
		pattern(base, info.size);
	if (barrier(g))
		return -1;
	snprintf(rec->handle_type, sizeof(rec->handle_type), "%s", info.handle_type);
	rec->registered_chunks = info.registered_chunks;
	rec->readonly = info.readonly;
	if (!pattern_holds(base, info.size)) {
		snprintf(rec->error, sizeof(rec->error), "rank %d reads other bytes", rank);
		return -1;
	}
	if (!!info.readonly != (!info.is_owner && (flags & SSEG_F_READONLY_PEERS))) {
		snprintf(rec->error, sizeof(rec->error), "rank %d readonly=%d", rank, info.readonly);
		return -1;
	}
	window = info.size < 4 * MiB ? info.size : 4 * MiB;
	if (device_view(base, window, rec->error, sizeof(rec->error)))
		return -1;
	return barrier(g);
}

static int odd_layout(unsigned long long size, struct sseg_layout **layout)
{
	struct sseg_block_desc block = { .name = "kv", .bytes = 12345 };

	block.count = size / 12352; /* the 64-byte stride */
	return sseg_layout_create(&block, 1, SSEG_LAYOUT_GROUPED, 64, layout);
}

static int run_variant(struct variant_job *job, int rank, struct record *rec)
{
	const struct variant *v = job->v;
	struct sseg_layout *layout = NULL;
	struct sseg_local_group *g = NULL;
	sseg_t *seg = NULL;
	int rc = 0;

	if (load_driver(rec->error, sizeof(rec->error)) || enter_device(0))
		return -1;
	if (v->odd_layout)
		rc = odd_layout(job->size, &layout);
	SSEG_OPTS(o, .name = job->name, .size = layout ? 0 : job->size, .world_size = 2,
		  .rank = rank, .backend = v->backend, .flags = v->flags, .populate = v->populate,
		  .pages = v->backend == SSEG_BACKEND_MEMFD ? pages_wanted() : SSEG_PAGES_AUTO,
		  .layout = layout, .register_chunk = layout ? 2 * MiB : 0, .timeout_ms = 20000);
	if (!rc)
		rc = sseg_local_group_open(job->name, rank, 2, 20000, &g);
	if (!rc)
		rc = sseg_open(&o, sseg_local_allgather, g, &seg);
	if (!rc)
		rc = check_segment(seg, g, rank, rec, v->flags);
	if (rc && !rec->error[0])
		snprintf(rec->error, sizeof(rec->error), "%s", sseg_last_error());
	if (seg && sseg_destroy(seg) && !rc) {
		snprintf(rec->error, sizeof(rec->error), "destroy: %s", sseg_last_error());
		rc = -1;
	}
	if (g)
		sseg_local_group_close(g);
	sseg_layout_destroy(layout);
	return rc;
}

static int variant_rank(int rank, void *arg, int out)
{
	struct record rec = { .rank = rank };
	int rc = run_variant(arg, rank, &rec);

	rec.ok = rc == 0;
	send_record(out, &rec);
	return rc ? 1 : 0;
}

int variants_main(unsigned long long size)
{
	struct record recs[MAX_RANKS] = { 0 };
	int failed_variants = 0;

	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		struct variant_job job = { .v = &variants[i], .size = size };
		int nrec = 0, failed;
		struct json j;

		group_name(job.name, sizeof(job.name), "variant");
		failed = ranks_run(2, variant_rank, &job, recs, MAX_RANKS, &nrec);
		j_begin(&j, "variant");
		j_str(&j, "variant", variants[i].name);
		j_str(&j, "result", failed || nrec != 2 ? "fail" : "pass");
		j_int(&j, "ranks", 2);
		for (int r = 0; r < nrec; r++) {
			char key[32];

			snprintf(key, sizeof(key), "rank%d", recs[r].rank);
			j_str(&j, key, recs[r].ok ? recs[r].handle_type : recs[r].error);
		}
		if (nrec == 2)
			j_int(&j, "registered_chunks", recs[0].registered_chunks);
		j_end(&j);
		failed_variants += failed != 0;
	}
	return failed_variants ? 1 : 0;
}
