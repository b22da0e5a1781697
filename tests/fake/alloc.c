/* Physical allocations: each handle is a memfd of the allocation's size;
 * POSIX fd handles are dups of it, fabric handles name it by owner pid and
 * fd number, so an importer on the same host opens /proc/<pid>/fd/<n>. */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_cuda.h"

#define MEMFD_PREFIX "sseg-fake-cuda-"
#define FABRIC_MAGIC "SSEGFAB1"

struct fabric_handle {
	char magic[8];
	uint32_t pid;
	int32_t fd;
	uint64_t size;
	uint64_t nonce;
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

/* Fabric is where the attribute and the truth part: without an IMEX
 * channel the attribute says 1 and the create fails. */
static CUresult check_fabric(void)
{
	if (!fake.cfg.fabric)
		return CUDA_ERROR_NOT_SUPPORTED;
	return fake.cfg.fabric_works ? CUDA_SUCCESS : CUDA_ERROR_NOT_PERMITTED;
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
	CUresult rc = fake_enter(FE_cuMemGetAllocationGranularity);

	if (rc == CUDA_SUCCESS && (!granularity || option > CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = check_prop(prop);
	if (rc == CUDA_SUCCESS)
		*granularity = fake.cfg.granularity;
	return fake_leave(rc);
}

static uint64_t fresh_nonce(void)
{
	static uint64_t counter;
	uint64_t nonce = 0;

	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce) || nonce == 0)
		nonce = ((uint64_t)getpid() << 32) ^ ++counter;
	return nonce;
}

static CUresult create_memfd(uint64_t nonce, size_t size, int *fd)
{
	char name[64];

	snprintf(name, sizeof(name), MEMFD_PREFIX "%016llx", (unsigned long long)nonce);
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
			   CUmemGenericAllocationHandle *out)
{
	for (int i = 0; i < FAKE_MAX_HANDLES; i++) {
		struct fake_handle *h = &fake.handles[i];

		if (h->id)
			continue;
		*h = (struct fake_handle){ ++fake.handle_seq, fd, size, types, nonce };
		*out = h->id;
		return CUDA_SUCCESS;
	}
	close(fd);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult mem_create(CUmemGenericAllocationHandle *handle, size_t size,
			   const CUmemAllocationProp *prop, unsigned long long flags)
{
	uint64_t nonce = fresh_nonce();
	CUresult rc = check_prop(prop);
	int fd;

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!handle || flags || !size || !fake_aligned(size, fake.cfg.granularity))
		return CUDA_ERROR_INVALID_VALUE;
	rc = check_handle_types(prop->requestedHandleTypes);
	if (rc == CUDA_SUCCESS)
		rc = create_memfd(nonce, size, &fd);
	if (rc == CUDA_SUCCESS)
		rc = add_handle(fd, size, prop->requestedHandleTypes, nonce, handle);
	return rc;
}

CUresult fake_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			  const CUmemAllocationProp *prop, unsigned long long flags)
{
	CUresult rc = fake_enter(FE_cuMemCreate);

	if (rc == CUDA_SUCCESS)
		rc = mem_create(handle, size, prop, flags);
	return fake_leave(rc);
}

/* The handle goes; mappings keep the memory, as real mmaps do. */
CUresult fake_cuMemRelease(CUmemGenericAllocationHandle handle)
{
	CUresult rc = fake_enter(FE_cuMemRelease);
	struct fake_handle *h = rc == CUDA_SUCCESS ? fake_handle_find(handle) : NULL;

	if (rc == CUDA_SUCCESS && !h) {
		fake_bug("cuMemRelease(%#llx) of an unknown or released handle", handle);
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
				    .nonce = h->nonce };

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
	CUresult rc = fake_enter(FE_cuMemExportToShareableHandle);
	struct fake_handle *h = rc == CUDA_SUCCESS ? fake_handle_find(handle) : NULL;

	if (rc == CUDA_SUCCESS && (!shareable || flags))
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (rc == CUDA_SUCCESS && !h)
		rc = CUDA_ERROR_INVALID_HANDLE;
	if (rc == CUDA_SUCCESS)
		rc = export_handle(shareable, h, type);
	return fake_leave(rc);
}

/* The nonce in the name of a memfd this fake created, or 0. */
static uint64_t memfd_nonce(int fd)
{
	char path[64], link[256];
	unsigned long long nonce = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = '\0';
	if (sscanf(link, "/memfd:" MEMFD_PREFIX "%16llx", &nonce) != 1)
		return 0;
	return nonce;
}

/* Takes ownership of fd. A want of 0 accepts any nonce or size. */
static CUresult adopt_fd(int fd, uint64_t want_nonce, uint64_t want_size, unsigned type,
			 CUmemGenericAllocationHandle *handle)
{
	uint64_t nonce = memfd_nonce(fd);
	struct stat st;

	if (!nonce || (want_nonce && nonce != want_nonce) || fstat(fd, &st) < 0 ||
	    st.st_size <= 0 || !fake_aligned((uintptr_t)st.st_size, fake.cfg.granularity) ||
	    (want_size && (uint64_t)st.st_size != want_size)) {
		close(fd);
		return CUDA_ERROR_INVALID_VALUE;
	}
	return add_handle(fd, (size_t)st.st_size, type, nonce, handle);
}

static CUresult import_fabric(CUmemGenericAllocationHandle *handle, const CUmemFabricHandle *in)
{
	struct fabric_handle fh;
	char path[64];
	int fd;

	memcpy(&fh, in->data, sizeof(fh));
	if (memcmp(fh.magic, FABRIC_MAGIC, sizeof(fh.magic)) != 0 || !fh.size)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(path, sizeof(path), "/proc/%u/fd/%d", fh.pid, fh.fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
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
	CUresult rc = fake_enter(FE_cuMemImportFromShareableHandle);

	if (rc == CUDA_SUCCESS && !handle)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = import_handle(handle, os_handle, type);
	return fake_leave(rc);
}
