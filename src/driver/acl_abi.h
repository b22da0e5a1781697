/* SPDX-License-Identifier: Apache-2.0 */
/* The few ACL (CANN runtime, libascendcl.so) types and constants sharedseg
 * uses, declared here so the library builds without the CANN toolkit.
 * Values and layouts are those of the public CANN headers
 * (include/external/acl/acl_base_rt.h and acl_rt.h of the CANN runtime,
 * github.com/hicann/runtime) and of the runtime API reference
 * (docs/zh/api_ref/11-02, 11-04, 04, 25-0x); tests/test_ascend_abi.c
 * checks them against acl_rt.h where the toolkit is installed. */
#ifndef SSEG_ACL_ABI_H
#define SSEG_ACL_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int aclError;
typedef void *aclrtContext;
typedef void *aclrtDrvMemHandle;

/* Return codes (acl_base_rt.h; the runtime's pass-through codes from the
 * aclError reference), as X(name, value): the enum below, the names in
 * messages and the fake runtime's failure scripts. */
#define SSEG_ACL_ERRORS(X)                              \
	X(ACL_SUCCESS, 0)                               \
	X(ACL_ERROR_INVALID_PARAM, 100000)              \
	X(ACL_ERROR_UNINITIALIZE, 100001)               \
	X(ACL_ERROR_REPEAT_INITIALIZE, 100002)          \
	X(ACL_ERROR_BAD_ALLOC, 200000)                  \
	X(ACL_ERROR_API_NOT_SUPPORT, 200001)            \
	X(ACL_ERROR_RT_PARAM_INVALID, 107000)           \
	X(ACL_ERROR_RT_INVALID_DEVICEID, 107001)        \
	X(ACL_ERROR_RT_CONTEXT_NULL, 107002)            \
	X(ACL_ERROR_RT_INVALID_HANDLE, 107017)          \
	X(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, 207000)     \
	X(ACL_ERROR_RT_MEMORY_ALLOCATION, 207001)       \
	X(ACL_ERROR_RT_NO_DEVICE, 207004)               \
	X(ACL_ERROR_RT_NO_PERMISSION, 207006)           \
	X(ACL_ERROR_RT_DEVICE_OOM, 207018)              \
	X(ACL_ERROR_RT_INTERNAL_ERROR, 507000)          \
	X(ACL_ERROR_RT_DRV_INTERNAL_ERROR, 507899)      \
	X(ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 507910) \
	X(ACL_ERROR_HOST_MEMORY_NOT_REGISTERED, 507911)

#define SSEG_ACL_ERROR_ENUM(name, value) name = value,
enum { SSEG_ACL_ERRORS(SSEG_ACL_ERROR_ENUM) };
#undef SSEG_ACL_ERROR_ENUM

typedef enum aclrtMemHandleType {
	ACL_MEM_HANDLE_TYPE_NONE = 0,
} aclrtMemHandleType;

typedef enum aclrtMemAllocationType {
	ACL_MEM_ALLOCATION_TYPE_PINNED = 0,
} aclrtMemAllocationType;

/* aclrtMemAttr: the explicit host (DDR) options, which runtimes older than
 * the generic ACL_MEM_NORMAL/ACL_MEM_HUGE (12, 13) know too, and the P2P
 * ones that fabric-exported host memory is allocated with. */
typedef enum aclrtMemAttr {
	ACL_DDR_MEM_HUGE = 2,
	ACL_DDR_MEM_NORMAL = 3,
	ACL_DDR_MEM_P2P_HUGE = 6,
	ACL_DDR_MEM_P2P_NORMAL = 7,
	ACL_MEM_NORMAL = 12,
	ACL_MEM_HUGE = 13,
	ACL_MEM_HUGE1G = 14,
	ACL_MEM_P2P_NORMAL = 15,
	ACL_MEM_P2P_HUGE = 16,
	ACL_MEM_P2P_HUGE1G = 17,
} aclrtMemAttr;

typedef enum aclrtMemLocationType {
	ACL_MEM_LOCATION_TYPE_HOST = 0,
	ACL_MEM_LOCATION_TYPE_DEVICE = 1,
	ACL_MEM_LOCATION_TYPE_HOST_NUMA = 4,
} aclrtMemLocationType;

typedef enum {
	ACL_RT_MEM_ACCESS_FLAGS_READWRITE = 0x3,
} aclrtMemAccessFlags;

typedef enum aclrtMemGranularityOptions {
	ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
} aclrtMemGranularityOptions;

typedef enum aclrtMemSharedHandleType {
	ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT = 0x1,
	ACL_MEM_SHARE_HANDLE_TYPE_FABRIC = 0x2,
} aclrtMemSharedHandleType;

typedef enum {
	ACL_HOST_REGISTER_MAPPED = 0,
} aclrtHostRegisterType;

/* The export flags of aclrtMemExportToShareableHandle(V2). */
#define ACL_RT_VMM_EXPORT_FLAG_DEFAULT 0x0UL
#define ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION 0x1UL

typedef struct aclrtMemLocation {
	uint32_t id;
	aclrtMemLocationType type;
} aclrtMemLocation;

typedef struct aclrtPhysicalMemProp {
	aclrtMemHandleType handleType;
	aclrtMemAllocationType allocationType;
	aclrtMemAttr memAttr;
	aclrtMemLocation location;
	uint64_t reserve;
} aclrtPhysicalMemProp;

typedef struct {
	aclrtMemAccessFlags flags;
	aclrtMemLocation location;
	uint8_t rsv[12];
} aclrtMemAccessDesc;

typedef struct aclrtMemFabricHandle {
	uint8_t data[128];
} aclrtMemFabricHandle;

/* The entry points, as libascendcl.so exports them. */
typedef aclError (*PFN_aclInit)(const char *configPath);
typedef aclError (*PFN_aclrtGetVersion)(int32_t *major, int32_t *minor, int32_t *patch);
typedef const char *(*PFN_aclGetRecentErrMsg)(void);
typedef aclError (*PFN_aclrtGetDeviceCount)(uint32_t *count);
typedef aclError (*PFN_aclrtSetDevice)(int32_t deviceId);
typedef aclError (*PFN_aclrtResetDevice)(int32_t deviceId);
typedef aclError (*PFN_aclrtGetCurrentContext)(aclrtContext *context);
typedef aclError (*PFN_aclrtSetCurrentContext)(aclrtContext context);
typedef aclError (*PFN_aclrtDeviceGetBareTgid)(int32_t *pid);
typedef aclError (*PFN_aclrtMemGetAllocationGranularity)(aclrtPhysicalMemProp *prop,
							 aclrtMemGranularityOptions option,
							 size_t *granularity);
typedef aclError (*PFN_aclrtMallocPhysical)(aclrtDrvMemHandle *handle, size_t size,
					    const aclrtPhysicalMemProp *prop, uint64_t flags);
typedef aclError (*PFN_aclrtFreePhysical)(aclrtDrvMemHandle handle);
typedef aclError (*PFN_aclrtReserveMemAddress)(void **virPtr, size_t size, size_t alignment,
					       void *expectPtr, uint64_t flags);
typedef aclError (*PFN_aclrtReleaseMemAddress)(void *virPtr);
typedef aclError (*PFN_aclrtMapMem)(void *virPtr, size_t size, size_t offset,
				    aclrtDrvMemHandle handle, uint64_t flags);
typedef aclError (*PFN_aclrtUnmapMem)(void *virPtr);
typedef aclError (*PFN_aclrtMemSetAccess)(void *virPtr, size_t size, aclrtMemAccessDesc *desc,
					  size_t count);
typedef aclError (*PFN_aclrtMemExportToShareableHandle)(aclrtDrvMemHandle handle,
							aclrtMemHandleType handleType,
							uint64_t flags, uint64_t *shareableHandle);
typedef aclError (*PFN_aclrtMemSetPidToShareableHandle)(uint64_t shareableHandle, int32_t *pid,
							size_t pidNum);
typedef aclError (*PFN_aclrtMemImportFromShareableHandle)(uint64_t shareableHandle,
							  int32_t deviceId,
							  aclrtDrvMemHandle *handle);
typedef aclError (*PFN_aclrtMemExportToShareableHandleV2)(aclrtDrvMemHandle handle, uint64_t flags,
							  aclrtMemSharedHandleType shareType,
							  void *shareableHandle);
typedef aclError (*PFN_aclrtMemImportFromShareableHandleV2)(void *shareableHandle,
							    aclrtMemSharedHandleType shareType,
							    uint64_t flags,
							    aclrtDrvMemHandle *handle);
typedef aclError (*PFN_aclrtHostRegister)(void *ptr, uint64_t size, aclrtHostRegisterType type,
					  void **devPtr);
typedef aclError (*PFN_aclrtHostUnregister)(void *ptr);
typedef aclError (*PFN_aclrtGetLogicDevIdByUserDevId)(const int32_t userDevid,
						      int32_t *const logicDevId);
typedef aclError (*PFN_aclrtGetPhyDevIdByLogicDevId)(const int32_t logicDevId,
						     int32_t *const phyDevId);

#endif
