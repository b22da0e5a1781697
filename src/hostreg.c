/* Host registration (SSEG_F_HOST_REGISTER): each rank pins its own mapping
 * for GPU DMA with cuMemHostRegister, in chunks, because one registration of
 * 512 GiB or more fails on current drivers; chunks are cut between layout
 * entries so that no copy of an entry straddles two registrations. */
#include <stdio.h>
#include <stdlib.h>

#include "driver/cuda.h"
#include "hostreg.h"
#include "layout.h"

#define DEFAULT_CHUNK (64ull << 30)

struct sseg_hostreg {
	const struct sseg_cuda *cuda;
	CUdevice device;
	CUcontext ctx;
	int ctx_held;
	int nchunks;
	int registered; /* chunks [0, registered) are registered */
	uint64_t *cuts; /* nchunks + 1 offsets */
	CUdeviceptr device_addr;
};

/* Chunk boundaries: at most chunk bytes apart, moved back to the start of
 * any entry they would cut. */
static int add_cut(struct sseg_hostreg *reg, uint64_t at, size_t *cap)
{
	if ((size_t)reg->nchunks + 2 > *cap) {
		size_t n = *cap ? *cap * 2 : 16;
		uint64_t *cuts = realloc(reg->cuts, n * sizeof(*cuts));

		if (!cuts)
			return sseg_err(-ENOMEM, "out of memory");
		reg->cuts = cuts;
		*cap = n;
	}
	reg->cuts[reg->nchunks++] = at;
	return 0;
}

/* Chunk boundaries: at most chunk bytes apart, moved back to the start of
 * any entry they would cut. */
static int plan_chunks(struct sseg *seg, uint64_t chunk, struct sseg_hostreg *reg)
{
	uint64_t at = 0;
	size_t cap = 0;
	int rc;

	while (at < seg->mapped_size) {
		uint64_t end = at + chunk < seg->mapped_size ? at + chunk : seg->mapped_size;

		if (end < seg->mapped_size && seg->layout && end < sseg_layout_size(seg->layout))
			end = sseg_layout_cut_before(seg->layout, end);
		if (end <= at)
			return sseg_err(-EINVAL,
					"a layout entry at offset %llu is larger than the registration "
					"chunk of %llu bytes: raise register_chunk",
					(unsigned long long)at, (unsigned long long)chunk);
		rc = add_cut(reg, at, &cap);
		if (rc)
			return rc;
		at = end;
	}
	reg->cuts[reg->nchunks] = seg->mapped_size; /* add_cut left room for it */
	return 0;
}

static int enter_context(struct sseg_hostreg *reg, int ordinal)
{
	const struct sseg_cuda *cu = reg->cuda;
	int rc;

	rc = sseg_cuda_result(cu->cuDeviceGet(&reg->device, ordinal), "cuDeviceGet");
	if (!rc)
		rc = sseg_cuda_result(cu->cuDevicePrimaryCtxRetain(&reg->ctx, reg->device),
				      "cuDevicePrimaryCtxRetain");
	if (rc)
		return rc;
	reg->ctx_held = 1;
	return 0;
}

static int register_chunks(struct sseg *seg, struct sseg_hostreg *reg)
{
	unsigned flags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;
	char call[96];
	int rc;

	if (seg->readonly)
		flags |= CU_MEMHOSTREGISTER_READ_ONLY;
	while (reg->registered < reg->nchunks) {
		uint64_t lo = reg->cuts[reg->registered], hi = reg->cuts[reg->registered + 1];

		snprintf(call, sizeof(call), "cuMemHostRegister of chunk %d of %d (%llu bytes)",
			 reg->registered + 1, reg->nchunks, (unsigned long long)(hi - lo));
		rc = sseg_cuda_result(reg->cuda->cuMemHostRegister((char *)seg->window + lo, hi - lo,
								   flags),
				      call);
		if (rc)
			return rc;
		reg->registered++;
	}
	return sseg_cuda_result(reg->cuda->cuMemHostGetDevicePointer(&reg->device_addr,
								      seg->window, 0),
				"cuMemHostGetDevicePointer");
}

int sseg_hostreg_register(struct sseg *seg)
{
	uint64_t chunk = seg->opts.register_chunk ? seg->opts.register_chunk : DEFAULT_CHUNK;
	struct sseg_hostreg *reg;
	CUcontext saved;
	int rc;

	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return sseg_err(-ENOMEM, "out of memory");
	seg->hostreg = reg;
	seg->held |= SSEG_HELD_HOSTREG;
	rc = sseg_cuda_get(&reg->cuda);
	if (rc)
		return sseg_err_wrap(rc, "SSEG_F_HOST_REGISTER needs the CUDA driver");
	rc = plan_chunks(seg, chunk, reg);
	if (!rc)
		rc = enter_context(reg, seg->opts.device);
	if (!rc)
		rc = sseg_cuda_enter(reg->cuda, reg->ctx, &saved);
	if (rc)
		return rc;
	rc = register_chunks(seg, reg);
	sseg_cuda_leave(reg->cuda, saved);
	return rc;
}

/* Resumable: unregisters the remaining chunks last to first, then drops the
 * context; a failure leaves the rest for the next call. */
static int unregister_chunks(struct sseg *seg, struct sseg_hostreg *reg)
{
	while (reg->registered > 0) {
		void *p = (char *)seg->window + reg->cuts[reg->registered - 1];
		int rc = sseg_cuda_result(reg->cuda->cuMemHostUnregister(p), "cuMemHostUnregister");

		if (rc)
			return rc;
		reg->registered--;
	}
	return 0;
}

/* Resumable: unregisters the remaining chunks last to first, then drops the
 * context; a failure leaves the rest for the next call. Destroy may run on
 * another thread than register did: the context is made current here. */
int sseg_hostreg_release(struct sseg *seg)
{
	struct sseg_hostreg *reg = seg->hostreg;
	CUcontext saved;
	int rc;

	if (!(seg->held & SSEG_HELD_HOSTREG))
		return 0;
	if (reg->registered > 0) {
		rc = sseg_cuda_enter(reg->cuda, reg->ctx, &saved);
		if (rc)
			return rc;
		rc = unregister_chunks(seg, reg);
		sseg_cuda_leave(reg->cuda, saved);
		if (rc)
			return rc;
	}
	if (reg->ctx_held) {
		rc = sseg_cuda_result(reg->cuda->cuDevicePrimaryCtxRelease(reg->device),
				      "cuDevicePrimaryCtxRelease");
		if (rc)
			return rc;
		reg->ctx_held = 0;
	}
	free(reg->cuts);
	free(reg);
	seg->hostreg = NULL;
	seg->held &= ~SSEG_HELD_HOSTREG;
	return 0;
}

uint64_t sseg_hostreg_device_addr(const struct sseg *seg)
{
	return seg->hostreg ? seg->hostreg->device_addr : 0;
}

int sseg_hostreg_chunks(const struct sseg *seg)
{
	return seg->hostreg ? seg->hostreg->registered : 0;
}
