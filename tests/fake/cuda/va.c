/* SPDX-License-Identifier: Apache-2.0 */
/* Virtual address ranges: reservations are PROT_NONE anonymous mappings,
 * cuMemMap puts the handle's memfd over part of one, still PROT_NONE (the
 * CPU faults until cuMemSetAccess grants it, as with the real driver), and
 * cuMemUnmap puts the PROT_NONE reservation back. Like every VMM call,
 * these need a current context (vmm_ctx; see cuMemCreate). */
#include <sys/mman.h>

#include "fake_cuda.h"
#include "fake/kit/va.h"

static CUresult address_reserve(CUdeviceptr *ptr, size_t size, size_t align,
				unsigned long long flags)
{
	struct fake_range *r = fk_free_slot(FK_TABLE(fake.reservations));
	void *start;

	if (!align)
		align = fake.cfg.granularity;
	if (!ptr || flags || !size || !fake_aligned(size, fake.cfg.granularity) ||
	    (align & (align - 1)) || align < 4096)
		return CUDA_ERROR_INVALID_VALUE;
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	start = fk_va_reserve(size, align);
	if (!start)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*r = (struct fake_range){ .start = (uintptr_t)start, .size = size };
	*ptr = (CUdeviceptr)(uintptr_t)start;
	return CUDA_SUCCESS;
}

/* The address hint is ignored, as the driver may. */
CUresult fake_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
				  CUdeviceptr addr, unsigned long long flags)
{
	CUresult rc = fake_enter_ctx(FE_cuMemAddressReserve, &fake.cfg.vmm_ctx);

	if (rc == CUDA_SUCCESS)
		rc = address_reserve(ptr, size, alignment, flags);
	return fake_leave(rc);
}

static CUresult address_free(uintptr_t start, size_t size)
{
	struct fake_range *r = fk_slot_at(FK_TABLE(fake.reservations), start);

	if (!r || r->size != size) {
		fk_bug("cuMemAddressFree(%#lx, %zu) matches no reservation", (unsigned long)start,
			 size);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (fk_overlap(FK_TABLE(fake.mappings), start, size)) {
		fk_bug("cuMemAddressFree(%#lx, %zu) with mappings still in it",
			 (unsigned long)start, size);
		return CUDA_ERROR_INVALID_VALUE;
	}
	munmap((void *)start, size);
	*r = (struct fake_range){ 0 };
	return CUDA_SUCCESS;
}

CUresult fake_cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	CUresult rc = fake_enter_ctx(FE_cuMemAddressFree, &fake.cfg.vmm_ctx);

	if (rc == CUDA_SUCCESS)
		rc = address_free((uintptr_t)ptr, size);
	return fake_leave(rc);
}

static int inside_reservation(uintptr_t start, size_t size)
{
	return fk_overlap(FK_TABLE(fake.reservations), start, size) == size;
}

/* "offset - Offset into the memory represented by handle from which to
 * start mapping - Note: currently must be zero." (cuda.h); map_offset=1
 * accepts any multiple of the granularity, as the text above it reads. */
static CUresult check_map(uintptr_t start, size_t size, size_t offset, const struct fake_handle *h)
{
	size_t gran = fake.cfg.granularity;

	if (!size || !fake_aligned(start, gran) || !fake_aligned(size, gran) ||
	    !fake_aligned(offset, gran) || (offset && !fake.cfg.map_offset))
		return CUDA_ERROR_INVALID_VALUE;
	if (!h)
		return CUDA_ERROR_INVALID_HANDLE;
	if (offset > h->size || size > h->size - offset || !inside_reservation(start, size))
		return CUDA_ERROR_INVALID_VALUE;
	if (fk_overlap(FK_TABLE(fake.mappings), start, size)) {
		fk_bug("cuMemMap(%#lx, %zu) over a mapped range", (unsigned long)start, size);
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static CUresult mem_map(uintptr_t start, size_t size, size_t offset,
			CUmemGenericAllocationHandle handle)
{
	const struct fake_handle *h = fake_handle_find(handle);
	struct fake_range *m;
	CUresult rc = check_map(start, size, offset, h);

	if (rc != CUDA_SUCCESS)
		return rc;
	m = fk_free_slot(FK_TABLE(fake.mappings));
	if (!m || mmap((void *)start, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd,
		       (off_t)offset) == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*m = (struct fake_range){ .start = start, .size = size, .prot = PROT_NONE, .owner = h->owner,
				  .host_node = -1 };
	return CUDA_SUCCESS;
}

CUresult fake_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
		       CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	CUresult rc = fake_enter_ctx(FE_cuMemMap, &fake.cfg.vmm_ctx);

	if (rc == CUDA_SUCCESS && flags)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		rc = mem_map((uintptr_t)ptr, size, offset, handle);
	return fake_leave(rc);
}

/* Unmapping takes whole mappings that cover the range without a gap. */
static int whole_mappings(uintptr_t start, size_t size)
{
	uintptr_t end = start + size;

	for (int i = 0; i < FAKE_MAX_MAPPINGS; i++) {
		const struct fake_range *m = &fake.mappings[i];

		if (m->start && m->start < end && m->start + m->size > start &&
		    (m->start < start || m->start + m->size > end))
			return 0;
	}
	return fk_overlap(FK_TABLE(fake.mappings), start, size) == size;
}

static CUresult mem_unmap(uintptr_t start, size_t size)
{
	if (!size || !whole_mappings(start, size)) {
		fk_bug("cuMemUnmap(%#lx, %zu) is not whole mappings", (unsigned long)start, size);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (fk_va_restore((void *)start, size) < 0)
		return CUDA_ERROR_UNKNOWN;
	for (int i = 0; i < FAKE_MAX_MAPPINGS; i++) {
		struct fake_range *m = &fake.mappings[i];

		if (m->start >= start && m->start < start + size)
			*m = (struct fake_range){ 0 };
	}
	return CUDA_SUCCESS;
}

CUresult fake_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	CUresult rc = fake_enter_ctx(FE_cuMemUnmap, &fake.cfg.vmm_ctx);

	if (rc == CUDA_SUCCESS)
		rc = mem_unmap((uintptr_t)ptr, size);
	return fake_leave(rc);
}

static int host_prot(CUmemAccess_flags flags)
{
	if (flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
		return PROT_READ | PROT_WRITE;
	return flags == CU_MEM_ACCESS_FLAGS_PROT_READ ? PROT_READ : PROT_NONE;
}

/* Every mapping in [start, start+size) passes check(owner, arg). */
static int mappings_all(uintptr_t start, size_t size, int (*check)(struct fake_owner, int),
			int arg)
{
	for (int i = 0; i < FAKE_MAX_MAPPINGS; i++) {
		const struct fake_range *m = &fake.mappings[i];

		if (m->start && m->start < start + size && m->start + m->size > start &&
		    !check(m->owner, arg))
			return 0;
	}
	return 1;
}

/* Only device memory has a device to be a peer of: a HOST_NUMA
 * allocation's creating context (its owner.device) ties no rule to it. */
static int peer_reaches(struct fake_owner owner, int device)
{
	return owner.location != CU_MEM_LOCATION_TYPE_DEVICE ||
	       fake_peer_access(device, owner.device);
}

static int host_located(struct fake_owner owner, int unused)
{
	(void)unused;
	return owner.location != CU_MEM_LOCATION_TYPE_DEVICE;
}

/* A device granted access to device memory needs peer access to the
 * allocation's device (PEER_ACCESS_UNSUPPORTED, the stricter reading: the
 * docs list INVALID_DEVICE and NOT_SUPPORTED and say nothing of peers).
 * Host memory has no such rule: the 217 of the field reports (NCCL issue
 * 1838 on L4, Ray on T4) came from the import (alloc.c). A device without
 * VMM (novmm=) cannot be granted anything: NOT_SUPPORTED. PROT_NONE
 * revokes and needs neither. */
static CUresult check_device_access(uintptr_t start, size_t size, const CUmemAccessDesc *d)
{
	if (!fake_device_valid(d->location.id))
		return CUDA_ERROR_INVALID_DEVICE;
	if (d->flags == CU_MEM_ACCESS_FLAGS_PROT_NONE)
		return CUDA_SUCCESS;
	if (!fake_device_vmm(d->location.id))
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!mappings_all(start, size, peer_reaches, d->location.id))
		return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	return CUDA_SUCCESS;
}

/* "Users cannot specify CU_MEM_LOCATION_TYPE_HOST_NUMA accessibility for
 * allocations created on with other location types", and for HOST_NUMA
 * "CUmemLocation::id is ignored" (cuda.h): no check of the node. */
static CUresult check_access(uintptr_t start, size_t size, const CUmemAccessDesc *d)
{
	if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
	    d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
		return CUDA_ERROR_INVALID_VALUE;
	switch (d->location.type) {
	case CU_MEM_LOCATION_TYPE_HOST:
		return CUDA_SUCCESS;
	case CU_MEM_LOCATION_TYPE_HOST_NUMA:
		return mappings_all(start, size, host_located, 0) ? CUDA_SUCCESS
								   : CUDA_ERROR_INVALID_VALUE;
	case CU_MEM_LOCATION_TYPE_DEVICE:
		return check_device_access(start, size, d);
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* What each mapping in the range now grants: the host's protection (prot
 * < 0: unchanged) and the devices named, added or taken away. */
static void grant(uintptr_t start, size_t size, const CUmemAccessDesc *desc, size_t n, int prot)
{
	for (int i = 0; i < FAKE_MAX_MAPPINGS; i++) {
		struct fake_range *m = &fake.mappings[i];

		if (!m->start || m->start >= start + size || m->start + m->size <= start)
			continue;
		if (prot >= 0)
			m->prot = prot;
		for (size_t k = 0; k < n; k++) {
			uint32_t bit;

			if (desc[k].location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
				m->host_node = desc[k].location.id; /* ignored, but seen */
			if (desc[k].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
				continue;
			bit = 1u << desc[k].location.id; /* checked: a device of the fake */
			if (desc[k].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE)
				m->granted &= ~bit;
			else
				m->granted |= bit;
		}
	}
}

/* Every descriptor is checked before any is applied: the docs do not say
 * whether a list with one refused entry (a host entry and a device without
 * peer access, as the library batches them) applies the others, and the
 * stricter reading is that it applies none. */
static CUresult set_access(uintptr_t start, size_t size, const CUmemAccessDesc *desc, size_t n)
{
	CUresult rc = CUDA_SUCCESS;
	int prot = -1;

	if (!desc || !n || !size || !fake_aligned(start, fake.cfg.granularity) ||
	    !fake_aligned(size, fake.cfg.granularity))
		return CUDA_ERROR_INVALID_VALUE;
	if (fk_overlap(FK_TABLE(fake.mappings), start, size) != size) {
		fk_bug("cuMemSetAccess(%#lx, %zu) on a range not fully mapped",
			 (unsigned long)start, size);
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++)
		rc = check_access(start, size, &desc[i]);
	if (rc != CUDA_SUCCESS)
		return rc;
	for (int dev = 0; dev < FAKE_MAX_DEVICES; dev++)
		fake.access[dev] = 0;
	for (size_t i = 0; i < n; i++) {
		if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE)
			fake.access[desc[i].location.id] = desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE;
		else
			prot = host_prot(desc[i].flags);
	}
	if (prot >= 0 && mprotect((void *)start, size, prot) < 0)
		return CUDA_ERROR_UNKNOWN;
	grant(start, size, desc, n, prot);
	return CUDA_SUCCESS;
}

CUresult fake_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
			     size_t count)
{
	CUresult rc = fake_enter_ctx(FE_cuMemSetAccess, &fake.cfg.vmm_ctx);

	if (rc == CUDA_SUCCESS)
		rc = set_access((uintptr_t)ptr, size, desc, count);
	return fake_leave(rc);
}
