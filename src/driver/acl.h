/* SPDX-License-Identifier: Apache-2.0 */
/* The ACL runtime (libascendcl.so), loaded once with dlopen and resolved
 * into one table. */
#ifndef SSEG_DRIVER_ACL_H
#define SSEG_DRIVER_ACL_H

#include "driver/acl_abi.h"
#include "internal.h"

struct sseg_acl {
	char path[160]; /* the library loaded */
	int version;    /* aclrtGetVersion as major*1000000 + minor*1000 + patch; 0: unknown */
	int vmm;        /* every VMM and in-server sharing entry point resolved */
	int fabric;     /* the V2 export and import resolved (fabric handles, and the
			 * import that skips EnableP2P for host memory) */
	int host_register; /* aclrtHostRegister and aclrtHostUnregister resolved */
	PFN_aclInit aclInit;
	PFN_aclrtGetDeviceCount aclrtGetDeviceCount;
	PFN_aclrtSetDevice aclrtSetDevice;
	PFN_aclrtResetDevice aclrtResetDevice;
	PFN_aclrtGetCurrentContext aclrtGetCurrentContext;
	PFN_aclrtSetCurrentContext aclrtSetCurrentContext;
	/* optional */
	PFN_aclrtGetVersion aclrtGetVersion;
	PFN_aclGetRecentErrMsg aclGetRecentErrMsg;
	PFN_aclrtGetLogicDevIdByUserDevId aclrtGetLogicDevIdByUserDevId;
	PFN_aclrtGetPhyDevIdByLogicDevId aclrtGetPhyDevIdByLogicDevId;
	/* VMM and in-server sharing: optional as a group (vmm) */
	PFN_aclrtDeviceGetBareTgid aclrtDeviceGetBareTgid;
	PFN_aclrtMemGetAllocationGranularity aclrtMemGetAllocationGranularity;
	PFN_aclrtMallocPhysical aclrtMallocPhysical;
	PFN_aclrtFreePhysical aclrtFreePhysical;
	PFN_aclrtReserveMemAddress aclrtReserveMemAddress;
	PFN_aclrtReleaseMemAddress aclrtReleaseMemAddress;
	PFN_aclrtMapMem aclrtMapMem;
	PFN_aclrtUnmapMem aclrtUnmapMem;
	PFN_aclrtMemSetAccess aclrtMemSetAccess;
	PFN_aclrtMemExportToShareableHandle aclrtMemExportToShareableHandle;
	PFN_aclrtMemSetPidToShareableHandle aclrtMemSetPidToShareableHandle;
	PFN_aclrtMemImportFromShareableHandle aclrtMemImportFromShareableHandle;
	/* fabric handles: optional as a group (fabric) */
	PFN_aclrtMemExportToShareableHandleV2 aclrtMemExportToShareableHandleV2;
	PFN_aclrtMemImportFromShareableHandleV2 aclrtMemImportFromShareableHandleV2;
	/* host registration: optional as a group (host_register) */
	PFN_aclrtHostRegister aclrtHostRegister;
	PFN_aclrtHostUnregister aclrtHostUnregister;
};

/* Loads the runtime, and calls aclInit(NULL) once where the runtime answers
 * that it needs it (not otherwise: the framework's aclInit, with its
 * configuration, must be the first). On failure returns
 * a negative errno and the sentence says why ACL is unavailable; the same
 * answer is given on every call. aclFinalize is never called: the runtime
 * is the application's too (a framework's NPU tensors live in it). */
SSEG_HIDDEN int sseg_acl_get(const struct sseg_acl **acl);
/* Makes ctx current on this thread and remembers the caller's context
 * (NULL when it had none); sseg_acl_leave puts a remembered one back. */
SSEG_HIDDEN int sseg_acl_enter(const struct sseg_acl *acl, aclrtContext ctx, aclrtContext *saved);
SSEG_HIDDEN void sseg_acl_leave(const struct sseg_acl *acl, aclrtContext saved);
/* The name of a return code ("ACL_ERROR_RT_MEMORY_ALLOCATION"), or NULL. */
SSEG_HIDDEN const char *sseg_acl_error_name(aclError r);
/* 0 for ACL_SUCCESS; else a negative errno with a sentence naming the
 * call, the code and the runtime's own last message. */
SSEG_HIDDEN int sseg_acl_result(aclError r, const char *call);

#endif
