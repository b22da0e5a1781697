/* SPDX-License-Identifier: Apache-2.0 */
/* The driver's entry points, resolved once into the table cu. */
#ifndef SSEG_GPU_DRIVER_H
#define SSEG_GPU_DRIVER_H

#include <stddef.h>

/* The project's declarations of the driver ABI (checked against cuda.h by
 * test_cuda_abi); this program is not part of the library. */
#include "../../src/driver/cuda_abi.h"

typedef PFN_cuDeviceGetUuid_v2 PFN_cuDeviceGetUuid;

/* name, ABI version, required (else a check that needs it reports so) */
#define DRIVER(X)                                  \
	X(cuGetErrorName, 6000, 1)                 \
	X(cuInit, 2000, 1)                         \
	X(cuDriverGetVersion, 2020, 1)             \
	X(cuDeviceGetCount, 2000, 1)               \
	X(cuDeviceGet, 2000, 1)                    \
	X(cuDeviceGetAttribute, 2000, 1)           \
	X(cuDeviceCanAccessPeer, 4000, 1)          \
	X(cuDeviceGetUuid, 11040, 0)               \
	X(cuDevicePrimaryCtxRetain, 7000, 1)       \
	X(cuDevicePrimaryCtxRelease, 11000, 1)     \
	X(cuCtxSetCurrent, 4000, 1)                \
	X(cuCtxSynchronize, 2000, 1)               \
	X(cuMemAlloc, 3020, 1)                     \
	X(cuMemFree, 3020, 1)                      \
	X(cuMemHostAlloc, 2020, 1)                 \
	X(cuMemFreeHost, 2000, 1)                  \
	X(cuMemcpyHtoD, 3020, 1)                   \
	X(cuMemcpyDtoH, 3020, 1)                   \
	X(cuMemHostRegister, 6050, 1)              \
	X(cuMemHostUnregister, 4000, 1)            \
	X(cuMemHostGetDevicePointer, 3020, 1)      \
	X(cuMemGetAllocationGranularity, 10020, 0) \
	X(cuMemCreate, 10020, 0)                   \
	X(cuMemRelease, 10020, 0)                  \
	X(cuMemAddressReserve, 10020, 0)           \
	X(cuMemAddressFree, 10020, 0)              \
	X(cuMemMap, 10020, 0)                      \
	X(cuMemUnmap, 10020, 0)                    \
	X(cuMemSetAccess, 10020, 0)                \
	X(cuMemExportToShareableHandle, 10020, 0)  \
	X(cuMemImportFromShareableHandle, 10020, 0) \
	X(cuPointerGetAttribute, 4000, 0)

struct cu_driver {
#define FIELD(name, version, required) PFN_##name name;
	DRIVER(FIELD)
#undef FIELD
	const char *path;
	int version;
	int devices;
};

extern struct cu_driver cu;

/* The driver's name for r, or "CUresult N". */
const char *cu_name(CUresult r);
/* Loads and initializes the driver: 0, or -1 with why. */
int load_driver(char *why, size_t len);
CUresult enter_device(int dev);
/* The driver and device 0's context: 0, or -1 after a failing check line. */
int driver_or_report(const char *check);
int attribute(int dev, int attrib, CUresult *r);
/* Device 0's host node, as the library places its segments (-1: 0). */
int host_node(void);

#endif
