/* SPDX-License-Identifier: Apache-2.0 */
/* Every value, size and offset of src/driver/cuda_abi.h that must agree
 * with the toolkit's cuda.h, and the signature of each entry point's PFN
 * type. Included by two translation units, one over each header, each
 * turning the list into a table. */
#define SSEG_CUDA_ABI_LIST(V, S, O, P)                                       \
	V(CUDA_SUCCESS) V(CUDA_ERROR_INVALID_VALUE) V(CUDA_ERROR_OUT_OF_MEMORY) \
	V(CUDA_ERROR_NOT_INITIALIZED) V(CUDA_ERROR_NO_DEVICE)                   \
	V(CUDA_ERROR_INVALID_DEVICE) V(CUDA_ERROR_INVALID_CONTEXT)              \
	V(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) V(CUDA_ERROR_OPERATING_SYSTEM)    \
	V(CUDA_ERROR_INVALID_HANDLE)                                            \
	V(CUDA_ERROR_NOT_FOUND) V(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)    \
	V(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) V(CUDA_ERROR_NOT_PERMITTED)    \
	V(CUDA_ERROR_NOT_SUPPORTED) V(CUDA_ERROR_UNKNOWN)                       \
	V(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)                               \
	V(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM)          \
	V(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED)                          \
	V(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES)     \
	V(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)              \
	V(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)      \
	V(CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED)                \
	V(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED)                     \
	V(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID)                                     \
	V(CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)    \
	V(CU_MEM_HANDLE_TYPE_NONE) V(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)  \
	V(CU_MEM_HANDLE_TYPE_FABRIC) V(CU_MEM_ACCESS_FLAGS_PROT_NONE)           \
	V(CU_MEM_ACCESS_FLAGS_PROT_READ) V(CU_MEM_ACCESS_FLAGS_PROT_READWRITE)  \
	V(CU_MEM_LOCATION_TYPE_INVALID) V(CU_MEM_LOCATION_TYPE_DEVICE)          \
	V(CU_MEM_LOCATION_TYPE_HOST) V(CU_MEM_LOCATION_TYPE_HOST_NUMA)          \
	V(CU_MEM_ALLOCATION_TYPE_INVALID) V(CU_MEM_ALLOCATION_TYPE_PINNED)      \
	V(CU_MEM_ALLOC_GRANULARITY_MINIMUM)                                     \
	V(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) V(CU_IPC_HANDLE_SIZE)           \
	V(CU_MEMHOSTREGISTER_PORTABLE) V(CU_MEMHOSTREGISTER_DEVICEMAP)          \
	V(CU_MEMHOSTREGISTER_READ_ONLY) V(CU_GET_PROC_ADDRESS_DEFAULT)          \
	V(CU_GET_PROC_ADDRESS_SUCCESS) V(CU_POINTER_ATTRIBUTE_MEMORY_TYPE)      \
	V(CU_MEMORYTYPE_HOST) V(CU_MEMORYTYPE_DEVICE) S(CUpointer_attribute)    \
	S(CUresult) S(CUdevice) S(CUcontext) S(CUdeviceptr)                     \
	S(CUmemGenericAllocationHandle) S(cuuint64_t) S(CUmemLocation)          \
	S(CUmemAllocationProp) S(CUmemAccessDesc) S(CUmemFabricHandle)          \
	S(CUmemAllocationHandleType) S(CUmemAccess_flags) S(CUmemLocationType)  \
	S(CUuuid)                                                               \
	O(CUmemLocation, type) O(CUmemLocation, id)                             \
	O(CUmemAllocationProp, type) O(CUmemAllocationProp, requestedHandleTypes) \
	O(CUmemAllocationProp, location) O(CUmemAllocationProp, win32HandleMetaData) \
	O(CUmemAllocationProp, allocFlags) O(CUmemAccessDesc, location)         \
	O(CUmemAccessDesc, flags)                                                \
	SSEG_CUDA_PFN_LIST(P)

/* P(our type, cuda.h's type, the signature in the names both headers
 * declare): each translation unit checks its own type against the
 * signature, so the two agree. Entry points whose declaration uses int
 * where cuda.h has an enum (cuDeviceGetAttribute, cuGetProcAddress's
 * status) are covered by the sizes above instead. */
#define SSEG_CUDA_PFN_LIST(P)                                                          \
	P(PFN_cuInit, PFN_cuInit_v2000, CUresult (*)(unsigned int))                     \
	P(PFN_cuDriverGetVersion, PFN_cuDriverGetVersion_v2020, CUresult (*)(int *))    \
	P(PFN_cuDeviceGetCount, PFN_cuDeviceGetCount_v2000, CUresult (*)(int *))        \
	P(PFN_cuDeviceGet, PFN_cuDeviceGet_v2000, CUresult (*)(CUdevice *, int))        \
	P(PFN_cuDeviceCanAccessPeer, PFN_cuDeviceCanAccessPeer_v4000,                   \
	  CUresult (*)(int *, CUdevice, CUdevice))                                      \
	P(PFN_cuDeviceGetUuid_v2, PFN_cuDeviceGetUuid_v11040,                           \
	  CUresult (*)(CUuuid *, CUdevice))                                             \
	P(PFN_cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000,             \
	  CUresult (*)(CUcontext *, CUdevice))                                          \
	P(PFN_cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000,          \
	  CUresult (*)(CUdevice))                                                       \
	P(PFN_cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000, CUresult (*)(CUcontext))      \
	P(PFN_cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000, CUresult (*)(CUcontext *))    \
	P(PFN_cuCtxSynchronize, PFN_cuCtxSynchronize_v2000, CUresult (*)(void))         \
	P(PFN_cuMemGetAllocationGranularity, PFN_cuMemGetAllocationGranularity_v10020,  \
	  CUresult (*)(size_t *, const CUmemAllocationProp *,                           \
		       CUmemAllocationGranularity_flags))                               \
	P(PFN_cuMemCreate, PFN_cuMemCreate_v10020,                                      \
	  CUresult (*)(CUmemGenericAllocationHandle *, size_t,                          \
		       const CUmemAllocationProp *, unsigned long long))                \
	P(PFN_cuMemRelease, PFN_cuMemRelease_v10020,                                    \
	  CUresult (*)(CUmemGenericAllocationHandle))                                   \
	P(PFN_cuMemAddressReserve, PFN_cuMemAddressReserve_v10020,                      \
	  CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long)) \
	P(PFN_cuMemAddressFree, PFN_cuMemAddressFree_v10020,                            \
	  CUresult (*)(CUdeviceptr, size_t))                                            \
	P(PFN_cuMemMap, PFN_cuMemMap_v10020,                                            \
	  CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,       \
		       unsigned long long))                                             \
	P(PFN_cuMemUnmap, PFN_cuMemUnmap_v10020, CUresult (*)(CUdeviceptr, size_t))     \
	P(PFN_cuMemSetAccess, PFN_cuMemSetAccess_v10020,                                \
	  CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))           \
	P(PFN_cuMemExportToShareableHandle, PFN_cuMemExportToShareableHandle_v10020,    \
	  CUresult (*)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, \
		       unsigned long long))                                             \
	P(PFN_cuMemImportFromShareableHandle, PFN_cuMemImportFromShareableHandle_v10020, \
	  CUresult (*)(CUmemGenericAllocationHandle *, void *,                          \
		       CUmemAllocationHandleType))                                      \
	P(PFN_cuMemHostRegister, PFN_cuMemHostRegister_v6050,                           \
	  CUresult (*)(void *, size_t, unsigned int))                                   \
	P(PFN_cuMemHostUnregister, PFN_cuMemHostUnregister_v4000, CUresult (*)(void *)) \
	P(PFN_cuMemHostGetDevicePointer, PFN_cuMemHostGetDevicePointer_v3020,           \
	  CUresult (*)(CUdeviceptr *, void *, unsigned int))                            \
	P(PFN_cuMemAlloc, PFN_cuMemAlloc_v3020, CUresult (*)(CUdeviceptr *, size_t))    \
	P(PFN_cuMemFree, PFN_cuMemFree_v3020, CUresult (*)(CUdeviceptr))                \
	P(PFN_cuMemHostAlloc, PFN_cuMemHostAlloc_v2020,                                 \
	  CUresult (*)(void **, size_t, unsigned int))                                  \
	P(PFN_cuMemFreeHost, PFN_cuMemFreeHost_v2000, CUresult (*)(void *))             \
	P(PFN_cuMemcpyHtoD, PFN_cuMemcpyHtoD_v3020,                                     \
	  CUresult (*)(CUdeviceptr, const void *, size_t))                              \
	P(PFN_cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020, CUresult (*)(void *, CUdeviceptr, size_t))

struct sseg_abi_item {
	const char *name;
	long long value;
};

#define SSEG_ABI_V(name) { #name, (long long)(name) },
#define SSEG_ABI_S(type) { "sizeof(" #type ")", (long long)sizeof(type) },
#define SSEG_ABI_O(type, field) { "offsetof(" #type ", " #field ")", (long long)offsetof(type, field) },
/* 1 when this header's type has the signature; the same name in both
 * tables, whichever header's spelling it has. */
#define SSEG_ABI_P_OURS(ours, theirs, ...) { #ours, __builtin_types_compatible_p(ours, __VA_ARGS__) },
#define SSEG_ABI_P_TOOLKIT(ours, theirs, ...) { #ours, __builtin_types_compatible_p(theirs, __VA_ARGS__) },
