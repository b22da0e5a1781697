/* Host registration: a table of registered ranges with their flags. Like
 * the real driver, it needs a current context (unless need_ctx=0) and
 * refuses a single registration above a size limit. */
#include <sys/mman.h>

#include "fake_cuda.h"

/* PORTABLE, DEVICEMAP, IOMEMORY, READ_ONLY */
#define KNOWN_REGISTER_FLAGS 0xfu

static CUresult need_context(void)
{
	if (fake.cfg.need_ctx && !fake_context_current())
		return FAKE_ERROR_INVALID_CONTEXT;
	return CUDA_SUCCESS;
}

/* The registration that holds p, or NULL. */
static struct fake_range *registration_of(uintptr_t p)
{
	for (int i = 0; i < FAKE_MAX_REGISTRATIONS; i++) {
		struct fake_range *r = &fake.registrations[i];

		if (r->start && p >= r->start && p - r->start < r->size)
			return r;
	}
	return NULL;
}

static CUresult host_register(uintptr_t p, size_t bytes, unsigned flags)
{
	struct fake_range *r;

	if (!p || !bytes || bytes > fake.cfg.max_register || (flags & ~KNOWN_REGISTER_FLAGS))
		return CUDA_ERROR_INVALID_VALUE;
	/* The driver pins the pages: the whole range must be mapped. */
	if (madvise((void *)(p & ~(uintptr_t)4095), bytes + (p & 4095), MADV_NORMAL) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_range_overlap(fake.registrations, FAKE_MAX_REGISTRATIONS, p, bytes))
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	r = fake_range_slot(fake.registrations, FAKE_MAX_REGISTRATIONS);
	if (!r)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*r = (struct fake_range){ .start = p, .size = bytes, .flags = flags };
	return CUDA_SUCCESS;
}

CUresult fake_cuMemHostRegister(void *p, size_t bytes, unsigned int flags)
{
	CUresult rc = fake_enter(FE_cuMemHostRegister);

	if (rc == CUDA_SUCCESS)
		rc = need_context();
	if (rc == CUDA_SUCCESS)
		rc = host_register((uintptr_t)p, bytes, flags);
	return fake_leave(rc);
}

static CUresult host_unregister(uintptr_t p)
{
	struct fake_range *r = fake_range_at(fake.registrations, FAKE_MAX_REGISTRATIONS, p);

	if (!r) {
		fake_bug("cuMemHostUnregister(%#lx) is not the start of a registration",
			 (unsigned long)p);
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	}
	*r = (struct fake_range){ 0 };
	return CUDA_SUCCESS;
}

CUresult fake_cuMemHostUnregister(void *p)
{
	CUresult rc = fake_enter(FE_cuMemHostUnregister);

	if (rc == CUDA_SUCCESS)
		rc = need_context();
	if (rc == CUDA_SUCCESS)
		rc = host_unregister((uintptr_t)p);
	return fake_leave(rc);
}

/* Unified addressing: the device sees registered memory at its host address. */
CUresult fake_cuMemHostGetDevicePointer(CUdeviceptr *dptr, void *p, unsigned int flags)
{
	CUresult rc = fake_enter(FE_cuMemHostGetDevicePointer);
	const struct fake_range *r;

	if (rc == CUDA_SUCCESS)
		rc = need_context();
	if (rc == CUDA_SUCCESS && (!dptr || flags))
		rc = CUDA_ERROR_INVALID_VALUE;
	r = rc == CUDA_SUCCESS ? registration_of((uintptr_t)p) : NULL;
	if (rc == CUDA_SUCCESS && (!r || !(r->flags & CU_MEMHOSTREGISTER_DEVICEMAP)))
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)(uintptr_t)p;
	return fake_leave(rc);
}
