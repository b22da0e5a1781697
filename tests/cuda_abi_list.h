/* Every value, size and offset of src/driver/cuda_abi.h that must agree
 * with the toolkit's cuda.h. Included by two translation units, one over
 * each header, each turning the list into a table. */
#define SSEG_CUDA_ABI_LIST(V, S, O)                                          \
	V(CUDA_SUCCESS) V(CUDA_ERROR_INVALID_VALUE) V(CUDA_ERROR_OUT_OF_MEMORY) \
	V(CUDA_ERROR_NOT_INITIALIZED) V(CUDA_ERROR_NO_DEVICE)                   \
	V(CUDA_ERROR_INVALID_DEVICE) V(CUDA_ERROR_INVALID_HANDLE)               \
	V(CUDA_ERROR_NOT_FOUND) V(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)    \
	V(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) V(CUDA_ERROR_NOT_PERMITTED)    \
	V(CUDA_ERROR_NOT_SUPPORTED) V(CUDA_ERROR_UNKNOWN)                       \
	V(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)              \
	V(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)      \
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
	V(CU_GET_PROC_ADDRESS_SUCCESS)                                          \
	S(CUresult) S(CUdevice) S(CUcontext) S(CUdeviceptr)                     \
	S(CUmemGenericAllocationHandle) S(cuuint64_t) S(CUmemLocation)          \
	S(CUmemAllocationProp) S(CUmemAccessDesc) S(CUmemFabricHandle)          \
	S(CUmemAllocationHandleType) S(CUmemAccess_flags) S(CUmemLocationType)  \
	O(CUmemLocation, type) O(CUmemLocation, id)                             \
	O(CUmemAllocationProp, type) O(CUmemAllocationProp, requestedHandleTypes) \
	O(CUmemAllocationProp, location) O(CUmemAllocationProp, win32HandleMetaData) \
	O(CUmemAllocationProp, allocFlags) O(CUmemAccessDesc, location)         \
	O(CUmemAccessDesc, flags)

struct sseg_abi_item {
	const char *name;
	long long value;
};

#define SSEG_ABI_V(name) { #name, (long long)(name) },
#define SSEG_ABI_S(type) { "sizeof(" #type ")", (long long)sizeof(type) },
#define SSEG_ABI_O(type, field) { "offsetof(" #type ", " #field ")", (long long)offsetof(type, field) },
