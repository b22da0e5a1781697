/* The cuda backend: the segment is CUDA VMM host memory (cuMemCreate on a
 * HOST_NUMA location), pinned for DMA by construction. Peers get it as a
 * fabric handle in the owner's blob when a real create-and-export probe
 * passed, else as a POSIX fd over the core's fd channel. Every driver
 * resource is a stage released in reverse order; a handle is released at
 * most once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cuda_device.h"
#include "fdchannel.h"
#include "registry.h"

enum cuda_stage {
	CU_HELD_CTX = 1u << 0,
	CU_HELD_HANDLE = 1u << 1,
	CU_HELD_RESERVED = 1u << 2,
	CU_HELD_MAPPED = 1u << 3,
	CU_HELD_FD = 1u << 4,
};

struct cuda_state {
	const struct sseg_cuda *cu;
	CUdevice device;
	CUcontext ctx;
	uint32_t held;
	CUmemGenericAllocationHandle handle;
	CUdeviceptr ptr;
	uint64_t reserved;
	int export_fd;
	int fabric;
	int node;
};

static struct cuda_state *state(struct sseg *seg)
{
	return seg->backend_state;
}

static int cuda_probe(struct sseg_probe_backend *facts)
{
	const struct sseg_cuda *cu;
	int rc = sseg_cuda_usable(facts->reason, sizeof(facts->reason));
	int count = 0;

	facts->host_register = 0;
	if (sseg_cuda_get(&cu))
		return rc;
	snprintf(facts->driver, sizeof(facts->driver), "%s", cu->path);
	facts->driver_version = cu->version;
	facts->host_register = 1;
	if (cu->cuDeviceGetCount(&count) == CUDA_SUCCESS)
		facts->ndevices = count;
	return rc;
}

/* VMM host memory comes at the driver's granularity, pinned: the page kinds
 * of host memory do not apply, so only auto is honest. */
static int cuda_choose_pages(enum sseg_pages req, uint64_t size, struct sseg_page_choice *c)
{
	memset(c, 0, sizeof(*c));
	if (req != SSEG_PAGES_AUTO)
		return sseg_err(-EOPNOTSUPP,
				"pages=%s: the cuda backend allocates pinned VMM host memory at the "
				"driver's granularity; pages must be auto (sseg_info reports the "
				"granularity obtained)",
				sseg_pages_name(req));
	c->pages = SSEG_PAGES_AUTO;
	snprintf(c->reason, sizeof(c->reason), "CUDA VMM pinned host memory");
	(void)size;
	return 0;
}

static int cuda_check_opts(const struct sseg_opts *o)
{
	struct sseg_page_choice c;

	return cuda_choose_pages(o->pages, 0, &c);
}

/* Takes the backend state and retains this rank's device context; each
 * op makes it current for its driver calls and puts the caller's back. */
static int enter(struct sseg *seg)
{
	struct cuda_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return sseg_err(-ENOMEM, "out of memory");
	st->export_fd = -1;
	seg->backend_state = st;
	seg->held |= SSEG_HELD_BACKEND;
	rc = sseg_cuda_get(&st->cu);
	if (!rc)
		rc = sseg_cuda_device(st->cu, seg->opts.device, SSEG_CUDA_NEED_VMM_HOST, &st->device);
	if (!rc)
		rc = sseg_cuda_result(st->cu->cuDevicePrimaryCtxRetain(&st->ctx, st->device),
				      "cuDevicePrimaryCtxRetain");
	if (rc)
		return rc;
	st->held |= CU_HELD_CTX;
	return 0;
}

static void allocation_prop(const struct cuda_state *st, CUmemAllocationProp *prop)
{
	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->requestedHandleTypes = st->fabric ? CU_MEM_HANDLE_TYPE_FABRIC
						: CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	prop->location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop->location.id = st->node;
}

static int size_segment(struct sseg *seg, const CUmemAllocationProp *prop)
{
	struct cuda_state *st = state(seg);
	size_t gran = 0;
	int rc;

	rc = sseg_cuda_result(st->cu->cuMemGetAllocationGranularity(
				      &gran, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
			      "cuMemGetAllocationGranularity");
	if (rc)
		return rc;
	if (!sseg_is_pow2(gran))
		return sseg_err(-EINVAL, "the driver's allocation granularity %zu is not a power of two",
				gran);
	if (sseg_round_up(seg->size, gran, &seg->mapped_size))
		return sseg_err(-EOVERFLOW, "size %llu overflows when padded to the granularity %zu",
				(unsigned long long)seg->size, gran);
	seg->page_size = gran;
	seg->pages = SSEG_PAGES_AUTO;
	rc = sseg_memory_fits(seg->mapped_size, "the segment (pinned host memory)");
	if (rc)
		return rc;
	snprintf(seg->pages_reason, sizeof(seg->pages_reason),
		 "CUDA VMM pinned host memory on node %d, granularity %zu", st->node, gran);
	return 0;
}

/* Reserve, map and grant access: the steps owner and peers share. */
static int map_handle(struct sseg *seg)
{
	struct cuda_state *st = state(seg);
	CUmemAccessDesc *desc;
	size_t n;
	int rc;

	rc = sseg_cuda_result(st->cu->cuMemAddressReserve(&st->ptr, seg->mapped_size,
							  seg->page_size, 0, 0),
			      "cuMemAddressReserve");
	if (rc)
		return rc;
	st->reserved = seg->mapped_size;
	st->held |= CU_HELD_RESERVED;
	rc = sseg_cuda_result(st->cu->cuMemMap(st->ptr, seg->mapped_size, 0, st->handle, 0),
			      "cuMemMap");
	if (rc)
		return rc;
	st->held |= CU_HELD_MAPPED;
	rc = sseg_cuda_access_list(st->cu, st->node, seg->readonly, &desc, &n);
	if (rc)
		return rc;
	rc = sseg_cuda_result(st->cu->cuMemSetAccess(st->ptr, seg->mapped_size, desc, n),
			      "cuMemSetAccess");
	free(desc);
	if (rc)
		return rc;
	seg->base = (void *)(uintptr_t)st->ptr;
	return 0;
}

static int allocate(struct sseg *seg)
{
	struct cuda_state *st = state(seg);
	CUmemAllocationProp prop;
	int rc;

	rc = sseg_cuda_placement(st->cu, seg, st->device, &st->node);
	if (rc)
		return rc;
	st->fabric = sseg_cuda_fabric_works(st->cu, st->device, st->node);
	allocation_prop(st, &prop);
	rc = size_segment(seg, &prop);
	if (!rc)
		rc = sseg_cuda_result(st->cu->cuMemCreate(&st->handle, seg->mapped_size, &prop, 0),
				      "cuMemCreate");
	if (rc)
		return rc;
	st->held |= CU_HELD_HANDLE;
	rc = map_handle(seg);
	if (rc)
		return rc;
	if (!st->fabric) {
		rc = sseg_cuda_result(st->cu->cuMemExportToShareableHandle(
					      &st->export_fd, st->handle,
					      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
				      "cuMemExportToShareableHandle(POSIX fd)");
		if (rc)
			return rc;
		st->held |= CU_HELD_FD;
	}
	/* The channel is the barrier for fabric peers too: the owner must not
	 * release its handle before every local peer imported it. */
	return sseg_channel_listen(seg);
}

static int cuda_create_owner(struct sseg *seg)
{
	struct cuda_state *st;
	CUcontext saved;
	int rc = enter(seg);

	if (rc)
		return rc;
	st = state(seg);
	rc = sseg_cuda_enter(st->cu, st->ctx, &saved);
	if (rc)
		return rc;
	rc = allocate(seg);
	sseg_cuda_leave(st->cu, saved);
	return rc;
}

static int cuda_reserve(struct sseg *seg)
{
	return enter(seg);
}

static int cuda_export(struct sseg *seg, struct sseg_blob_handle *h)
{
	struct cuda_state *st = state(seg);
	CUmemFabricHandle fabric;
	CUcontext saved;
	int rc;

	h->kind = st->fabric ? SSEG_HANDLE_FABRIC : SSEG_HANDLE_FD_CHANNEL;
	sseg_channel_describe(seg, h);
	if (!st->fabric)
		return 0;
	_Static_assert(sizeof(fabric) <= SSEG_HANDLE_DATA_LEN, "fabric handle fits the blob");
	rc = sseg_cuda_enter(st->cu, st->ctx, &saved);
	if (rc)
		return rc;
	rc = sseg_cuda_result(st->cu->cuMemExportToShareableHandle(&fabric, st->handle,
								   CU_MEM_HANDLE_TYPE_FABRIC, 0),
			      "cuMemExportToShareableHandle(fabric)");
	sseg_cuda_leave(st->cu, saved);
	if (!rc)
		memcpy(h->data, &fabric, sizeof(fabric));
	return rc;
}

static int cuda_serve(struct sseg *seg, const struct sseg_blob *blobs)
{
	struct cuda_state *st = state(seg);
	int rc;

	rc = sseg_channel_hand_over(seg, blobs, st->fabric ? -1 : st->export_fd, NULL);
	if (rc)
		return rc;
	if (st->held & CU_HELD_FD) {
		close(st->export_fd);
		st->export_fd = -1;
		st->held &= ~CU_HELD_FD;
	}
	return 0;
}

static int import_handle(struct sseg *seg, const struct sseg_blob *owner, int fd)
{
	struct cuda_state *st = state(seg);
	CUmemFabricHandle fabric;
	int rc;

	if (owner->handle.kind == SSEG_HANDLE_FABRIC) {
		memcpy(&fabric, owner->handle.data, sizeof(fabric));
		rc = sseg_cuda_result(st->cu->cuMemImportFromShareableHandle(
					      &st->handle, &fabric, CU_MEM_HANDLE_TYPE_FABRIC),
				      "cuMemImportFromShareableHandle(fabric)");
	} else {
		rc = sseg_cuda_result(st->cu->cuMemImportFromShareableHandle(
					      &st->handle, (void *)(uintptr_t)fd,
					      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
				      "cuMemImportFromShareableHandle(POSIX fd)");
	}
	if (rc)
		return rc;
	st->held |= CU_HELD_HANDLE;
	st->fabric = owner->handle.kind == SSEG_HANDLE_FABRIC;
	seg->mapped_size = owner->handle.mapped_size;
	seg->page_size = owner->handle.page_size;
	seg->pages = (enum sseg_pages)owner->handle.pages;
	return map_handle(seg);
}

static int cuda_import(struct sseg *seg, const struct sseg_blob *blobs)
{
	const struct sseg_blob *owner = &blobs[seg->opts.owner_rank];
	bool fabric = owner->handle.kind == SSEG_HANDLE_FABRIC;
	int fd = -1, sock, rc;
	CUcontext saved;

	/* Another host's owner (one NVLink domain): the fabric handle is all
	 * there is; the caller's own barrier keeps the owner alive meanwhile. */
	if (!sseg_blob_same_host(owner, &blobs[seg->opts.rank])) {
		rc = sseg_cuda_enter(state(seg)->cu, state(seg)->ctx, &saved);
		if (rc)
			return rc;
		rc = import_handle(seg, owner, -1);
		sseg_cuda_leave(state(seg)->cu, saved);
		return rc;
	}
	/* Reach the owner first, so that any failure below reaches it as an
	 * ack instead of a silent wait for its timeout. */
	rc = sseg_channel_fetch(seg, owner, fabric ? NULL : &fd, &sock);
	if (rc)
		return rc;
	rc = sseg_cuda_enter(state(seg)->cu, state(seg)->ctx, &saved);
	if (!rc) {
		rc = import_handle(seg, owner, fd);
		sseg_cuda_leave(state(seg)->cu, saved);
	}
	if (fd >= 0)
		close(fd);
	if (sseg_channel_ack(sock, rc, sseg_timeout_ms(seg)) && !rc)
		sseg_log(SSEG_LOG_WARN, "segment '%s': could not confirm the import to owner rank %u",
			 seg->name, owner->rank);
	return rc;
}

/* One stage: marked released only after the call succeeded. */
static int release_stage(struct cuda_state *st, uint32_t stage, CUresult r, const char *call)
{
	int rc = sseg_cuda_result(r, call);

	if (!rc)
		st->held &= ~stage;
	return rc;
}

/* cuMemRelease at most once per handle: marked consumed before the call.
 * A failure is returned and counted (sseg_abandoned_handles), and the next
 * destroy goes on with the stages after it: the handle's state is
 * unknown, so it is never released again. */
static int release_handle(struct sseg *seg, struct cuda_state *st)
{
	int rc;

	st->held &= ~CU_HELD_HANDLE;
	rc = sseg_cuda_result(st->cu->cuMemRelease(st->handle), "cuMemRelease");
	if (rc) {
		sseg_registry_abandoned();
		sseg_log(SSEG_LOG_ERROR,
			 "segment '%s': %s; the handle is not released again (its state is unknown)",
			 seg->name, sseg_last_error());
		return sseg_err_wrap(rc, "segment '%s': the driver handle was abandoned",
				     seg->name);
	}
	return 0;
}

static int release_stages(struct sseg *seg, struct cuda_state *st)
{
	int rc = 0;

	if (st->held & CU_HELD_MAPPED)
		rc = release_stage(st, CU_HELD_MAPPED, st->cu->cuMemUnmap(st->ptr, st->reserved),
				   "cuMemUnmap");
	if (!rc && (st->held & CU_HELD_RESERVED))
		rc = release_stage(st, CU_HELD_RESERVED,
				   st->cu->cuMemAddressFree(st->ptr, st->reserved),
				   "cuMemAddressFree");
	if (!rc && (st->held & CU_HELD_HANDLE))
		rc = release_handle(seg, st);
	if (!rc && (st->held & CU_HELD_FD)) {
		close(st->export_fd);
		st->held &= ~CU_HELD_FD;
	}
	if (!rc && (st->held & CU_HELD_CTX))
		rc = release_stage(st, CU_HELD_CTX, st->cu->cuDevicePrimaryCtxRelease(st->device),
				   "cuDevicePrimaryCtxRelease");
	return rc;
}

static int cuda_release(struct sseg *seg)
{
	struct cuda_state *st = state(seg);
	CUcontext saved = NULL;
	bool entered = false;
	int rc = 0;

	if (!st)
		return 0; /* enter() failed before taking anything */
	/* Destroy may run on another thread than create: make the context
	 * current here, and the caller's again afterwards. */
	if ((st->held & CU_HELD_CTX) && (st->held & ~CU_HELD_CTX)) {
		rc = sseg_cuda_enter(st->cu, st->ctx, &saved);
		entered = !rc;
	}
	if (!rc)
		rc = release_stages(seg, st);
	if (entered)
		sseg_cuda_leave(st->cu, saved);
	if (rc)
		return rc;
	free(st);
	seg->backend_state = NULL;
	seg->base = NULL;
	seg->held &= ~SSEG_HELD_BACKEND;
	return 0;
}

static void cuda_describe(const struct sseg *seg, struct sseg_info *info)
{
	const struct cuda_state *st = seg->backend_state;

	info->device = seg->opts.device;
	info->pinned = 1;
	info->pages_verified = st && (st->held & CU_HELD_MAPPED);
	if (!st)
		return;
	info->device_addr = (st->held & CU_HELD_MAPPED) ? st->ptr : 0;
	snprintf(info->handle_type, sizeof(info->handle_type), "%s",
		 st->fabric ? "cuda-fabric" : "cuda-fd");
}

/* The exported fd only: driver state does not survive fork anyway. */
static void cuda_forget_in_child(struct sseg *seg)
{
	struct cuda_state *st = state(seg);

	if (st && (st->held & CU_HELD_FD)) {
		close(st->export_fd);
		st->held &= ~CU_HELD_FD;
	}
}

const struct sseg_backend_ops sseg_cuda_ops = {
	.kind = SSEG_BACKEND_CUDA,
	.name = "cuda",
	.caps = SSEG_CAP_PINNED | SSEG_CAP_DEVICES | SSEG_CAP_FABRIC,
	.hostreg = &sseg_cuda_hostreg_ops,
	.probe = cuda_probe,
	.probe_device = sseg_cuda_probe_device,
	.choose_pages = cuda_choose_pages,
	.check_opts = cuda_check_opts,
	.create_owner = cuda_create_owner,
	.reserve = cuda_reserve,
	.export_handle = cuda_export,
	.serve = cuda_serve,
	.import_and_map = cuda_import,
	.describe = cuda_describe,
	.forget_in_child = cuda_forget_in_child,
	.release = cuda_release,
};
