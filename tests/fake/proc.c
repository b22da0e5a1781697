/* Symbol lookup (the only way in, as with the real driver), error names,
 * initialization, devices and primary contexts. */
#include <string.h>

#include "fake_cuda.h"

/* CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT in the driver's enum. */
#define FAKE_VERSION_NOT_SUFFICIENT 2

struct CUctx_st {
	int device;
};

static struct CUctx_st primary_contexts[FAKE_MAX_DEVICES];
/* Like the driver's, the current context belongs to the calling thread. */
static __thread CUcontext current_context;

static const struct {
	const char *name;
	int version;
	void *fn;
} entries[] = {
#define FAKE_TABLE(name, version, init) { #name, version, (void *)fake_##name },
	FAKE_ENTRIES(FAKE_TABLE)
#undef FAKE_TABLE
};

FAKE_API FAKE_FN(PFN_cuGetProcAddress_v2, cuGetProcAddress_v2);
FAKE_API FAKE_FN(PFN_cuGetProcAddress_v1, cuGetProcAddress);

/* Callers hold the lock. */
void *fake_proc_lookup(const char *symbol, int version, int *status)
{
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
		if (strcmp(entries[i].name, symbol) != 0)
			continue;
		if (version < entries[i].version) {
			*status = FAKE_VERSION_NOT_SUFFICIENT;
			return NULL;
		}
		*status = CU_GET_PROC_ADDRESS_SUCCESS;
		/* The same addresses dlsym gives, as the driver does. */
		if (i == FE_cuGetProcAddress)
			return version < 12000 ? (void *)cuGetProcAddress : (void *)cuGetProcAddress_v2;
		return entries[i].fn;
	}
	*status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
	return NULL;
}

static CUresult get_proc_address(const char *symbol, void **pfn, int version, cuuint64_t flags,
				 int *status)
{
	if (!symbol || !pfn || flags > 2)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = fake_proc_lookup(symbol, version, status);
	return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult fake_cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
			       int *symbol_status)
{
	CUresult rc = fake_enter(FE_cuGetProcAddress);
	int status = 1;

	if (rc == CUDA_SUCCESS)
		rc = get_proc_address(symbol, pfn, version, flags, &status);
	else if (pfn)
		*pfn = NULL;
	if (symbol_status)
		*symbol_status = status;
	return fake_leave(rc);
}

CUresult fake_cuGetProcAddress_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	return fake_cuGetProcAddress(symbol, pfn, version, flags, NULL);
}

/* The two symbols a loader finds with dlsym. */
FAKE_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
				      cuuint64_t flags, int *symbol_status)
{
	return fake_cuGetProcAddress(symbol, pfn, version, flags, symbol_status);
}

FAKE_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	return fake_cuGetProcAddress_v1(symbol, pfn, version, flags);
}

CUresult fake_cuGetErrorName(CUresult error, const char **name)
{
	CUresult rc = fake_enter(FE_cuGetErrorName);

	if (rc == CUDA_SUCCESS && !name)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		*name = fake_error_name(error);
		rc = *name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	}
	return fake_leave(rc);
}

CUresult fake_cuInit(unsigned int flags)
{
	CUresult rc = fake_enter(FE_cuInit);

	if (rc == CUDA_SUCCESS && flags != 0)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && fake.cfg.devices == 0)
		rc = CUDA_ERROR_NO_DEVICE;
	if (rc == CUDA_SUCCESS)
		fake.initialized = 1;
	return fake_leave(rc);
}

CUresult fake_cuDriverGetVersion(int *version)
{
	CUresult rc = fake_enter(FE_cuDriverGetVersion);

	if (rc == CUDA_SUCCESS && !version)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*version = fake.cfg.driver;
	return fake_leave(rc);
}

CUresult fake_cuDeviceGetCount(int *count)
{
	CUresult rc = fake_enter(FE_cuDeviceGetCount);

	if (rc == CUDA_SUCCESS && !count)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*count = fake.cfg.devices;
	return fake_leave(rc);
}

CUresult fake_cuDeviceGet(CUdevice *device, int ordinal)
{
	CUresult rc = fake_enter(FE_cuDeviceGet);

	if (rc == CUDA_SUCCESS && !device)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && !fake_device_valid(ordinal))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS)
		*device = ordinal;
	return fake_leave(rc);
}

static int attribute(int attrib, CUdevice dev)
{
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
		return fake.cfg.vmm;
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
		return fake.cfg.posix_fd;
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
		return fake.cfg.fabric;
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
		return fake.cfg.numa[dev % fake.cfg.numa_count];
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
		return fake.cfg.host_numa_vmm;
	default:
		return 0;
	}
}

CUresult fake_cuDeviceGetAttribute(int *value, int attrib, CUdevice dev)
{
	CUresult rc = fake_enter(FE_cuDeviceGetAttribute);

	if (rc == CUDA_SUCCESS && !value)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && !fake_device_valid(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS)
		*value = attribute(attrib, dev);
	return fake_leave(rc);
}

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
	CUresult rc = fake_enter(FE_cuDevicePrimaryCtxRetain);

	if (rc == CUDA_SUCCESS && !ctx)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && !fake_device_valid(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS) {
		primary_contexts[dev].device = dev;
		fake.ctx_refs[dev]++;
		*ctx = &primary_contexts[dev];
	}
	return fake_leave(rc);
}

CUresult fake_cuDevicePrimaryCtxRelease(CUdevice dev)
{
	CUresult rc = fake_enter(FE_cuDevicePrimaryCtxRelease);

	if (rc == CUDA_SUCCESS && !fake_device_valid(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS && fake.ctx_refs[dev] == 0) {
		fake_bug("cuDevicePrimaryCtxRelease(%d) without a retain", dev);
		rc = FAKE_ERROR_INVALID_CONTEXT;
	}
	if (rc == CUDA_SUCCESS)
		fake.ctx_refs[dev]--;
	return fake_leave(rc);
}

static int context_live(CUcontext ctx)
{
	for (int dev = 0; dev < FAKE_MAX_DEVICES; dev++)
		if (ctx == &primary_contexts[dev])
			return fake.ctx_refs[dev] > 0;
	return 0;
}

CUresult fake_cuCtxSetCurrent(CUcontext ctx)
{
	CUresult rc = fake_enter(FE_cuCtxSetCurrent);

	if (rc == CUDA_SUCCESS && ctx && !context_live(ctx))
		rc = FAKE_ERROR_INVALID_CONTEXT;
	if (rc == CUDA_SUCCESS)
		current_context = ctx;
	return fake_leave(rc);
}

CUresult fake_cuCtxGetCurrent(CUcontext *ctx)
{
	CUresult rc = fake_enter(FE_cuCtxGetCurrent);

	if (rc == CUDA_SUCCESS && !ctx)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS)
		*ctx = current_context;
	return fake_leave(rc);
}

/* Callers hold the lock. A released primary context is no longer current. */
int fake_context_current(void)
{
	return current_context && context_live(current_context);
}
