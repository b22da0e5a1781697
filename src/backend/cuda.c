/* SPDX-License-Identifier: Apache-2.0 */
/* The cuda backend: the segment is CUDA VMM host memory (cuMemCreate on a
 * HOST_NUMA location), pinned for DMA by construction. The owner always
 * exports a POSIX fd, which the peers on its host collect over the core's
 * fd channel; where a real fabric probe passed, the allocation carries a
 * fabric handle too, in the owner's blob, for ranks on other hosts of one
 * NVLink domain. Every driver resource is a stage released in reverse
 * order; a handle is released at most once. */
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
	int fabric;       /* owner: its blob carries a fabric handle; peer: imported one */
	int node;         /* the memory's host node: the owner's */
	char owner_uuid[48]; /* the owner's GPU, for messages; "" unknown */
};

/* The handle section's data, this backend's own: the fabric handle (zero
 * without one), the owner GPU's UUID and whether it is known, the owner's
 * host node (little-endian). */
enum {
	DATA_FABRIC = 0,
	DATA_UUID = CU_IPC_HANDLE_SIZE,
	DATA_HAS_UUID = DATA_UUID + 16,
	DATA_NODE = DATA_HAS_UUID + 4,
	DATA_END = DATA_NODE + 4,
};
_Static_assert(DATA_END <= SSEG_HANDLE_DATA_LEN, "the handle data holds the cuda section");

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
	struct sseg_cuda_grant grant;
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
	grant = (struct sseg_cuda_grant){ .ptr = st->ptr, .size = seg->mapped_size,
					  .node = st->node, .readonly = seg->readonly,
					  .own = st->device, .name = seg->name,
					  .owner_uuid = st->owner_uuid };
	rc = sseg_cuda_grant_access(st->cu, &grant);
	if (rc)
		return rc;
	seg->base = (void *)(uintptr_t)st->ptr;
	return 0;
}

/* NOT_PERMITTED or NOT_SUPPORTED for the fabric type: the allocation goes
 * on with the fd alone (NCCL retries its cuMemCreate the same way). */
static CUresult create_handle(struct sseg *seg, CUmemAllocationProp *prop)
{
	struct cuda_state *st = state(seg);
	CUresult r = st->cu->cuMemCreate(&st->handle, seg->mapped_size, prop, 0);

	if (st->fabric && (r == CUDA_ERROR_NOT_PERMITTED || r == CUDA_ERROR_NOT_SUPPORTED)) {
		sseg_log(SSEG_LOG_INFO,
			 "segment '%s': cuMemCreate with a fabric handle failed (%s): POSIX fds "
			 "only, so ranks on other hosts cannot import it",
			 seg->name, sseg_cuda_error_name(r));
		st->fabric = 0;
		prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
		r = st->cu->cuMemCreate(&st->handle, seg->mapped_size, prop, 0);
	}
	return r;
}

static int export_fd(struct cuda_state *st)
{
	int rc = sseg_cuda_result(st->cu->cuMemExportToShareableHandle(
					  &st->export_fd, st->handle,
					  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
				  "cuMemExportToShareableHandle(POSIX fd)");

	if (!rc)
		st->held |= CU_HELD_FD;
	return rc;
}

/* The owner's GPU made the memory; messages name it. */
static void know_own_gpu(struct cuda_state *st)
{
	CUuuid uuid;

	if (sseg_cuda_uuid(st->cu, st->device, &uuid))
		sseg_cuda_uuid_text(&uuid, st->owner_uuid, sizeof(st->owner_uuid));
}

static int allocate(struct sseg *seg)
{
	struct cuda_state *st = state(seg);
	CUmemAllocationProp prop;
	CUresult r;
	int rc;

	rc = sseg_cuda_placement(st->cu, seg, st->device, &st->node);
	if (rc)
		return rc;
	know_own_gpu(st);
	st->fabric = sseg_cuda_fabric_works(st->cu, st->device, st->node);
	sseg_cuda_host_prop(&prop, st->node,
			    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR |
				    (st->fabric ? CU_MEM_HANDLE_TYPE_FABRIC : 0));
	rc = size_segment(seg, &prop);
	if (rc)
		return rc;
	r = create_handle(seg, &prop);
	rc = r == CUDA_ERROR_OUT_OF_MEMORY
		     ? sseg_cuda_result(r, "cuMemCreate(HOST_NUMA)")
		     : sseg_cuda_result_hint(r, "cuMemCreate(HOST_NUMA)", sseg_cuda_host_numa_hint());
	if (rc)
		return rc;
	st->held |= CU_HELD_HANDLE;
	rc = map_handle(seg);
	if (!rc)
		rc = export_fd(st);
	/* The channel is the barrier for other hosts' peers too: the owner
	 * must not release its handle before its own host's peers imported. */
	return rc ? rc : sseg_channel_listen(seg);
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

/* The owner GPU's UUID (peers name it in errors) and
 * the memory's node (peers' host access entry). */
static void describe_owner(struct cuda_state *st, struct sseg_blob_handle *h)
{
	CUuuid uuid;

	if (sseg_cuda_uuid(st->cu, st->device, &uuid)) {
		memcpy(h->data + DATA_UUID, uuid.bytes, sizeof(uuid.bytes));
		h->data[DATA_HAS_UUID] = 1;
	}
	sseg_put32(h->data + DATA_NODE, (uint32_t)st->node);
}

/* A fabric handle that cannot be exported leaves the fd: this host's
 * peers are served all the same, other hosts' are refused by verify. */
static void export_fabric(struct sseg *seg, struct sseg_blob_handle *h)
{
	struct cuda_state *st = state(seg);
	CUmemFabricHandle fabric;
	CUcontext saved;
	bool entered = sseg_cuda_enter(st->cu, st->ctx, &saved) == 0;
	CUresult r;

	_Static_assert(sizeof(fabric) == DATA_UUID - DATA_FABRIC, "fabric handle size");
	r = entered ? st->cu->cuMemExportToShareableHandle(&fabric, st->handle,
							   CU_MEM_HANDLE_TYPE_FABRIC, 0)
		    : CUDA_ERROR_INVALID_CONTEXT;
	if (entered)
		sseg_cuda_leave(st->cu, saved);
	if (r != CUDA_SUCCESS) {
		sseg_log(SSEG_LOG_INFO, "segment '%s': exporting its fabric handle failed (%s): "
			 "ranks on other hosts cannot import it", seg->name,
			 sseg_cuda_error_name(r));
		st->fabric = 0;
		return;
	}
	memcpy(h->data + DATA_FABRIC, &fabric, sizeof(fabric));
	h->kind = SSEG_HANDLE_FABRIC;
}

static int cuda_export(struct sseg *seg, struct sseg_blob_handle *h)
{
	struct cuda_state *st = state(seg);

	h->kind = SSEG_HANDLE_FD_CHANNEL;
	sseg_channel_describe(seg, h);
	describe_owner(st, h);
	if (st->fabric)
		export_fabric(seg, h);
	return 0;
}

static int cuda_serve(struct sseg *seg, const struct sseg_blob *blobs)
{
	struct cuda_state *st = state(seg);
	int rc;

	rc = sseg_channel_hand_over(seg, blobs, st->export_fd, NULL);
	if (rc)
		return rc;
	close(st->export_fd);
	st->export_fd = -1;
	st->held &= ~CU_HELD_FD;
	return 0;
}

/* What the owner's blob says of the memory: its node, its GPU. */
static void read_owner(struct cuda_state *st, const struct sseg_blob_handle *h)
{
	CUuuid uuid;

	st->node = (int32_t)sseg_get32(h->data + DATA_NODE);
	if (!h->data[DATA_HAS_UUID])
		return;
	memcpy(uuid.bytes, h->data + DATA_UUID, sizeof(uuid.bytes));
	sseg_cuda_uuid_text(&uuid, st->owner_uuid, sizeof(st->owner_uuid));
}

/* Without the owner's IMEX channel a fabric import is NOT_PERMITTED
 * (cuda.h); other refusals are the device's (peer access). */
static int import_fabric(struct cuda_state *st, const struct sseg_blob_handle *h)
{
	static const char call[] = "cuMemImportFromShareableHandle(fabric)";
	CUmemFabricHandle fabric;
	CUresult r;

	memcpy(&fabric, h->data + DATA_FABRIC, sizeof(fabric));
	r = st->cu->cuMemImportFromShareableHandle(&st->handle, &fabric, CU_MEM_HANDLE_TYPE_FABRIC);
	if (r == CUDA_ERROR_NOT_PERMITTED)
		return sseg_cuda_result_hint(
			r, call,
			"this process has no access to the owner's IMEX channel (fabric handles "
			"cross hosts through the IMEX service and a channel under "
			"/dev/nvidia-caps-imex-channels that both sides share); give each host an "
			"owner of its own to share over fds instead");
	return sseg_cuda_no_peer_access(st->cu, r, call, st->device, st->owner_uuid);
}

static int import_handle(struct sseg *seg, const struct sseg_blob *owner, int fd)
{
	struct cuda_state *st = state(seg);
	int rc;

	read_owner(st, &owner->handle);
	if (fd < 0)
		rc = import_fabric(st, &owner->handle);
	else
		rc = sseg_cuda_no_peer_access(
			st->cu,
			st->cu->cuMemImportFromShareableHandle(&st->handle, (void *)(uintptr_t)fd,
							       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
			"cuMemImportFromShareableHandle(POSIX fd)", st->device, st->owner_uuid);
	if (rc)
		return rc;
	st->held |= CU_HELD_HANDLE;
	st->fabric = fd < 0;
	seg->mapped_size = owner->handle.mapped_size;
	seg->page_size = owner->handle.page_size;
	seg->pages = (enum sseg_pages)owner->handle.pages;
	return map_handle(seg);
}

static int import_entered(struct sseg *seg, const struct sseg_blob *owner, int fd)
{
	struct cuda_state *st = state(seg);
	CUcontext saved;
	int rc = sseg_cuda_enter(st->cu, st->ctx, &saved);

	if (rc)
		return rc;
	rc = import_handle(seg, owner, fd);
	sseg_cuda_leave(st->cu, saved);
	return rc;
}

/* This host's peers always take the fd (fabric handles are for other
 * hosts, and need an IMEX channel this host may not share). */
static int cuda_import(struct sseg *seg, const struct sseg_blob *blobs)
{
	const struct sseg_blob *owner = &blobs[seg->opts.owner_rank];
	int fd = -1, sock, rc;

	/* Another host's owner (one NVLink domain): the fabric handle is all
	 * there is; the caller's own barrier keeps the owner alive meanwhile. */
	if (!sseg_blob_same_host(owner, &blobs[seg->opts.rank]))
		return import_entered(seg, owner, -1);
	/* Reach the owner first, so that any failure below reaches it as an
	 * ack instead of a silent wait for its timeout. */
	rc = sseg_channel_fetch(seg, owner, &fd, &sock);
	if (rc)
		return rc;
	rc = fd >= 0 ? import_entered(seg, owner, fd)
		     : sseg_err(-EPROTO, "owner rank %u sent no fd", owner->rank);
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

/* The driver's handles, mappings and context stay the parent's: a child
 * closes the exported fd and lets go of the rest without a driver call
 * (the driver does not work in a forked child), so that its destroy makes
 * none either. */
static void cuda_forget_in_child(struct sseg *seg)
{
	struct cuda_state *st = state(seg);

	if (!st)
		return;
	if (st->held & CU_HELD_FD)
		close(st->export_fd);
	st->export_fd = -1;
	st->held = 0;
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
