/* SPDX-License-Identifier: Apache-2.0 */
/* Symbol lookup (the only way in, as with the real driver), error names,
 * initialization, devices and primary contexts. */
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "fake/kit/names.h"

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

FK_API FAKE_FN(PFN_cuGetProcAddress_v2, cuGetProcAddress_v2);
FK_API FAKE_FN(PFN_cuGetProcAddress_v1, cuGetProcAddress);

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
		if (i == FE_cuDeviceGetUuid && version < FAKE_UUID_V2_VERSION)
			return (void *)fake_cuDeviceGetUuid_v1;
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
FK_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
				    cuuint64_t flags, int *symbol_status)
{
	return fake_cuGetProcAddress(symbol, pfn, version, flags, symbol_status);
}

FK_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	return fake_cuGetProcAddress_v1(symbol, pfn, version, flags);
}

CUresult fake_cuGetErrorName(CUresult error, const char **name)
{
	CUresult rc = fake_enter(FE_cuGetErrorName);

	if (rc == CUDA_SUCCESS && !name)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS) {
		*name = fk_error_name(error);
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
	if (rc == CUDA_SUCCESS) {
		fake.initialized = 1;
		fake.init_pid = getpid();
	}
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

/* The attributes the fake models, each from the first driver version whose
 * cuda.h declares it (12.2: HOST_NUMA_ID, 12.3: fabric handles, 12.9:
 * HOST_NUMA VMM; the others predate the oldest driver the fake offers). A
 * driver answers INVALID_VALUE for an attribute it does not know, and so
 * does the fake for every attribute it does not model: a query the library
 * starts to depend on fails here first instead of reading 0. */
static const struct {
	int attrib;
	int since;
	size_t value; /* offset of the int in struct fake_config */
} attributes[] = {
#define ATTR(name, since, field) \
	{ CU_DEVICE_ATTRIBUTE_##name, since, offsetof(struct fake_config, field) }
	ATTR(UNIFIED_ADDRESSING, 0, uva),
	ATTR(CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 0, host_pointer),
	ATTR(HOST_REGISTER_SUPPORTED, 0, host_register),
	ATTR(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0, pageable_host_pt),
	ATTR(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0, vmm),
	ATTR(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0, posix_fd),
	ATTR(READ_ONLY_HOST_REGISTER_SUPPORTED, 0, ro_register),
	ATTR(HANDLE_TYPE_FABRIC_SUPPORTED, 12030, fabric),
	ATTR(HOST_NUMA_ID, 12020, numa),
	ATTR(HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 12090, host_numa_vmm),
#undef ATTR
};

static CUresult attribute(int attrib, CUdevice dev, int *value)
{
	for (size_t i = 0; i < sizeof(attributes) / sizeof(attributes[0]); i++) {
		if (attributes[i].attrib != attrib || fake.cfg.driver < attributes[i].since)
			continue;
		if (attrib == CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID)
			*value = fake.cfg.numa[dev % fake.cfg.numa_count];
		else
			*value = *(const int *)((const char *)&fake.cfg + attributes[i].value);
		if ((attrib == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ||
		     attrib == CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) &&
		    !fake_device_vmm(dev))
			*value = 0;
		return CUDA_SUCCESS;
	}
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult fake_cuDeviceGetAttribute(int *value, int attrib, CUdevice dev)
{
	CUresult rc = fake_enter(FE_cuDeviceGetAttribute);

	if (rc == CUDA_SUCCESS && !value)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && !fake_device_valid(dev))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS)
		rc = attribute(attrib, dev, value);
	return fake_leave(rc);
}

/* A device is not its own peer: the docs speak of two devices, and 0 is
 * the stricter answer for dev == peer. */
CUresult fake_cuDeviceCanAccessPeer(int *can_access, CUdevice dev, CUdevice peer)
{
	CUresult rc = fake_enter(FE_cuDeviceCanAccessPeer);

	if (rc == CUDA_SUCCESS && !can_access)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc == CUDA_SUCCESS && (!fake_device_valid(dev) || !fake_device_valid(peer)))
		rc = CUDA_ERROR_INVALID_DEVICE;
	if (rc == CUDA_SUCCESS)
		*can_access = dev != peer && fake_peer_access(dev, peer);
	return fake_leave(rc);
}

/* The same 16 bytes for a device in every process, as a GPU's UUID is. */
static CUresult device_uuid(CUuuid *uuid, CUdevice dev)
{
	static const char prefix[] = "sseg-fakegpu";

	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fake_device_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	memset(uuid->bytes, 0, sizeof(uuid->bytes));
	memcpy(uuid->bytes, prefix, sizeof(prefix) - 1); /* 12 bytes, no NUL */
	uuid->bytes[15] = (char)dev;
	return CUDA_SUCCESS;
}

/* _v2 answers a MIG instance's own UUID where v1 answers the GPU's; the
 * fake has no MIG, so both give the device's. */
CUresult fake_cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	CUresult rc = fake_enter(FE_cuDeviceGetUuid);

	if (rc == CUDA_SUCCESS)
		rc = device_uuid(uuid, dev);
	return fake_leave(rc);
}

CUresult fake_cuDeviceGetUuid_v1(CUuuid *uuid, CUdevice dev)
{
	return fake_cuDeviceGetUuid(uuid, dev);
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
		fk_bug("cuDevicePrimaryCtxRelease(%d) without a retain", dev);
		rc = CUDA_ERROR_INVALID_CONTEXT;
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
		rc = CUDA_ERROR_INVALID_CONTEXT;
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

/* Work queued in the current context would finish here; the fake's copies
 * are synchronous, so there is none, but the call needs a context as its
 * return list says (INVALID_CONTEXT). */
CUresult fake_cuCtxSynchronize(void)
{
	CUresult rc = fake_enter_ctx(FE_cuCtxSynchronize, NULL);

	return fake_leave(rc);
}

/* Callers hold the lock. A released primary context is no longer current. */
int fake_context_current(void)
{
	return current_context && context_live(current_context);
}

int fake_current_device(void)
{
	return fake_context_current() ? current_context->device : -1;
}

CUresult fake_enter_ctx(enum fake_entry entry, const int *rule)
{
	CUresult rc = fake_enter(entry);

	if (rc == CUDA_SUCCESS && (!rule || *rule) && !fake_context_current())
		rc = CUDA_ERROR_INVALID_CONTEXT;
	return rc;
}
