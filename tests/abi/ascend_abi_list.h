/* SPDX-License-Identifier: Apache-2.0 */
/* What src/driver/acl_abi.h declares, with the value, size or offset the
 * CANN runtime reference and its public acl_rt.h give each: X(expression,
 * expected). test_ascend_abi checks our header against it, and the
 * toolkit's acl_rt.h too where the CANN toolkit is installed. */
#define SSEG_ACL_ABI_EXPECTED(X)                                                     \
	X(ACL_SUCCESS, 0) X(ACL_ERROR_INVALID_PARAM, 100000)                          \
	X(ACL_ERROR_UNINITIALIZE, 100001) X(ACL_ERROR_REPEAT_INITIALIZE, 100002)      \
	X(ACL_ERROR_BAD_ALLOC, 200000) X(ACL_ERROR_API_NOT_SUPPORT, 200001)           \
	X(ACL_ERROR_RT_PARAM_INVALID, 107000) X(ACL_ERROR_RT_INVALID_DEVICEID, 107001) \
	X(ACL_ERROR_RT_CONTEXT_NULL, 107002) X(ACL_ERROR_RT_INVALID_HANDLE, 107017)   \
	X(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, 207000)                                    \
	X(ACL_ERROR_RT_MEMORY_ALLOCATION, 207001) X(ACL_ERROR_RT_NO_DEVICE, 207004)   \
	X(ACL_ERROR_RT_NO_PERMISSION, 207006) X(ACL_ERROR_RT_INTERNAL_ERROR, 507000)  \
	X(ACL_ERROR_RT_DRV_INTERNAL_ERROR, 507899)                                     \
	X(ACL_MEM_HANDLE_TYPE_NONE, 0) X(ACL_MEM_ALLOCATION_TYPE_PINNED, 0)           \
	X(ACL_DDR_MEM_HUGE, 2) X(ACL_DDR_MEM_NORMAL, 3) X(ACL_DDR_MEM_P2P_HUGE, 6)     \
	X(ACL_MEM_LOCATION_TYPE_HOST, 0) X(ACL_MEM_LOCATION_TYPE_DEVICE, 1)           \
	X(ACL_MEM_LOCATION_TYPE_HOST_NUMA, 4) X(ACL_RT_MEM_ACCESS_FLAGS_READWRITE, 3) \
	X(ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, 0)                                     \
	X(ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, 1) X(ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 2) \
	X(ACL_HOST_REGISTER_MAPPED, 0) X(ACL_RT_VMM_EXPORT_FLAG_DEFAULT, 0)           \
	X(ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION, 1)                            \
	X(sizeof(aclError), 4) X(sizeof(aclrtDrvMemHandle), sizeof(void *))           \
	X(sizeof(aclrtContext), sizeof(void *)) X(sizeof(aclrtMemLocation), 8)        \
	X(offsetof(aclrtMemLocation, id), 0) X(offsetof(aclrtMemLocation, type), 4)   \
	X(sizeof(aclrtPhysicalMemProp), 32)                                            \
	X(offsetof(aclrtPhysicalMemProp, handleType), 0)                               \
	X(offsetof(aclrtPhysicalMemProp, allocationType), 4)                           \
	X(offsetof(aclrtPhysicalMemProp, memAttr), 8)                                  \
	X(offsetof(aclrtPhysicalMemProp, location), 12)                                \
	X(offsetof(aclrtPhysicalMemProp, reserve), 24)                                 \
	X(sizeof(aclrtMemAccessDesc), 24) X(offsetof(aclrtMemAccessDesc, flags), 0)   \
	X(offsetof(aclrtMemAccessDesc, location), 4)                                   \
	X(offsetof(aclrtMemAccessDesc, rsv), 12) X(sizeof(aclrtMemFabricHandle), 128) \
	X(sizeof(aclrtMemAccessFlags), 4) X(sizeof(aclrtMemSharedHandleType), 4)

/* Mismatches of the list over whichever header the including file saw,
 * each told on stderr under that header's name. */
#define SSEG_ACL_ABI_COUNT(expr, want)                                                \
	if ((long long)(expr) != (long long)(want)) {                                 \
		fprintf(stderr, "%s: %s is %lld, the reference says %lld\n", header, #expr, \
			(long long)(expr), (long long)(want));                        \
		bad++;                                                                \
	}
