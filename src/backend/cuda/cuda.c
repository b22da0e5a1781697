/* SPDX-License-Identifier: Apache-2.0 */
/* The cuda backend: the segment is CUDA VMM host memory (cuMemCreate on a
 * HOST_NUMA location), pinned for DMA by construction. The owner always
 * exports a POSIX fd, which the peers on its host collect over the core's
 * fd channel; where a real fabric probe passed, the allocation carries a
 * fabric handle too, in the owner's blob, for ranks on other hosts of one
 * NVLink domain. The steps and stages are the VMM skeleton's (vmm.c); here
 * are the driver's calls. */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_probe.h"
#include "backend/vmm.h"

struct cuda_state {
	struct sseg_vmm vmm; /* first: the skeleton's part */
	const struct sseg_cuda *cu;
	CUdevice device;
	CUmemGenericAllocationHandle handle;
	uint64_t reserved;
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

static struct cuda_state *cuda(struct sseg_vmm *v)
{
	return (struct cuda_state *)v;
}

/* Retains this rank's device context. */
static int open_device(struct sseg *seg, struct sseg_vmm *v)
{
	struct cuda_state *st = cuda(v);
	CUcontext ctx;
	int rc = sseg_cuda_get(&st->cu);

	if (!rc)
		rc = sseg_cuda_device(st->cu, seg->opts.device, SSEG_CUDA_NEED_VMM_HOST, &st->device);
	if (!rc)
		rc = sseg_cuda_result(st->cu->cuDevicePrimaryCtxRetain(&ctx, st->device),
				      "cuDevicePrimaryCtxRetain");
	if (!rc)
		v->ctx = ctx;
	return rc;
}

static int enter(struct sseg_vmm *v, void **saved)
{
	CUcontext caller = NULL;
	int rc = sseg_cuda_enter(cuda(v)->cu, v->ctx, &caller);

	*saved = caller;
	return rc;
}

static void leave(struct sseg_vmm *v, void *saved)
{
	sseg_cuda_leave(cuda(v)->cu, saved);
}

static int size_segment(struct sseg *seg, const struct cuda_state *st,
			const CUmemAllocationProp *prop)
{
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

static int reserve(struct sseg *seg, struct sseg_vmm *v)
{
	struct cuda_state *st = cuda(v);
	CUdeviceptr ptr;
	int rc = sseg_cuda_result(st->cu->cuMemAddressReserve(&ptr, seg->mapped_size,
							      seg->page_size, 0, 0),
				  "cuMemAddressReserve");

	if (rc)
		return rc;
	v->addr = ptr;
	st->reserved = seg->mapped_size;
	return 0;
}

static int map(struct sseg *seg, struct sseg_vmm *v)
{
	struct cuda_state *st = cuda(v);

	return sseg_cuda_result(st->cu->cuMemMap(v->addr, seg->mapped_size, 0, st->handle, 0),
				"cuMemMap");
}

static int grant(struct sseg *seg, struct sseg_vmm *v)
{
	struct cuda_state *st = cuda(v);
	struct sseg_cuda_grant g = { .ptr = v->addr, .size = seg->mapped_size,
				     .node = st->node, .readonly = seg->readonly,
				     .own = st->device, .name = seg->name,
				     .owner_uuid = st->owner_uuid };

	return sseg_cuda_grant_access(st->cu, &g);
}

/* NOT_PERMITTED or NOT_SUPPORTED for the fabric type: the allocation goes
 * on with the fd alone (NCCL retries its cuMemCreate the same way). */
static CUresult create_handle(struct sseg *seg, struct cuda_state *st, CUmemAllocationProp *prop)
{
	CUresult r = st->cu->cuMemCreate(&st->handle, seg->mapped_size, prop, 0);

	if (st->vmm.fabric && (r == CUDA_ERROR_NOT_PERMITTED || r == CUDA_ERROR_NOT_SUPPORTED)) {
		sseg_log(SSEG_LOG_INFO,
			 "segment '%s': cuMemCreate with a fabric handle failed (%s): POSIX fds "
			 "only, so ranks on other hosts cannot import it",
			 seg->name, sseg_cuda_error_name(r));
		st->vmm.fabric = 0;
		prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
		r = st->cu->cuMemCreate(&st->handle, seg->mapped_size, prop, 0);
	}
	return r;
}

static int export_owner(struct sseg *seg, struct sseg_vmm *v, int *fd)
{
	struct cuda_state *st = cuda(v);
	int exported = -1;
	int rc = sseg_cuda_result(st->cu->cuMemExportToShareableHandle(
					  &exported, st->handle,
					  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
				  "cuMemExportToShareableHandle(POSIX fd)");

	if (!rc)
		*fd = exported;
	return rc;
}

/* The owner's GPU made the memory; messages name it. */
static void know_own_gpu(struct cuda_state *st)
{
	CUuuid uuid;

	if (sseg_cuda_uuid(st->cu, st->device, &uuid))
		sseg_cuda_uuid_text(&uuid, st->owner_uuid, sizeof(st->owner_uuid));
}

static int allocate(struct sseg *seg, struct sseg_vmm *v)
{
	struct cuda_state *st = cuda(v);
	CUmemAllocationProp prop;
	CUresult r;
	int rc;

	rc = sseg_cuda_placement(st->cu, seg, st->device, &st->node);
	if (rc)
		return rc;
	know_own_gpu(st);
	v->fabric = sseg_cuda_fabric_works(st->cu, st->device, st->node);
	sseg_cuda_host_prop(&prop, st->node,
			    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR |
				    (v->fabric ? CU_MEM_HANDLE_TYPE_FABRIC : 0));
	rc = size_segment(seg, st, &prop);
	if (rc)
		return rc;
	r = create_handle(seg, st, &prop);
	return r == CUDA_ERROR_OUT_OF_MEMORY
		       ? sseg_cuda_result(r, "cuMemCreate(HOST_NUMA)")
		       : sseg_cuda_result_hint(r, "cuMemCreate(HOST_NUMA)", sseg_cuda_host_numa_hint());
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
static void export_fabric(struct sseg *seg, struct cuda_state *st, struct sseg_blob_handle *h)
{
	CUmemFabricHandle fabric;
	void *saved;
	bool entered = sseg_vmm_enter(&st->vmm, &saved) == 0;
	CUresult r;

	_Static_assert(sizeof(fabric) == DATA_UUID - DATA_FABRIC, "fabric handle size");
	r = entered ? st->cu->cuMemExportToShareableHandle(&fabric, st->handle,
							   CU_MEM_HANDLE_TYPE_FABRIC, 0)
		    : CUDA_ERROR_INVALID_CONTEXT;
	if (entered)
		sseg_vmm_leave(&st->vmm, saved);
	if (r != CUDA_SUCCESS) {
		sseg_log(SSEG_LOG_INFO, "segment '%s': exporting its fabric handle failed (%s): "
			 "ranks on other hosts cannot import it", seg->name,
			 sseg_cuda_error_name(r));
		st->vmm.fabric = 0;
		return;
	}
	memcpy(h->data + DATA_FABRIC, &fabric, sizeof(fabric));
	h->kind = SSEG_HANDLE_FABRIC;
}

static int describe_handle(struct sseg *seg, struct sseg_vmm *v, struct sseg_blob_handle *h)
{
	describe_owner(cuda(v), h);
	if (v->fabric)
		export_fabric(seg, cuda(v), h);
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

/* This host's peers always take the fd (fabric handles are for other
 * hosts, and need an IMEX channel this host may not share). */
static int import(struct sseg *seg, struct sseg_vmm *v, const struct sseg_blob *owner, int fd)
{
	struct cuda_state *st = cuda(v);
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
	if (!rc)
		v->fabric = fd < 0;
	return rc;
}

static int unmap(struct sseg_vmm *v)
{
	return sseg_cuda_result(cuda(v)->cu->cuMemUnmap(v->addr, cuda(v)->reserved), "cuMemUnmap");
}

static int free_address(struct sseg_vmm *v)
{
	return sseg_cuda_result(cuda(v)->cu->cuMemAddressFree(v->addr, cuda(v)->reserved),
				"cuMemAddressFree");
}

static int release_handle(struct sseg_vmm *v)
{
	return sseg_cuda_result(cuda(v)->cu->cuMemRelease(cuda(v)->handle), "cuMemRelease");
}

static int close_device(struct sseg *seg, struct sseg_vmm *v)
{
	return sseg_cuda_result(cuda(v)->cu->cuDevicePrimaryCtxRelease(cuda(v)->device),
				"cuDevicePrimaryCtxRelease");
}

static const struct sseg_vmm_driver cuda_vmm = {
	.state_size = sizeof(struct cuda_state),
	.local_type = "cuda-fd",
	.fabric_type = "cuda-fabric",
	.handle_noun = "the driver handle",
	.fd_pages = true,
	.open = open_device,
	.enter = enter,
	.leave = leave,
	.allocate = allocate,
	.export_owner = export_owner,
	.describe_handle = describe_handle,
	.import = import,
	.reserve = reserve,
	.map = map,
	.grant = grant,
	.unmap = unmap,
	.free_address = free_address,
	.release_handle = release_handle,
	.close = close_device,
};

/* What this backend reads that releases up to 0.2 spelled SSEG_...:
 * SHAREDSEG_CUDA_LIBRARY (src/driver/cuda.c) and
 * SHAREDSEG_CUDA_HOST_NUMA_MIN_DRIVER (cuda_device.c). */
static const char *const renamed_env[] = { "CUDA_LIBRARY", "CUDA_HOST_NUMA_MIN_DRIVER", NULL };

const struct sseg_backend_ops sseg_cuda_ops = {
	.kind = SSEG_BACKEND_CUDA,
	.name = "cuda",
	.renamed_env = renamed_env,
	.caps = SSEG_CAP_PINNED | SSEG_CAP_DEVICES | SSEG_CAP_FABRIC,
	.hostreg = &sseg_cuda_hostreg_ops,
	.vmm = &cuda_vmm,
	.probe = cuda_probe,
	.probe_device = sseg_cuda_probe_device,
	.choose_pages = cuda_choose_pages,
	.check_opts = cuda_check_opts,
	SSEG_VMM_OPS,
};
