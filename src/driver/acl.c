/* SPDX-License-Identifier: Apache-2.0 */
/* Loading the ACL runtime: dlopen("libascendcl.so") once (pthread_once),
 * every entry point resolved with dlsym into one table, then aclInit only
 * where the runtime needs it.
 * SHAREDSEG_ACL_LIBRARY may name another library (the tests' fake runtime); it is
 * honoured only when the real and effective ids agree. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/library.h"
#include "driver/acl.h"

/* Which entry points a feature needs: a missing required one fails the
 * load, a missing optional one only turns its feature off. */
enum group { REQUIRED, OPTIONAL, VMM, FABRIC, HOST_REGISTER };

struct entry {
	const char *name;
	size_t offset;
	enum group group;
};

#define ENTRY(fn, group) { #fn, offsetof(struct sseg_acl, fn), group }

static const struct entry entries[] = {
	ENTRY(aclInit, REQUIRED),
	ENTRY(aclrtGetDeviceCount, REQUIRED),
	ENTRY(aclrtSetDevice, REQUIRED),
	ENTRY(aclrtResetDevice, REQUIRED),
	ENTRY(aclrtGetCurrentContext, REQUIRED),
	ENTRY(aclrtSetCurrentContext, REQUIRED),
	ENTRY(aclrtGetVersion, OPTIONAL), /* deprecated in the reference: may go */
	ENTRY(aclGetRecentErrMsg, OPTIONAL),
	ENTRY(aclrtGetLogicDevIdByUserDevId, OPTIONAL), /* newer runtimes only */
	ENTRY(aclrtGetPhyDevIdByLogicDevId, OPTIONAL),
	ENTRY(aclrtDeviceGetBareTgid, VMM),
	ENTRY(aclrtMemGetAllocationGranularity, VMM),
	ENTRY(aclrtMallocPhysical, VMM),
	ENTRY(aclrtFreePhysical, VMM),
	ENTRY(aclrtReserveMemAddress, VMM),
	ENTRY(aclrtReleaseMemAddress, VMM),
	ENTRY(aclrtMapMem, VMM),
	ENTRY(aclrtUnmapMem, VMM),
	ENTRY(aclrtMemSetAccess, VMM),
	ENTRY(aclrtMemExportToShareableHandle, VMM),
	ENTRY(aclrtMemSetPidToShareableHandle, VMM),
	ENTRY(aclrtMemImportFromShareableHandle, VMM),
	ENTRY(aclrtMemExportToShareableHandleV2, FABRIC),
	ENTRY(aclrtMemImportFromShareableHandleV2, FABRIC),
	ENTRY(aclrtHostRegister, HOST_REGISTER),
	ENTRY(aclrtHostUnregister, HOST_REGISTER),
};

static const struct {
	aclError code;
	const char *name;
} error_names[] = {
#define ERROR_NAME(name, value) { name, #name },
	SSEG_ACL_ERRORS(ERROR_NAME)
#undef ERROR_NAME
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct sseg_acl table;
static int load_rc;
static char load_why[SSEG_ERR_MAX];

static const char *library_path(void)
{
	return sseg_driver_path("SHAREDSEG_ACL_LIBRARY", "libascendcl.so");
}

static int fail(int err, const char *fmt, const char *arg)
{
	snprintf(load_why, sizeof(load_why), fmt, arg);
	return err;
}

static int resolve_all(void *lib)
{
	bool missing[HOST_REGISTER + 1] = { false };

	for (size_t i = 0; i < ARRAY_SIZE(entries); i++) {
		void *fn = dlsym(lib, entries[i].name);

		if (!fn && entries[i].group == REQUIRED)
			return fail(-EOPNOTSUPP, "the ACL runtime lacks %s", entries[i].name);
		if (!fn)
			missing[entries[i].group] = true;
		memcpy((char *)&table + entries[i].offset, &fn, sizeof(fn));
	}
	table.vmm = !missing[VMM];
	table.fabric = table.vmm && !missing[FABRIC];
	table.host_register = !missing[HOST_REGISTER];
	return 0;
}

static void read_version(void)
{
	int32_t major = 0, minor = 0, patch = 0;

	if (table.aclrtGetVersion && table.aclrtGetVersion(&major, &minor, &patch) == ACL_SUCCESS &&
	    major >= 0 && major < 2000 && minor >= 0 && minor < 1000 && patch >= 0 && patch < 1000)
		table.version = major * 1000000 + minor * 1000 + patch;
}

/* aclInit is reference-counted and only the first call's configuration
 * takes effect (aclInitImpl): an aclInit(NULL) here before the framework's
 * own would lose the framework's configuration. The runtime's device calls
 * answer without aclInit where it needs none, or once a framework
 * initialized it: then it is left alone. Only ACL_ERROR_UNINITIALIZE
 * (older runtimes) makes this library call aclInit(NULL) itself; a repeat
 * answers ACL_ERROR_REPEAT_INITIALIZE, which is success. */
static aclError init_if_needed(void)
{
	uint32_t count = 0;

	if (table.aclrtGetDeviceCount(&count) != ACL_ERROR_UNINITIALIZE)
		return ACL_SUCCESS;
	return table.aclInit(NULL);
}

static void load(void)
{
	const char *path = library_path();
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	aclError rc;

	if (!lib) {
		load_rc = fail(-EOPNOTSUPP, "no ACL runtime: %s", dlerror());
		return;
	}
	snprintf(table.path, sizeof(table.path), "%s", path);
	load_rc = resolve_all(lib);
	if (load_rc)
		return;
	rc = init_if_needed();
	if (rc != ACL_SUCCESS && rc != ACL_ERROR_REPEAT_INITIALIZE) {
		sseg_acl_result(rc, "aclInit");
		load_rc = fail(-ENODEV, "%s", sseg_last_error());
		sseg_err_clear();
		return;
	}
	read_version();
	/* The library stays loaded for the life of the process: entry points
	 * are called from teardown paths until exit. */
}

int sseg_acl_get(const struct sseg_acl **acl)
{
	pthread_once(&load_once, load);
	if (load_rc)
		return sseg_err(load_rc, "%s", load_why);
	*acl = &table;
	return 0;
}

const char *sseg_acl_error_name(aclError r)
{
	for (size_t i = 0; i < ARRAY_SIZE(error_names); i++)
		if (error_names[i].code == r)
			return error_names[i].name;
	return NULL;
}

static int errno_of(aclError r)
{
	switch (r) {
	case ACL_ERROR_BAD_ALLOC:
	case ACL_ERROR_RT_MEMORY_ALLOCATION:
	case ACL_ERROR_RT_DEVICE_OOM:
		return -ENOMEM;
	case ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
		return -EEXIST;
	case ACL_ERROR_HOST_MEMORY_NOT_REGISTERED:
		return -ENOENT;
	case ACL_ERROR_RT_NO_PERMISSION:
		return -EPERM;
	case ACL_ERROR_RT_FEATURE_NOT_SUPPORT:
	case ACL_ERROR_API_NOT_SUPPORT:
		return -EOPNOTSUPP;
	default:
		return -EIO;
	}
}

int sseg_acl_result(aclError r, const char *call)
{
	const char *name = sseg_acl_error_name(r);
	const char *detail = table.aclGetRecentErrMsg ? table.aclGetRecentErrMsg() : NULL;

	if (r == ACL_SUCCESS)
		return 0;
	return sseg_err(errno_of(r), "%s failed: %s (%d)%s%.160s", call,
			name ? name : "an ACL error", r, detail && *detail ? ": " : "",
			detail ? detail : "");
}

int sseg_acl_enter(const struct sseg_acl *acl, aclrtContext ctx, aclrtContext *saved)
{
	/* A thread that never set a device has no context: nothing to put back. */
	if (acl->aclrtGetCurrentContext(saved) != ACL_SUCCESS)
		*saved = NULL;
	return sseg_acl_result(acl->aclrtSetCurrentContext(ctx), "aclrtSetCurrentContext");
}

void sseg_acl_leave(const struct sseg_acl *acl, aclrtContext saved)
{
	aclError r;

	if (!saved)
		return;
	r = acl->aclrtSetCurrentContext(saved);
	if (r != ACL_SUCCESS)
		sseg_log(SSEG_LOG_WARN, "could not restore the caller's ACL context: %s (%d)",
			 sseg_acl_error_name(r) ? sseg_acl_error_name(r) : "an ACL error", r);
}
