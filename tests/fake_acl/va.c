/* SPDX-License-Identifier: Apache-2.0 */
/* Virtual address ranges: a reservation is a PROT_NONE anonymous mapping,
 * aclrtMapMem puts a whole allocation's memfd over part of one, still
 * PROT_NONE: the CPU loads and stores only once aclrtMemSetAccess granted
 * the host (the stricter reading; the reference does not say whether the
 * host needs it). aclrtUnmapMem puts the reservation back. */
#include <sys/mman.h>

#include "fake_acl.h"
#include "fakekit/va.h"

static size_t page_round(size_t size)
{
	return (size + 4095) & ~(size_t)4095;
}

static aclError reserve(void **virPtr, size_t size)
{
	struct fake_range *r = fk_free_slot(FK_TABLE(fake.reservations));
	void *start;

	if (!r)
		return fake_refuse(ACL_ERROR_RT_MEMORY_ALLOCATION, "too many reservations");
	size = page_round(size);
	start = fk_va_reserve(size, fake.cfg.granularity);
	if (!start)
		return fake_refuse(ACL_ERROR_RT_MEMORY_ALLOCATION, "no address space for %zu bytes",
				   size);
	*r = (struct fake_range){ .start = (uintptr_t)start, .size = size };
	*virPtr = start;
	return ACL_SUCCESS;
}

/* The reference: alignment is reserved (0), flags 0; a fixed expectPtr is
 * experimental and not emulated. */
FK_API aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment,
				       void *expectPtr, uint64_t flags)
{
	aclError rc = fake_enter_ctx(FE_aclrtReserveMemAddress);

	if (rc == ACL_SUCCESS && (!virPtr || !size || alignment || flags))
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM,
				 "virPtr NULL, size 0, or alignment or flags not 0");
	if (rc == ACL_SUCCESS && expectPtr)
		rc = fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "expectPtr is not emulated");
	if (rc == ACL_SUCCESS)
		rc = reserve(virPtr, size);
	return fake_leave(rc);
}

static aclError release(uintptr_t start)
{
	struct fake_range *r = fk_slot_at(FK_TABLE(fake.reservations), start);

	if (!r) {
		fk_bug("aclrtReleaseMemAddress(%#lx) matches no reservation", (unsigned long)start);
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID, "no reservation at %#lx",
				   (unsigned long)start);
	}
	if (fk_overlap(FK_TABLE(fake.mappings), r->start, r->size)) {
		fk_bug("aclrtReleaseMemAddress(%#lx) with mappings still in it",
			 (unsigned long)start);
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID, "unmap first");
	}
	munmap((void *)r->start, r->size);
	*r = (struct fake_range){ 0 };
	return ACL_SUCCESS;
}

FK_API aclError aclrtReleaseMemAddress(void *virPtr)
{
	aclError rc = fake_enter_ctx(FE_aclrtReleaseMemAddress);

	if (rc == ACL_SUCCESS)
		rc = release((uintptr_t)virPtr);
	return fake_leave(rc);
}

/* The whole allocation, at offset 0, inside one reservation that holds
 * either allocated or imported handles, never both (the reference). */
static aclError check_map(uintptr_t start, size_t size, const struct fake_handle *h,
			  struct fake_range **res)
{
	if (!h)
		return fake_refuse(ACL_ERROR_RT_INVALID_HANDLE, "unknown handle");
	if (size != h->size || start % h->granule)
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID,
				   "size %zu is not the allocation's %zu, or the address is not "
				   "aligned to its granularity", size, h->size);
	*res = fk_slot_holding(FK_TABLE(fake.reservations), start);
	if (!*res || (*res)->start + (*res)->size - start < size)
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID, "not inside one reservation");
	if ((*res)->origin && (*res)->origin != (int)h->origin)
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID,
				   "one reservation binds allocated and imported handles");
	if (fk_overlap(FK_TABLE(fake.mappings), start, size)) {
		fk_bug("aclrtMapMem(%#lx, %zu) over a mapped range", (unsigned long)start, size);
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID, "mapped already");
	}
	return ACL_SUCCESS;
}

static aclError map(uintptr_t start, size_t size, uintptr_t handle)
{
	const struct fake_handle *h = fake_handle_find(handle);
	struct fake_range *res = NULL, *m;
	aclError rc = check_map(start, size, h, &res);

	if (rc != ACL_SUCCESS)
		return rc;
	m = fk_free_slot(FK_TABLE(fake.mappings));
	if (!m || mmap((void *)start, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd,
		       FAKE_HEADER) == MAP_FAILED)
		return fake_refuse(ACL_ERROR_RT_MEMORY_ALLOCATION, "cannot map %zu bytes", size);
	*m = (struct fake_range){ .start = start, .size = size, .handle = handle };
	res->origin = (int)h->origin;
	return ACL_SUCCESS;
}

FK_API aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
			    uint64_t flags)
{
	aclError rc = fake_enter_ctx(FE_aclrtMapMem);

	if (rc == ACL_SUCCESS && (!virPtr || flags || offset))
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "virPtr NULL, or offset or flags not 0");
	if (rc == ACL_SUCCESS)
		rc = map((uintptr_t)virPtr, size, (uintptr_t)handle);
	return fake_leave(rc);
}

static aclError unmap(uintptr_t start)
{
	struct fake_range *m = fk_slot_at(FK_TABLE(fake.mappings), start);

	if (!m) {
		fk_bug("aclrtUnmapMem(%#lx) is not the start of a mapping", (unsigned long)start);
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID, "nothing mapped at %#lx",
				   (unsigned long)start);
	}
	if (fk_va_restore((void *)start, m->size) < 0)
		return fake_refuse(ACL_ERROR_RT_INTERNAL_ERROR, "cannot unmap");
	*m = (struct fake_range){ 0 };
	return ACL_SUCCESS;
}

FK_API aclError aclrtUnmapMem(void *virPtr)
{
	aclError rc = fake_enter_ctx(FE_aclrtUnmapMem);

	if (rc == ACL_SUCCESS)
		rc = unmap((uintptr_t)virPtr);
	return fake_leave(rc);
}

/* READWRITE is the one flag supported; a host entry has id 0; the
 * reserved bytes are 0. */
static aclError check_desc(const aclrtMemAccessDesc *d)
{
	for (size_t i = 0; i < sizeof(d->rsv); i++)
		if (d->rsv[i])
			return fake_refuse(ACL_ERROR_INVALID_PARAM, "rsv is not zero");
	if (d->flags != ACL_RT_MEM_ACCESS_FLAGS_READWRITE)
		return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
				   "access flags %d: only READWRITE is supported", (int)d->flags);
	if (d->location.type == ACL_MEM_LOCATION_TYPE_HOST)
		return d->location.id == 0 ? ACL_SUCCESS
					   : fake_refuse(ACL_ERROR_INVALID_PARAM,
							 "a host location's id must be 0");
	if (d->location.type == ACL_MEM_LOCATION_TYPE_DEVICE)
		return fake_device_valid((int32_t)d->location.id)
			       ? ACL_SUCCESS
			       : fake_refuse(ACL_ERROR_RT_INVALID_DEVICEID, "no device %u",
					     d->location.id);
	return fake_refuse(ACL_ERROR_INVALID_PARAM, "location type %d: HOST or DEVICE only",
			   (int)d->location.type);
}

/* Every descriptor is checked before any is applied. The range must be one
 * whole mapping: access before map fails. */
static aclError set_access(uintptr_t start, size_t size, const aclrtMemAccessDesc *desc,
			   size_t n)
{
	struct fake_range *m = fk_slot_at(FK_TABLE(fake.mappings), start);
	aclError rc = ACL_SUCCESS;

	if (!desc || !n)
		return fake_refuse(ACL_ERROR_INVALID_PARAM, "no descriptor");
	if (!m || m->size != size)
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID,
				   "%#lx + %zu is not what aclrtMapMem mapped", (unsigned long)start,
				   size);
	for (size_t i = 0; i < n && rc == ACL_SUCCESS; i++)
		rc = check_desc(&desc[i]);
	for (size_t i = 0; i < n && rc == ACL_SUCCESS; i++) {
		if (desc[i].location.type == ACL_MEM_LOCATION_TYPE_DEVICE)
			m->devices |= 1u << desc[i].location.id;
		else if (!m->host_access && mprotect((void *)start, size, PROT_READ | PROT_WRITE))
			rc = fake_refuse(ACL_ERROR_RT_INTERNAL_ERROR, "mprotect failed");
		else
			m->host_access = 1;
	}
	return rc;
}

FK_API aclError aclrtMemSetAccess(void *virPtr, size_t size, aclrtMemAccessDesc *desc,
				  size_t count)
{
	aclError rc = fake_enter_ctx(FE_aclrtMemSetAccess);

	if (rc == ACL_SUCCESS)
		rc = set_access((uintptr_t)virPtr, size, desc, count);
	return fake_leave(rc);
}
