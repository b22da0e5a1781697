/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check copy: KV blocks to and from the device, from every kind of
 * host memory an engine may hold them in, with the memory type the driver
 * reports for each (what torch's is_pinned() answers). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "copy.h"
#include "driver.h"
#include "lines.h"
#include "ranks.h"

/* One MLA KV block run: 16 tokens x 576 (kv_lora_rank 512 + rope 64) x 2
 * bytes (bf16) x 61 layers (DeepSeek-V3), copied as one piece. */
#define MLA_BLOCK_RUN (16ull * 576 * 2 * 61)

static const size_t block_sizes[] = { 16 * KiB, 64 * KiB, 256 * KiB, MLA_BLOCK_RUN };
#define LARGEST_BLOCK MLA_BLOCK_RUN

struct copy_job {
	unsigned long long size;
	int reps;
	enum sseg_backend backend;
	const char *mechanism;
	int reference; /* also measure cuMemHostAlloc and malloc buffers */
	char name[64];
};

/* n random block indices (a fixed sequence per rank and block size). */
static void pick_blocks(size_t *idx, size_t n, size_t nblocks, unsigned seed)
{
	unsigned long long x = 0x9e3779b97f4a7c15ull ^ seed;

	for (size_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		idx[i] = (size_t)((x >> 33) % nblocks);
	}
}

/* GB/s of each rep, copying every picked block one call at a time, after
 * one untimed pass (first touches, the driver's staging), as the CPU
 * benchmark's rows are. */
static CUresult time_blocks(int to_device, unsigned char *host, CUdeviceptr dev, size_t bs,
			    const size_t *idx, size_t n, struct record *rec)
{
	for (int rep = -1; rep < rec->reps; rep++) {
		double t0 = now();

		for (size_t i = 0; i < n; i++) {
			CUresult r = to_device ? cu.cuMemcpyHtoD(dev, host + idx[i] * bs, bs)
					       : cu.cuMemcpyDtoH(host + idx[i] * bs, dev, bs);

			if (r != CUDA_SUCCESS)
				return r;
		}
		if (rep >= 0)
			rec->values[rep] = (double)(n * bs) / (now() - t0) / 1e9;
	}
	return CUDA_SUCCESS;
}

/* Both directions, every block size, over one host buffer. */
static CUresult copy_series(unsigned char *host, size_t size, CUdeviceptr dev, int rank,
			    struct record *tmpl, int out)
{
	size_t idx[2048];

	for (size_t b = 0; b < sizeof(block_sizes) / sizeof(block_sizes[0]); b++) {
		size_t bs = block_sizes[b], n = size / bs < 2048 ? size / bs : 2048;

		pick_blocks(idx, n, size / bs, (unsigned)(rank * 31 + b));
		for (int dir = 1; dir >= 0; dir--) {
			struct record rec = *tmpl;
			CUresult r = time_blocks(dir, host, dev, bs, idx, n, &rec);

			if (r != CUDA_SUCCESS)
				return r;
			snprintf(rec.bench, sizeof(rec.bench), "%s_kv_block",
				 dir ? "h2d" : "d2h");
			rec.size = bs;
			send_record(out, &rec);
		}
	}
	return CUDA_SUCCESS;
}

/* What the driver says host is: torch's is_pinned() is cudaPointerGetAttributes'
 * type == cudaMemoryTypeHost, and memory the driver does not know (pageable)
 * answers INVALID_VALUE, which torch reads as not pinned. */
static void report_memory_type(const char *mechanism, int rank, const void *host)
{
	unsigned int type = 0;
	CUresult r = cu.cuPointerGetAttribute
			     ? cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
							(CUdeviceptr)(uintptr_t)host)
			     : CUDA_ERROR_NOT_FOUND;
	struct json j;

	j_begin(&j, "memory_type");
	j_str(&j, "mechanism", mechanism);
	j_int(&j, "rank", rank);
	j_str(&j, "result", cu_name(r));
	j_str(&j, "memory_type", r != CUDA_SUCCESS	       ? "unknown to the driver"
				 : type == CU_MEMORYTYPE_HOST   ? "host"
				 : type == CU_MEMORYTYPE_DEVICE ? "device"
								: "other");
	j_bool(&j, "torch_is_pinned", r == CUDA_SUCCESS && type == CU_MEMORYTYPE_HOST);
	j_end(&j);
}

/* The same series from a buffer this rank allocates: cuMemHostAlloc (pinned
 * by the driver) or malloc (pageable: the driver stages every copy). */
static CUresult reference_series(size_t size, CUdeviceptr dev, int rank, int reps, int pinned,
				 int out)
{
	struct record tmpl = { .rank = rank, .ok = 1, .reps = reps };
	unsigned char *host = NULL;
	CUresult r = pinned ? cu.cuMemHostAlloc((void **)&host, size, 0) : CUDA_SUCCESS;

	if (!pinned && !(host = malloc(size)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (r != CUDA_SUCCESS)
		return r;
	pattern(host, size);
	snprintf(tmpl.mechanism, sizeof(tmpl.mechanism), pinned ? "cuMemHostAlloc" : "malloc");
	snprintf(tmpl.pages_requested, sizeof(tmpl.pages_requested), "-");
	snprintf(tmpl.pages_obtained, sizeof(tmpl.pages_obtained), pinned ? "pinned" : "pageable");
	report_memory_type(tmpl.mechanism, rank, host);
	r = copy_series(host, size, dev, rank, &tmpl, out);
	if (pinned)
		cu.cuMemFreeHost(host);
	else
		free(host);
	return r;
}

static int copy_segment(struct copy_job *job, sseg_t *seg, struct sseg_local_group *g, int rank,
			int out, struct record *fail)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct record tmpl = { .rank = rank, .ok = 1, .reps = job->reps };
	CUdeviceptr dev = 0;
	CUresult r;

	if (sseg_info(seg, &info) || barrier(g))
		return -1;
	if (info.is_owner)
		pattern(sseg_base(seg), info.size);
	/* A VMM peer's view is the handle imported in another process. */
	snprintf(tmpl.mechanism, sizeof(tmpl.mechanism), "%s%s", job->mechanism,
		 job->backend == SSEG_BACKEND_CUDA && !info.is_owner ? "-import" : "");
	snprintf(tmpl.pages_requested, sizeof(tmpl.pages_requested), "%s",
		 sseg_pages_name(job->backend == SSEG_BACKEND_MEMFD ? pages_wanted()
								     : SSEG_PAGES_AUTO));
	describe_pages(&info, tmpl.pages_obtained, sizeof(tmpl.pages_obtained));
	r = cu.cuMemAlloc(&dev, LARGEST_BLOCK);
	if (r == CUDA_SUCCESS)
		report_memory_type(tmpl.mechanism, rank, sseg_base(seg));
	if (r == CUDA_SUCCESS && barrier(g) == 0)
		r = copy_series(sseg_base(seg), info.size, dev, rank, &tmpl, out);
	if (r == CUDA_SUCCESS && job->reference)
		r = reference_series(info.size, dev, rank, job->reps, 1, out);
	if (r == CUDA_SUCCESS && job->reference)
		r = reference_series(info.size, dev, rank, job->reps, 0, out);
	if (dev)
		cu.cuMemFree(dev);
	if (r != CUDA_SUCCESS)
		snprintf(fail->error, sizeof(fail->error), "copy: %s", cu_name(r));
	return r == CUDA_SUCCESS ? barrier(g) : -1;
}

static int copy_rank(int rank, void *arg, int out)
{
	struct copy_job *job = arg;
	struct record fail = { .rank = rank };
	struct sseg_local_group *g = NULL;
	sseg_t *seg = NULL;
	int rc = -1;
	SSEG_OPTS(o, .name = job->name, .size = job->size, .world_size = 2, .rank = rank,
		  .backend = job->backend, .timeout_ms = 20000,
		  .pages = job->backend == SSEG_BACKEND_MEMFD ? pages_wanted() : SSEG_PAGES_AUTO,
		  .flags = job->backend == SSEG_BACKEND_MEMFD ? SSEG_F_HOST_REGISTER : 0);

	if (load_driver(fail.error, sizeof(fail.error)) == 0 && enter_device(0) == CUDA_SUCCESS &&
	    sseg_local_group_open(job->name, rank, 2, 20000, &g) == 0 &&
	    sseg_open(&o, sseg_local_allgather, g, &seg) == 0)
		rc = copy_segment(job, seg, g, rank, out, &fail);
	if (rc && !fail.error[0])
		snprintf(fail.error, sizeof(fail.error), "%s", sseg_last_error());
	if (seg)
		sseg_destroy(seg);
	if (g)
		sseg_local_group_close(g);
	if (rc)
		send_record(out, &fail);
	return rc ? 1 : 0;
}

int copy_main(unsigned long long size, int reps)
{
	static const struct {
		enum sseg_backend backend;
		const char *mechanism;
	} kinds[] = {
		{ SSEG_BACKEND_MEMFD, "sharedseg-memfd-hostreg" },
		{ SSEG_BACKEND_CUDA, "sharedseg-cuda-vmm" },
	};
	struct record recs[64] = { 0 };
	int failures = 0;

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		struct copy_job job = { .size = size, .reps = reps, .backend = kinds[k].backend,
					.mechanism = kinds[k].mechanism, .reference = k == 0 };
		int nrec = 0, failed;

		group_name(job.name, sizeof(job.name), "copy");
		failed = ranks_run(2, copy_rank, &job, recs, 64, &nrec);
		print_all_series(recs, nrec, "GB/s");
		report_failures("copy", recs, nrec, failed);
		failures += failed != 0;
	}
	return failures ? 1 : 0;
}
