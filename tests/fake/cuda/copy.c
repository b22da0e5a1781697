/* SPDX-License-Identifier: Apache-2.0 */
/* Device memory, pinned host allocations, copies and the memory type of a
 * pointer: what tests/gpu measures a shared segment against. Device memory is anonymous memory
 * here; a copy is a memcpy once both ends are checked. Every call needs a
 * current context, as their return lists say (need_ctx). */
#include <string.h>
#include <sys/mman.h>

#include "fake_cuda.h"
#include "fake/kit/names.h"

static void *anonymous(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Takes a table slot for size bytes of fresh memory, or fails. */
static CUresult allocate(struct fk_table table, size_t size, void **out)
{
	struct fake_range *r = fk_free_slot(table);
	void *p;

	if (!out || !size)
		return CUDA_ERROR_INVALID_VALUE;
	p = r ? anonymous(size) : NULL;
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*r = (struct fake_range){ .start = (uintptr_t)p, .size = size };
	*out = p;
	return CUDA_SUCCESS;
}

static CUresult release(struct fk_table table, uintptr_t start, const char *call)
{
	struct fake_range *r = fk_slot_at(table, start);

	if (!r) {
		fk_bug("%s(%#lx) of memory it did not allocate", call, (unsigned long)start);
		return CUDA_ERROR_INVALID_VALUE;
	}
	munmap((void *)r->start, r->size);
	*r = (struct fake_range){ 0 };
	return CUDA_SUCCESS;
}

CUresult fake_cuMemAlloc(CUdeviceptr *dptr, size_t bytes)
{
	CUresult rc = fake_enter_ctx(FE_cuMemAlloc, &fake.cfg.need_ctx);
	void *p = NULL;

	if (rc == CUDA_SUCCESS)
		rc = allocate(FK_TABLE(fake.device_memory), bytes, dptr ? &p : NULL);
	if (rc == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return fake_leave(rc);
}

/* cuMemFree and cuMemFreeHost: the same release from their own tables. */
static CUresult free_call(enum fake_entry entry, struct fk_table table, uintptr_t start)
{
	CUresult rc = fake_enter_ctx(entry, &fake.cfg.need_ctx);

	if (rc == CUDA_SUCCESS)
		rc = release(table, start, fk_entry_name(entry));
	return fake_leave(rc);
}

CUresult fake_cuMemFree(CUdeviceptr dptr)
{
	return free_call(FE_cuMemFree, FK_TABLE(fake.device_memory), (uintptr_t)dptr);
}

/* PORTABLE, DEVICEMAP, WRITECOMBINED */
#define KNOWN_HOST_ALLOC_FLAGS 0x7u

CUresult fake_cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags)
{
	CUresult rc = fake_enter_ctx(FE_cuMemHostAlloc, &fake.cfg.need_ctx);

	if (rc == CUDA_SUCCESS && (flags & ~KNOWN_HOST_ALLOC_FLAGS))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = allocate(FK_TABLE(fake.host_memory), bytes, pp);
	return fake_leave(rc);
}

CUresult fake_cuMemFreeHost(void *p)
{
	return free_call(FE_cuMemFreeHost, FK_TABLE(fake.host_memory), (uintptr_t)p);
}

static int covered(struct fk_table table, uintptr_t start, size_t bytes)
{
	return fk_overlap(table, start, bytes) == bytes;
}

/* What a device may address (unified addressing): its own memory, VMM
 * mappings, and registered or pinned host memory. */
static int device_reachable(uintptr_t start, size_t bytes)
{
	return covered(FK_TABLE(fake.device_memory), start, bytes) ||
	       covered(FK_TABLE(fake.mappings), start, bytes) ||
	       covered(FK_TABLE(fake.registrations), start, bytes) ||
	       covered(FK_TABLE(fake.host_memory), start, bytes);
}

static CUresult copy(void *dst, const void *src, uintptr_t device_end, size_t bytes)
{
	if (!dst || !src || !device_reachable(device_end, bytes))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(dst, src, bytes);
	return CUDA_SUCCESS;
}

CUresult fake_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes)
{
	CUresult rc = fake_enter_ctx(FE_cuMemcpyHtoD, &fake.cfg.need_ctx);

	if (rc == CUDA_SUCCESS)
		rc = copy((void *)(uintptr_t)dst, src, (uintptr_t)dst, bytes);
	return fake_leave(rc);
}

CUresult fake_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes)
{
	CUresult rc = fake_enter_ctx(FE_cuMemcpyDtoH, &fake.cfg.need_ctx);

	if (rc == CUDA_SUCCESS)
		rc = copy(dst, (const void *)(uintptr_t)src, (uintptr_t)src, bytes);
	return fake_leave(rc);
}

/* cuda.h: "the physical memory type of the memory that ptr addresses":
 * HOST for pinned and registered host memory and for VMM mappings of an
 * allocation located on the host (HOST or HOST_NUMA; the documentation's
 * reading, which tests/gpu/run.sh checks against the driver), DEVICE for
 * device memory and device-located mappings, and INVALID_VALUE for memory
 * no context allocated, mapped or registered (pageable memory). Only
 * MEMORY_TYPE is modelled. */
static CUresult memory_type(unsigned int *type, uintptr_t p)
{
	const struct fake_range *m = fk_slot_holding(FK_TABLE(fake.mappings), p);

	if (fk_slot_holding(FK_TABLE(fake.host_memory), p) ||
	    fk_slot_holding(FK_TABLE(fake.registrations), p))
		*type = CU_MEMORYTYPE_HOST;
	else if (fk_slot_holding(FK_TABLE(fake.device_memory), p))
		*type = CU_MEMORYTYPE_DEVICE;
	else if (m)
		*type = m->owner.location == CU_MEM_LOCATION_TYPE_DEVICE ? CU_MEMORYTYPE_DEVICE
									  : CU_MEMORYTYPE_HOST;
	else
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

CUresult fake_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	CUresult rc = fake_enter_ctx(FE_cuPointerGetAttribute, &fake.cfg.need_ctx);

	if (rc == CUDA_SUCCESS && !data)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
		fk_bug("cuPointerGetAttribute(%d): only MEMORY_TYPE is modelled", attribute);
		rc = CUDA_ERROR_INVALID_VALUE;
	}
	if (rc == CUDA_SUCCESS)
		rc = memory_type(data, (uintptr_t)ptr);
	return fake_leave(rc);
}
