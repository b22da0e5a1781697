/* SPDX-License-Identifier: Apache-2.0 */
/* The fake CUDA driver as test_fake_cuda reaches it: loaded the way the
 * backend loads libcuda.so.1, with the helpers every case is written on. */
#ifndef SSEG_FAKE_CUDA_HARNESS_H
#define SSEG_FAKE_CUDA_HARNESS_H

#include <stddef.h>

#include "driver/cuda_abi.h"
#include "fake/cuda/sseg_fake_cuda.h"
#include "testutil.h"

#define MiB (1ull << 20)
#define GRAN (2 * MiB)
#define SEGV_EXIT 42

#define CHECK_CU(expr, expect)                                                       \
	do {                                                                         \
		CUresult cu_ = (expr);                                               \
		if (cu_ != (expect)) {                                               \
			fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, \
				__LINE__, #expr, cu_, (expect));                     \
			exit(1);                                                     \
		}                                                                    \
	} while (0)
#define CU_OK(expr) CHECK_CU(expr, CUDA_SUCCESS)

typedef PFN_cuDeviceGetUuid_v2 PFN_cuDeviceGetUuid;

#define DRIVER_ENTRIES(X)                \
	X(cuGetErrorName)                \
	X(cuInit)                        \
	X(cuDriverGetVersion)            \
	X(cuDeviceGetCount)              \
	X(cuDeviceGet)                   \
	X(cuDeviceGetAttribute)          \
	X(cuDeviceCanAccessPeer)         \
	X(cuDeviceGetUuid)               \
	X(cuDevicePrimaryCtxRetain)      \
	X(cuDevicePrimaryCtxRelease)     \
	X(cuCtxSetCurrent)               \
	X(cuCtxGetCurrent)               \
	X(cuCtxSynchronize)              \
	X(cuMemGetAllocationGranularity) \
	X(cuMemCreate)                   \
	X(cuMemRelease)                  \
	X(cuMemAddressReserve)           \
	X(cuMemAddressFree)              \
	X(cuMemMap)                      \
	X(cuMemUnmap)                    \
	X(cuMemSetAccess)                \
	X(cuMemExportToShareableHandle)  \
	X(cuMemImportFromShareableHandle) \
	X(cuMemHostRegister)             \
	X(cuMemHostUnregister)           \
	X(cuMemHostGetDevicePointer)     \
	X(cuMemAlloc)                    \
	X(cuMemFree)                     \
	X(cuMemHostAlloc)                \
	X(cuMemFreeHost)                 \
	X(cuMemcpyHtoD)                  \
	X(cuMemcpyDtoH)                  \
	X(cuPointerGetAttribute)

#define CONTROL_ENTRIES(X)             \
	X(sseg_fake_cuda_fail)         \
	X(sseg_fake_cuda_configure)    \
	X(sseg_fake_cuda_calls)        \
	X(sseg_fake_cuda_live_handles) \
	X(sseg_fake_cuda_live_reservations) \
	X(sseg_fake_cuda_live_mappings) \
	X(sseg_fake_cuda_live_registrations) \
	X(sseg_fake_cuda_live_contexts) \
	X(sseg_fake_cuda_bugs)         \
	X(sseg_fake_cuda_registration) \
	X(sseg_fake_cuda_access)       \
	X(sseg_fake_cuda_granted)      \
	X(sseg_fake_cuda_reset)

/* The driver as the backend sees it, and the fake's control API. */
struct fake_cuda {
	void *lib;
	PFN_cuGetProcAddress_v2 cuGetProcAddress;
#define DRIVER_FIELD(name) PFN_##name name;
	DRIVER_ENTRIES(DRIVER_FIELD)
#undef DRIVER_FIELD
#define CONTROL_FIELD(name) __typeof__(name) *name;
	CONTROL_ENTRIES(CONTROL_FIELD)
#undef CONTROL_FIELD
};

extern struct fake_cuda cu;

struct live {
	int handles, mappings, reservations, registrations, contexts, bugs;
};

/* Loading and contexts. */
void *resolve_at(const char *name, int version);
void load(const char *config, const char *failures);
void enter_device(int dev);
void leave_device(int dev);
void start(const char *config, const char *failures);

/* Allocations, mappings and access. */
CUmemAllocationProp host_prop(int node, unsigned handle_types);
CUmemGenericAllocationHandle create(size_t size, unsigned handle_types);
CUmemAccessDesc access_desc(CUmemLocationType type, int id, CUmemAccess_flags flags);
CUresult try_access(CUdeviceptr va, size_t size, CUmemAccess_flags host, int devices);
void set_access(CUdeviceptr va, size_t size, CUmemAccess_flags host, int devices);
unsigned char *map_new(CUmemGenericAllocationHandle handle, size_t size);
CUdeviceptr va_of(const void *p);
void unmap_free(unsigned char *p, size_t size);

/* What the fake still holds. */
void check_back_to(struct live before);
void check_clean(void);
void finish(void);

/* The CPU's view of a mapping. */
int touch(unsigned char *p);
void fill(unsigned char *p, size_t size, int rank);
int holds(const unsigned char *p, size_t size, int rank);

#endif
