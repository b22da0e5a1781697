/* SPDX-License-Identifier: Apache-2.0 */
/* Host registration: a table of registered ranges with their flags. Like
 * the real driver, it needs a current context (unless need_ctx=0: the
 * return lists of all three calls name CUDA_ERROR_INVALID_CONTEXT), refuses
 * a single registration above a size limit, and READ_ONLY where the device
 * lacks the attribute for it. */
#include <stdio.h>
#include <sys/mman.h>

#include "fake_cuda.h"

/* Where registrations appear to the device when its pointers are not the
 * host's (host_pointer=0): each registration at its own 1 TiB slot. */
#define DEVICE_VIEW 0x7e0000000000ull
#define DEVICE_SLOT (1ull << 40)

/* PORTABLE, DEVICEMAP, IOMEMORY, READ_ONLY */
#define KNOWN_REGISTER_FLAGS 0xfu

/* Whether the CPU may write every byte of [p, p+bytes): /proc/self/maps. */
static int cpu_writable(uintptr_t p, size_t bytes)
{
	FILE *f = fopen("/proc/self/maps", "r");
	uintptr_t at = p, end = p + bytes;
	unsigned long lo, hi;
	char perms[8], line[512];

	while (f && at < end && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || hi <= at || lo > at)
			continue;
		if (perms[1] != 'w')
			break;
		at = hi; /* the lines come in address order */
	}
	if (f)
		fclose(f);
	return at >= end;
}

/* What the device and the sandbox allow before anything is pinned.
 * - HOST_REGISTER_SUPPORTED 0: the docs do not say what the call answers;
 *   the stricter reading is that it fails.
 * - READ_ONLY: "Using this flag with a current context associated with a
 *   device that does not have this attribute set will cause
 *   cuMemHostRegister to error with CUDA_ERROR_NOT_SUPPORTED" (cuda.h).
 * - register_aligned=1: the resource manager's ioctl takes page-aligned
 *   addresses only (NV_ERR_NOT_SUPPORTED, in the kernel module's
 *   RmCreateOsDescriptor and in gVisor's nvproxy alike); the API sets no
 *   alignment and natively accepts any pointer, so this is off by default.
 *   Which CUresult a sandbox turns it into is not documented: the fake
 *   answers NOT_SUPPORTED, and tests/gpu records the real one. */
static CUresult check_register(uintptr_t p, unsigned flags)
{
	if (!fake.cfg.host_register)
		return CUDA_ERROR_NOT_SUPPORTED;
	if ((flags & CU_MEMHOSTREGISTER_READ_ONLY) && !fake.cfg.ro_register)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (fake.cfg.register_aligned && !fake_aligned(p, 4096))
		return CUDA_ERROR_NOT_SUPPORTED;
	return CUDA_SUCCESS;
}

/* READ_ONLY "is required in order to register memory mapped to the CPU as
 * read-only" on platforms without PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES
 * (cuda.h). Which code the driver gives without it is not documented: the
 * fake answers INVALID_VALUE (a guess; tests/gpu records the real one). */
static CUresult check_writable(uintptr_t p, size_t bytes, unsigned flags)
{
	if ((flags & CU_MEMHOSTREGISTER_READ_ONLY) || fake.cfg.pageable_host_pt ||
	    cpu_writable(p, bytes))
		return CUDA_SUCCESS;
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult host_register(uintptr_t p, size_t bytes, unsigned flags)
{
	struct fake_range *r;
	CUresult rc;

	if (!p || !bytes || bytes > fake.cfg.max_register || (flags & ~KNOWN_REGISTER_FLAGS))
		return CUDA_ERROR_INVALID_VALUE;
	rc = check_register(p, flags);
	if (rc != CUDA_SUCCESS)
		return rc;
	/* The driver pins the pages: the whole range must be mapped. */
	if (madvise((void *)(p & ~(uintptr_t)4095), bytes + (p & 4095), MADV_NORMAL) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	rc = check_writable(p, bytes, flags);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (fk_overlap(FK_TABLE(fake.registrations), p, bytes))
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	r = fk_free_slot(FK_TABLE(fake.registrations));
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*r = (struct fake_range){ .start = p, .size = bytes, .flags = flags };
	return CUDA_SUCCESS;
}

CUresult fake_cuMemHostRegister(void *p, size_t bytes, unsigned int flags)
{
	CUresult rc = fake_enter_ctx(FE_cuMemHostRegister, &fake.cfg.need_ctx);

	if (rc == CUDA_SUCCESS)
		rc = host_register((uintptr_t)p, bytes, flags);
	return fake_leave(rc);
}

static CUresult host_unregister(uintptr_t p)
{
	struct fake_range *r = fk_slot_at(FK_TABLE(fake.registrations), p);

	if (!r) {
		fk_bug("cuMemHostUnregister(%#lx) is not the start of a registration",
			 (unsigned long)p);
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	}
	*r = (struct fake_range){ 0 };
	return CUDA_SUCCESS;
}

CUresult fake_cuMemHostUnregister(void *p)
{
	CUresult rc = fake_enter_ctx(FE_cuMemHostUnregister, &fake.cfg.need_ctx);

	if (rc == CUDA_SUCCESS)
		rc = host_unregister((uintptr_t)p);
	return fake_leave(rc);
}

/* Unified addressing: the device sees registered memory at its host
 * address (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM). cuda.h says host
 * memory is mapped on such systems "regardless of whether or not" DEVICEMAP
 * was given for cuMemHostAlloc memory and is silent about registered
 * memory; the fake follows the unified-addressing reading (the library
 * must not depend on the fake refusing), and uva=0 demands the flag.
 * "If any device visible to the application has a zero value for" that
 * attribute, the device pointer "will not match the original host pointer"
 * (cuda.h): host_pointer=0 gives each registration its own device range, so
 * two registrations side by side are not side by side for the device. */
static CUdeviceptr device_view(const struct fake_range *r, uintptr_t p)
{
	if (fake.cfg.host_pointer)
		return (CUdeviceptr)p;
	return DEVICE_VIEW + (CUdeviceptr)(r - fake.registrations) * DEVICE_SLOT + (p - r->start);
}

CUresult fake_cuMemHostGetDevicePointer(CUdeviceptr *dptr, void *p, unsigned int flags)
{
	CUresult rc = fake_enter_ctx(FE_cuMemHostGetDevicePointer, &fake.cfg.need_ctx);
	const struct fake_range *r;

	if (rc == CUDA_SUCCESS && (!dptr || flags))
		rc = CUDA_ERROR_INVALID_VALUE;
	r = rc == CUDA_SUCCESS ? fk_slot_holding(FK_TABLE(fake.registrations), (uintptr_t)p) : NULL;
	if (rc == CUDA_SUCCESS &&
	    (!r || (!fake.cfg.uva && !(r->flags & CU_MEMHOSTREGISTER_DEVICEMAP))))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*dptr = device_view(r, (uintptr_t)p);
	return fake_leave(rc);
}
