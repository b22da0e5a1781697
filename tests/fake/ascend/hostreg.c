/* SPDX-License-Identifier: Apache-2.0 */
/* Host registration: a table of registered ranges and the device each was
 * registered for (the thread's current one). The reference: the address is
 * 4 KiB-aligned, only the mapped type is supported (read-only and I/O
 * memory are reserved), and the device address handed out is the device's
 * own view, not the host address. */
#include <sys/mman.h>

#include "fake_acl.h"

#define REGISTER_IOMEMORY 0x4
#define REGISTER_READONLY 0x8

static aclError check_register(uintptr_t p, uint64_t size, int type)
{
	if (!p || p % 4096 || !size)
		return fake_refuse(ACL_ERROR_INVALID_PARAM,
				   "the address must be 4 KiB-aligned and the size not 0");
	if (type == REGISTER_IOMEMORY || type == REGISTER_READONLY)
		return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "register type %d is reserved",
				   type);
	if (type != ACL_HOST_REGISTER_MAPPED)
		return fake_refuse(ACL_ERROR_INVALID_PARAM, "register type %d", type);
	if (!fake.cfg.host_register)
		return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
				   "aclrtHostRegister is not supported on this product");
	/* The runtime pins the pages: the whole range must be mapped. */
	if (madvise((void *)p, size, MADV_NORMAL) < 0)
		return fake_refuse(ACL_ERROR_INVALID_PARAM, "the range is not mapped");
	if (fk_overlap(FK_TABLE(fake.registrations), p, size))
		return fake_refuse(ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "registered already");
	return ACL_SUCCESS;
}

static aclError host_register(uintptr_t p, uint64_t size, int type, void **devPtr)
{
	struct fake_range *r;
	aclError rc = check_register(p, size, type);

	if (rc != ACL_SUCCESS)
		return rc;
	r = fk_free_slot(FK_TABLE(fake.registrations));
	if (!r)
		return fake_refuse(ACL_ERROR_RT_MEMORY_ALLOCATION, "too many registrations");
	*r = (struct fake_range){ .start = p, .size = size,
				  .devices = (uint32_t)fake_current_device() };
	*devPtr = (void *)(p + FAKE_DEVICE_OFFSET);
	return ACL_SUCCESS;
}

FK_API aclError aclrtHostRegister(void *ptr, uint64_t size, aclrtHostRegisterType type,
				  void **devPtr)
{
	aclError rc = fake_enter_ctx(FE_aclrtHostRegister);

	if (rc == ACL_SUCCESS && !devPtr)
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "devPtr is NULL");
	if (rc == ACL_SUCCESS)
		rc = host_register((uintptr_t)ptr, size, (int)type, devPtr);
	return fake_leave(rc);
}

FK_API aclError aclrtHostUnregister(void *ptr)
{
	aclError rc = fake_enter_ctx(FE_aclrtHostUnregister);
	struct fake_range *r = NULL;

	if (rc == ACL_SUCCESS && !(r = fk_slot_at(FK_TABLE(fake.registrations), (uintptr_t)ptr))) {
		fk_bug("aclrtHostUnregister(%p) is not the start of a registration", ptr);
		rc = fake_refuse(ACL_ERROR_HOST_MEMORY_NOT_REGISTERED, "%p is not registered", ptr);
	}
	if (r)
		*r = (struct fake_range){ 0 };
	return fake_leave(rc);
}
