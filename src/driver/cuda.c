/* SPDX-License-Identifier: Apache-2.0 */
/* Loading the CUDA driver: dlopen("libcuda.so.1") once (pthread_once),
 * dlsym of cuGetProcAddress only, every other entry point resolved through it
 * and pinned to the ABI version this code was written against.
 * SHAREDSEG_CUDA_LIBRARY may name another library (the tests' fake driver); it
 * is honoured only when the real and effective ids agree. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/library.h"
#include "driver/cuda.h"

/* Without a REQUIRED entry the driver is unusable; without a VMM one the
 * cuda backend is (table.vmm 0); an OPTIONAL one is NULL where missing. */
enum need { REQUIRED, VMM, OPTIONAL };

struct entry {
	const char *name;
	int version; /* the ABI version our declaration matches */
	size_t offset;
	enum need need;
};

#define ENTRY(fn, ver, need) { #fn, ver, offsetof(struct sseg_cuda, fn), need }

static const struct entry entries[] = {
	ENTRY(cuGetErrorName, 6000, REQUIRED),
	ENTRY(cuInit, 2000, REQUIRED),
	ENTRY(cuDriverGetVersion, 2020, REQUIRED),
	ENTRY(cuDeviceGetCount, 2000, REQUIRED),
	ENTRY(cuDeviceGet, 2000, REQUIRED),
	ENTRY(cuDeviceGetAttribute, 2000, REQUIRED),
	ENTRY(cuDeviceCanAccessPeer, 4000, REQUIRED),
	ENTRY(cuDeviceGetUuid, 11040, OPTIONAL),         /* _v2: a MIG instance's own */
	ENTRY(cuDevicePrimaryCtxRetain, 7000, REQUIRED),
	ENTRY(cuDevicePrimaryCtxRelease, 11000, REQUIRED), /* _v2 */
	ENTRY(cuCtxSetCurrent, 4000, REQUIRED),
	ENTRY(cuCtxGetCurrent, 4000, REQUIRED),
	ENTRY(cuCtxSynchronize, 2000, REQUIRED),
	ENTRY(cuMemHostRegister, 6050, REQUIRED),         /* _v2 */
	ENTRY(cuMemHostUnregister, 4000, REQUIRED),
	ENTRY(cuMemHostGetDevicePointer, 3020, REQUIRED), /* _v2 */
	ENTRY(cuMemGetAllocationGranularity, 10020, VMM),
	ENTRY(cuMemCreate, 10020, VMM),
	ENTRY(cuMemRelease, 10020, VMM),
	ENTRY(cuMemAddressReserve, 10020, VMM),
	ENTRY(cuMemAddressFree, 10020, VMM),
	ENTRY(cuMemMap, 10020, VMM),
	ENTRY(cuMemUnmap, 10020, VMM),
	ENTRY(cuMemSetAccess, 10020, VMM),
	ENTRY(cuMemExportToShareableHandle, 10020, VMM),
	ENTRY(cuMemImportFromShareableHandle, 10020, VMM),
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct sseg_cuda table;
static int load_rc;
static char load_why[SSEG_ERR_MAX];

static const char *library_path(void)
{
	return sseg_driver_path("SHAREDSEG_CUDA_LIBRARY", "libcuda.so.1");
}

struct resolver {
	PFN_cuGetProcAddress_v2 v2;
	PFN_cuGetProcAddress_v1 v1;
};

static void *resolve(const struct resolver *r, const struct entry *e)
{
	void *fn = NULL;
	int status = 0;
	CUresult rc;

	if (r->v2)
		rc = r->v2(e->name, &fn, e->version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
	else
		rc = r->v1(e->name, &fn, e->version, CU_GET_PROC_ADDRESS_DEFAULT);
	return rc == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS ? fn : NULL;
}

static int fail(int err, const char *fmt, const char *arg)
{
	snprintf(load_why, sizeof(load_why), fmt, arg);
	return err;
}

static int resolve_all(void *lib, const char *path)
{
	struct resolver r = { 0 };

	r.v2 = (PFN_cuGetProcAddress_v2)dlsym(lib, "cuGetProcAddress_v2");
	if (!r.v2)
		r.v1 = (PFN_cuGetProcAddress_v1)dlsym(lib, "cuGetProcAddress");
	if (!r.v2 && !r.v1)
		return fail(-EOPNOTSUPP,
			    "%s has no cuGetProcAddress: the driver is older than 11.3", path);
	table.vmm = 1;
	for (size_t i = 0; i < ARRAY_SIZE(entries); i++) {
		void *fn = resolve(&r, &entries[i]);

		if (!fn && entries[i].need == REQUIRED)
			return fail(-EOPNOTSUPP, "the CUDA driver lacks %s", entries[i].name);
		if (!fn && entries[i].need == VMM)
			table.vmm = 0;
		memcpy((char *)&table + entries[i].offset, &fn, sizeof(fn));
	}
	return 0;
}

static void load(void)
{
	const char *path = library_path();
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	CUresult rc;

	if (!lib) {
		load_rc = fail(-EOPNOTSUPP, "no CUDA driver: %s", dlerror());
		return;
	}
	snprintf(table.path, sizeof(table.path), "%s", path);
	load_rc = resolve_all(lib, path);
	if (load_rc)
		return;
	rc = table.cuInit(0);
	if (rc != CUDA_SUCCESS) {
		load_rc = fail(-ENODEV, "cuInit failed: %s", sseg_cuda_error_name(rc));
		return;
	}
	if (table.cuDriverGetVersion(&table.version) != CUDA_SUCCESS)
		table.version = 0;
	/* The library stays loaded for the life of the process: entry points
	 * are called from teardown paths until exit. */
}

int sseg_cuda_get(const struct sseg_cuda **cuda)
{
	pthread_once(&load_once, load);
	if (load_rc)
		return sseg_err(load_rc, "%s", load_why);
	*cuda = &table;
	return 0;
}

const char *sseg_cuda_error_name(CUresult r)
{
	const char *name = NULL;

	if (table.cuGetErrorName && table.cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
		return name;
	return "an unknown CUDA error";
}

int sseg_cuda_result(CUresult r, const char *call)
{
	if (r == CUDA_SUCCESS)
		return 0;
	return sseg_err(r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO, "%s failed: %s (%d)", call,
			sseg_cuda_error_name(r), r);
}

int sseg_cuda_result_hint(CUresult r, const char *call, const char *hint)
{
	if (r == CUDA_SUCCESS)
		return 0;
	return sseg_err(r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO, "%s failed: %s (%d): %s",
			call, sseg_cuda_error_name(r), r, hint);
}

int sseg_cuda_enter(const struct sseg_cuda *cu, CUcontext ctx, CUcontext *saved)
{
	int rc = sseg_cuda_result(cu->cuCtxGetCurrent(saved), "cuCtxGetCurrent");

	return rc ? rc : sseg_cuda_result(cu->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

void sseg_cuda_leave(const struct sseg_cuda *cu, CUcontext saved)
{
	CUresult r = cu->cuCtxSetCurrent(saved);

	if (r != CUDA_SUCCESS)
		sseg_log(SSEG_LOG_WARN, "could not restore the caller's CUDA context: %s",
			 sseg_cuda_error_name(r));
}
