/* SPDX-License-Identifier: Apache-2.0 */
/* Physical allocations: each handle is a memfd of the allocation's size;
 * POSIX fd handles are dups of it, fabric handles name it by owner pid and
 * fd number, so an importer on the same host opens /proc/<pid>/fd/<n>.
 * An allocation belongs to a device (its location's, or for host memory
 * the creating context's); the memfd's name and the fabric handle carry
 * it, so an importer's device can be checked for peer access. */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "fake/kit/memfd.h"

#define MEMFD_PREFIX "sseg-fake-cuda-"
#define MEMFD_FORMAT "%016llx.%d.%d" /* nonce, owner device, location type */
#define FABRIC_MAGIC "SSEGFAB1"

struct fabric_handle {
	char magic[8];
	uint32_t pid;
	int32_t fd;
	uint64_t size;
	uint64_t nonce;
	int32_t device;
	int32_t location;
};
_Static_assert(sizeof(struct fabric_handle) <= CU_IPC_HANDLE_SIZE, "fits a CUmemFabricHandle");

static const unsigned known_types =
	CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;

static CUresult check_location(const CUmemLocation *loc)
{
	switch (loc->type) {
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
		if (!fake.cfg.host_numa_vmm)
			return CUDA_ERROR_NOT_SUPPORTED;
		return fake_numa_valid(loc->id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	case CU_MEM_LOCATION_TYPE_DEVICE:
		return fake_device_valid(loc->id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* Fabric is where the attribute and the truth part. Without an IMEX
 * channel the attribute says 1 and FABRIC allocations fail with "an
 * insufficient permission error" (the IMEX guide; NCCL retries its
 * cuMemCreate without FABRIC on NOT_PERMITTED): imex_channel=0. With one,
 * creating and exporting work, and importing still needs the importer to
 * share the exporter's channel (see import_fabric): imex=1. */
static CUresult check_fabric(void)
{
	if (!fake.cfg.fabric)
		return CUDA_ERROR_NOT_SUPPORTED;
	return fake.cfg.imex_channel ? CUDA_SUCCESS : CUDA_ERROR_NOT_PERMITTED;
}

static CUresult check_handle_types(unsigned types)
{
	if (types & ~known_types)
		return CUDA_ERROR_INVALID_VALUE;
	if ((types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) && !fake.cfg.posix_fd)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (types & CU_MEM_HANDLE_TYPE_FABRIC)
		return check_fabric();
	return CUDA_SUCCESS;
}

static CUresult check_prop(const CUmemAllocationProp *prop)
{
	if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fake.cfg.vmm)
		return CUDA_ERROR_NOT_SUPPORTED;
	return check_location(&prop->location);
}

CUresult fake_cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
					    CUmemAllocationGranularity_flags option)
{
	CUresult rc = fake_enter_ctx(FE_cuMemGetAllocationGranularity, &fake.cfg.vmm_ctx);

	if (rc == CUDA_SUCCESS && (!granularity || option > CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = check_prop(prop);
	if (rc == CUDA_SUCCESS)
		*granularity = fake.cfg.granularity;
	return fake_leave(rc);
}

static CUresult create_memfd(uint64_t nonce, struct fake_owner owner, size_t size, int *fd)
{
	char name[64];

	snprintf(name, sizeof(name), MEMFD_PREFIX MEMFD_FORMAT, (unsigned long long)nonce,
		 owner.device, owner.location);
	*fd = memfd_create(name, MFD_CLOEXEC);
	if (*fd < 0)
		return errno == ENOMEM ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
	if (ftruncate(*fd, (off_t)size) == 0)
		return CUDA_SUCCESS;
	close(*fd);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Takes ownership of fd, also on failure. */
static CUresult add_handle(int fd, size_t size, unsigned types, uint64_t nonce,
			   struct fake_owner owner, CUmemGenericAllocationHandle *out)
{
	struct fake_handle *h = fk_free_slot(FK_TABLE(fake.handles));

	if (!h) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*h = (struct fake_handle){ ++fake.handle_seq, fd, size, types, nonce, owner };
	*out = h->id;
	return CUDA_SUCCESS;
}

/* host_numa_blocked=1: a container whose seccomp profile refuses
 * get_mempolicy and mbind without CAP_SYS_NICE (Docker's and containerd's
 * default) makes HOST_NUMA allocations fail (NCCL probes for it and falls
 * back to /dev/shm, "this could be due to the container runtime disabling
 * NUMA support"). The reports do not give the code; the fake answers the
 * driver's "an OS call failed", and tests/gpu records the real one. */
static CUresult check_host_numa_policy(const CUmemLocation *loc)
{
	if (loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA && fake.cfg.host_numa_blocked)
		return CUDA_ERROR_OPERATING_SYSTEM;
	return CUDA_SUCCESS;
}

static struct fake_owner owner_of(const CUmemLocation *loc)
{
	int device = loc->type == CU_MEM_LOCATION_TYPE_DEVICE ? loc->id : fake_current_device();

	return (struct fake_owner){ device, loc->type };
}

static CUresult mem_create(CUmemGenericAllocationHandle *handle, size_t size,
			   const CUmemAllocationProp *prop, unsigned long long flags)
{
	uint64_t nonce = fk_nonce();
	CUresult rc = check_prop(prop);
	int fd;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!handle || flags || !size || !fake_aligned(size, fake.cfg.granularity))
		return CUDA_ERROR_INVALID_VALUE;
	rc = check_handle_types(prop->requestedHandleTypes);
	if (rc == CUDA_SUCCESS)
		rc = check_host_numa_policy(&prop->location);
	if (rc == CUDA_SUCCESS)
		rc = create_memfd(nonce, owner_of(&prop->location), size, &fd);
	if (rc == CUDA_SUCCESS)
		rc = add_handle(fd, size, prop->requestedHandleTypes, nonce,
				owner_of(&prop->location), handle);
	return rc;
}

/* The return lists of the VMM calls do not name CUDA_ERROR_INVALID_CONTEXT
 * (those of cuMemHostRegister and its kin do); the docs are silent, so the
 * fake takes the stricter reading: every VMM call needs a current context
 * (vmm_ctx=0 lifts it). */
CUresult fake_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			  const CUmemAllocationProp *prop, unsigned long long flags)
{
	CUresult rc = fake_enter_ctx(FE_cuMemCreate, &fake.cfg.vmm_ctx);

	if (rc == CUDA_SUCCESS)
		rc = mem_create(handle, size, prop, flags);
	return fake_leave(rc);
}

/* The handle goes; mappings keep the memory, as real mmaps do. */
CUresult fake_cuMemRelease(CUmemGenericAllocationHandle handle)
{
	CUresult rc = fake_enter_ctx(FE_cuMemRelease, &fake.cfg.vmm_ctx);
	struct fake_handle *h = rc == CUDA_SUCCESS ? fake_handle_find(handle) : NULL;

	if (rc == CUDA_SUCCESS && !h) {
		fk_bug("cuMemRelease(%#llx) of an unknown or released handle", handle);
		rc = CUDA_ERROR_INVALID_VALUE;
	}
	if (h) {
		close(h->fd);
		memset(h, 0, sizeof(*h));
	}
	return fake_leave(rc);
}

static CUresult export_fabric(CUmemFabricHandle *out, const struct fake_handle *h)
{
	struct fabric_handle fh = { .pid = (uint32_t)getpid(), .fd = h->fd, .size = h->size,
				    .nonce = h->nonce, .device = h->owner.device,
				    .location = h->owner.location };

	memcpy(fh.magic, FABRIC_MAGIC, sizeof(fh.magic));
	memset(out, 0, sizeof(*out));
	memcpy(out->data, &fh, sizeof(fh));
	return CUDA_SUCCESS;
}

static CUresult export_handle(void *shareable, const struct fake_handle *h, unsigned type)
{
	CUresult rc = check_handle_types(type);

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!(h->types & type))
		return CUDA_ERROR_INVALID_VALUE; /* not requested at creation */
	if (type == CU_MEM_HANDLE_TYPE_FABRIC)
		return export_fabric(shareable, h);
	if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	*(int *)shareable = dup(h->fd);
	return *(int *)shareable >= 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult fake_cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
					   CUmemAllocationHandleType type, unsigned long long flags)
{
	CUresult rc = fake_enter_ctx(FE_cuMemExportToShareableHandle, &fake.cfg.vmm_ctx);
	struct fake_handle *h = rc == CUDA_SUCCESS ? fake_handle_find(handle) : NULL;

	if (rc == CUDA_SUCCESS && (!shareable || flags))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && !h)
		rc = CUDA_ERROR_INVALID_HANDLE;
	if (rc == CUDA_SUCCESS)
		rc = export_handle(shareable, h, type);
	return fake_leave(rc);
}

/* The nonce (0: not a memfd this fake created) and owner in its name. */
static uint64_t memfd_nonce(int fd, struct fake_owner *owner)
{
	char path[64], link[256];
	unsigned long long nonce = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = '\0';
	if (sscanf(link, "/memfd:" MEMFD_PREFIX MEMFD_FORMAT, &nonce, &owner->device,
		   &owner->location) != 3)
		return 0;
	return nonce;
}

/* An importer's device needs peer access to the allocation's: NCCL issue
 * 1838 (L4 GPUs without P2P, a HOST_NUMA allocation shared as a POSIX fd)
 * got CUDA_ERROR_PEER_ACCESS_UNSUPPORTED from this very call. The docs
 * only say NOT_SUPPORTED when "the current process cannot support the
 * memory"; the fake answers what the field saw. */
static CUresult check_importer(struct fake_owner owner)
{
	int device = fake_current_device();

	if (device >= 0 && !fake_peer_access(device, owner.device))
		return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	return CUDA_SUCCESS;
}

/* Takes ownership of fd. A want of 0 accepts any nonce or size. */
static CUresult adopt_fd(int fd, uint64_t want_nonce, uint64_t want_size, unsigned type,
			 CUmemGenericAllocationHandle *handle)
{
	struct fake_owner owner = { -1, CU_MEM_LOCATION_TYPE_INVALID };
	uint64_t nonce = memfd_nonce(fd, &owner);
	struct stat st;
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	if (nonce && (!want_nonce || nonce == want_nonce) && fstat(fd, &st) == 0 &&
	    st.st_size > 0 && fake_aligned((uintptr_t)st.st_size, fake.cfg.granularity) &&
	    (!want_size || (uint64_t)st.st_size == want_size))
		rc = check_importer(owner);
	if (rc != CUDA_SUCCESS) {
		close(fd);
		return rc;
	}
	return add_handle(fd, (size_t)st.st_size, type, nonce, owner, handle);
}

static CUresult import_fabric(CUmemGenericAllocationHandle *handle, const CUmemFabricHandle *in)
{
	struct fabric_handle fh;
	int fd;

	memcpy(&fh, in->data, sizeof(fh));
	if (memcmp(fh.magic, FABRIC_MAGIC, sizeof(fh.magic)) != 0 || !fh.size)
		return CUDA_ERROR_INVALID_VALUE;
	/* "If shHandleType is CU_MEM_HANDLE_TYPE_FABRIC and the importer process
	 * has not been granted access to the same IMEX channel as the exporter
	 * process, this API will error as CUDA_ERROR_NOT_PERMITTED" (cuda.h).
	 * The exporter itself shares its own channel. */
	if (!fake.cfg.imex && fh.pid != (uint32_t)getpid())
		return CUDA_ERROR_NOT_PERMITTED;
	fd = fk_open_exported(fh.pid, fh.fd);
	if (fd < 0)
		return errno == EACCES || errno == EPERM ? CUDA_ERROR_NOT_PERMITTED
							 : CUDA_ERROR_INVALID_VALUE;
	return adopt_fd(fd, fh.nonce, fh.size, CU_MEM_HANDLE_TYPE_FABRIC, handle);
}

static CUresult import_handle(CUmemGenericAllocationHandle *handle, void *os_handle,
			      unsigned type)
{
	CUresult rc = check_handle_types(type);
	int fd;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (type == CU_MEM_HANDLE_TYPE_FABRIC)
		return os_handle ? import_fabric(handle, os_handle) : CUDA_ERROR_INVALID_VALUE;
	if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	fd = fcntl((int)(uintptr_t)os_handle, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return CUDA_ERROR_INVALID_VALUE;
	return adopt_fd(fd, 0, 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, handle);
}

CUresult fake_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os_handle,
					     CUmemAllocationHandleType type)
{
	CUresult rc = fake_enter_ctx(FE_cuMemImportFromShareableHandle, &fake.cfg.vmm_ctx);

	if (rc == CUDA_SUCCESS && !handle)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = import_handle(handle, os_handle, type);
	return fake_leave(rc);
}
