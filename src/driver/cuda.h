/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA driver, loaded once with dlopen and resolved into one table. */
#ifndef SSEG_DRIVER_CUDA_H
#define SSEG_DRIVER_CUDA_H

#include "driver/cuda_abi.h"
#include "internal.h"

struct sseg_cuda {
	char path[160]; /* the library loaded */
	int version;    /* cuDriverGetVersion */
	int vmm;     /* every VMM entry point resolved */
	PFN_cuGetErrorName cuGetErrorName;
	PFN_cuInit cuInit;
	PFN_cuDriverGetVersion cuDriverGetVersion;
	PFN_cuDeviceGetCount cuDeviceGetCount;
	PFN_cuDeviceGet cuDeviceGet;
	PFN_cuDeviceGetAttribute cuDeviceGetAttribute;
	PFN_cuDeviceCanAccessPeer cuDeviceCanAccessPeer;
	PFN_cuDeviceGetUuid_v2 cuDeviceGetUuid; /* optional (11.4 on); NULL without */
	PFN_cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRetain;
	PFN_cuDevicePrimaryCtxRelease cuDevicePrimaryCtxRelease;
	PFN_cuCtxSetCurrent cuCtxSetCurrent;
	PFN_cuCtxGetCurrent cuCtxGetCurrent;
	PFN_cuCtxSynchronize cuCtxSynchronize;
	PFN_cuMemHostRegister cuMemHostRegister;
	PFN_cuMemHostUnregister cuMemHostUnregister;
	PFN_cuMemHostGetDevicePointer cuMemHostGetDevicePointer;
	/* VMM: optional (drivers before 10.2 lack them) */
	PFN_cuMemGetAllocationGranularity cuMemGetAllocationGranularity;
	PFN_cuMemCreate cuMemCreate;
	PFN_cuMemRelease cuMemRelease;
	PFN_cuMemAddressReserve cuMemAddressReserve;
	PFN_cuMemAddressFree cuMemAddressFree;
	PFN_cuMemMap cuMemMap;
	PFN_cuMemUnmap cuMemUnmap;
	PFN_cuMemSetAccess cuMemSetAccess;
	PFN_cuMemExportToShareableHandle cuMemExportToShareableHandle;
	PFN_cuMemImportFromShareableHandle cuMemImportFromShareableHandle;
};

/* Loads and initializes the driver once per process. On failure returns a
 * negative errno and the sentence says why CUDA is unavailable (no driver,
 * old driver, no device); the same answer is given on every call. */
SSEG_HIDDEN int sseg_cuda_get(const struct sseg_cuda **cuda);
/* Makes ctx current on this thread and remembers what was (the caller's
 * own context, a framework's); sseg_cuda_leave puts that back, so the
 * library never leaves the caller's thread on another device. */
SSEG_HIDDEN int sseg_cuda_enter(const struct sseg_cuda *cu, CUcontext ctx, CUcontext *saved);
SSEG_HIDDEN void sseg_cuda_leave(const struct sseg_cuda *cu, CUcontext saved);
/* The driver's name for a result ("CUDA_ERROR_OUT_OF_MEMORY"). */
SSEG_HIDDEN const char *sseg_cuda_error_name(CUresult r);
/* 0 for CUDA_SUCCESS; else -EIO (-ENOMEM for out of memory) with a sentence
 * naming the call and the driver's error. */
SSEG_HIDDEN int sseg_cuda_result(CUresult r, const char *call);
/* The same, with what the error means here and what to do after it. */
SSEG_HIDDEN int sseg_cuda_result_hint(CUresult r, const char *call, const char *hint);

#endif
