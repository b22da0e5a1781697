/* SPDX-License-Identifier: Apache-2.0 */
/* Virtual address ranges: a reservation is a PROT_NONE anonymous mapping,
 * aclrtMapMem puts a whole allocation's memfd over part of one, read-write
 * for the CPU (the memory is the host's: the driver skips a host entry on
 * the owner, halMemSetAccess / svm_mem_set_access), not copied into a
 * forked child (don't-fork, as the driver's own). aclrtMemSetAccess
 * reads its descriptors as the driver does, and grants devices.
 * aclrtUnmapMem puts the reservation back. */
#include <string.h>
#include <sys/mman.h>

#include "fake_acl.h"
#include "fake/kit/va.h"

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
	/* A whole number of GiB is 1 GiB-aligned, so that 1 GiB pages map
	 * into it: public users map them into ranges reserved with
	 * alignment 0, which is all the reference lets a caller pass. */
	start = fk_va_reserve(size, size % ((size_t)1 << 30) ? fake.cfg.granularity
							      : (size_t)1 << 30);
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
	return fake_huge1g_step(h, FAKE_HUGE1G_MAP, "aclrtMapMem");
}

static aclError map(uintptr_t start, size_t size, uintptr_t handle)
{
	const struct fake_handle *h = fake_handle_find(handle);
	struct fake_range *res = NULL, *m;
	aclError rc = check_map(start, size, h, &res);

	if (rc != ACL_SUCCESS)
		return rc;
	m = fk_free_slot(FK_TABLE(fake.mappings));
	if (!m || mmap((void *)start, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, h->fd,
		       FAKE_HEADER) == MAP_FAILED)
		return fake_refuse(ACL_ERROR_RT_MEMORY_ALLOCATION, "cannot map %zu bytes", size);
	/* The driver's mappings are not copied into a forked child: it has
	 * nothing at this address, and its first touch is SIGSEGV. */
	if (madvise((void *)start, size, MADV_DONTFORK)) {
		fk_va_restore((void *)start, size);
		return fake_refuse(ACL_ERROR_RT_MEMORY_ALLOCATION, "cannot mark %zu bytes", size);
	}
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

/* What the driver reads: struct drv_mem_access_desc (ascend_hal_define.h),
 * 20 bytes where aclrtMemAccessDesc has 24. The runtime hands the array on
 * unconverted (NpuDriver::MemSetAccess), so element i is read at 20 * i:
 * only the first of several is whole. */
struct drv_access_desc {
	uint32_t type;     /* drv_mem_access_type */
	uint32_t id;       /* drv_mem_location */
	uint32_t side;     /* MEM_HOST_SIDE 0, MEM_DEV_SIDE 1 */
	uint32_t rsv[2];
};
_Static_assert(sizeof(struct drv_access_desc) == 20, "the driver's descriptor");

#define DRV_ACCESS_READ 0x1
#define DRV_ACCESS_READWRITE 0x3

static struct drv_access_desc drv_desc(const aclrtMemAccessDesc *desc, size_t i)
{
	struct drv_access_desc d;

	memcpy(&d, (const char *)desc + i * sizeof(d), sizeof(d));
	return d;
}

/* devmm_access_desc_check: every descriptor before any is applied. */
static aclError check_desc(const struct drv_access_desc *d, size_t i)
{
	if (d->type == 0 || d->type == DRV_ACCESS_READ)
		return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
				   "Not support type. (index=%zu; type=%u)", i, d->type);
	if (d->type != DRV_ACCESS_READWRITE)
		return fake_refuse(ACL_ERROR_INVALID_PARAM, "Invalid type. (index=%zu; type=%u)",
				   i, d->type);
	if (d->side == ACL_MEM_LOCATION_TYPE_HOST)
		return d->id == 0 ? ACL_SUCCESS
				  : fake_refuse(ACL_ERROR_INVALID_PARAM, "Invalid host id. (id=%u)",
						d->id);
	if (d->side == ACL_MEM_LOCATION_TYPE_DEVICE)
		return fake_logic_valid((int32_t)d->id)
			       ? ACL_SUCCESS
			       : fake_refuse(ACL_ERROR_RT_INVALID_DEVICEID, "no device %u", d->id);
	return fake_refuse(ACL_ERROR_INVALID_PARAM, "Invalid side. (side=%u)", d->side);
}

/* svm_mem_set_access and devmm_mem_config_access for host memory: a host
 * entry is skipped where the memory was allocated, refused where it was
 * imported ("h2h map"); a device reaches host memory over HCCS only
 * (devmm_d2h_access_mmap). The id is the driver's logical device, not the
 * user's ordinal. Nothing is rolled back. */
static aclError apply_desc(struct fake_range *m, const struct drv_access_desc *d)
{
	const struct fake_handle *h = fake_handle_find(m->handle);

	if (d->side == ACL_MEM_LOCATION_TYPE_HOST && h && h->origin == FAKE_IMPORTED)
		return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
				   "h2h map: a host entry on imported host memory");
	if (d->side == ACL_MEM_LOCATION_TYPE_HOST)
		return ACL_SUCCESS;
	if (!fake.cfg.hccs)
		return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
				   "Only support hccs connect: device %u reaches host memory over "
				   "PCIe (hccs=0)", d->id);
	m->devices |= 1u << d->id;
	return ACL_SUCCESS;
}

/* The range must be one whole mapping: access before map fails. */
static aclError set_access(uintptr_t start, size_t size, const aclrtMemAccessDesc *desc,
			   size_t n)
{
	struct fake_range *m = fk_slot_at(FK_TABLE(fake.mappings), start);
	struct drv_access_desc d;
	aclError rc = ACL_SUCCESS;

	if (!desc || !n)
		return fake_refuse(ACL_ERROR_INVALID_PARAM, "no descriptor");
	if (!m || m->size != size)
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID,
				   "%#lx + %zu is not what aclrtMapMem mapped", (unsigned long)start,
				   size);
	rc = fake_huge1g_step(fake_handle_find(m->handle), FAKE_HUGE1G_ACCESS, "aclrtMemSetAccess");
	for (size_t i = 0; i < n && rc == ACL_SUCCESS; i++) {
		d = drv_desc(desc, i);
		rc = check_desc(&d, i);
	}
	for (size_t i = 0; i < n && rc == ACL_SUCCESS; i++) {
		d = drv_desc(desc, i);
		rc = apply_desc(m, &d);
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
