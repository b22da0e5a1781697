/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA driver, loaded the way the library loads it, as one table. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "driver.h"
#include "lines.h"

struct cu_driver cu;

static const char *library_path(void)
{
	const char *env = getenv("SHAREDSEG_CUDA_LIBRARY");

	if (env && *env && getuid() == geteuid() && getgid() == getegid())
		return env;
	return "libcuda.so.1";
}

const char *cu_name(CUresult r)
{
	static __thread char text[32];
	const char *name = NULL;

	if (cu.cuGetErrorName && cu.cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
		return name;
	snprintf(text, sizeof(text), "CUresult %d", r);
	return text;
}

/* Every entry point through cuGetProcAddress, pinned to its ABI version. */
static int resolve_all(void *lib, char *why, size_t len)
{
	PFN_cuGetProcAddress_v2 proc = (PFN_cuGetProcAddress_v2)dlsym(lib, "cuGetProcAddress_v2");
	void *fn;
	int status;

	if (!proc) {
		snprintf(why, len, "%s has no cuGetProcAddress_v2 (driver older than 12.0)", cu.path);
		return -1;
	}
#define RESOLVE(name, version, required)                                                   \
	fn = NULL;                                                                         \
	status = -1;                                                                       \
	if (proc(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS) \
		fn = NULL;                                                                 \
	if (!fn && required) {                                                             \
		snprintf(why, len, "the driver lacks %s", #name);                          \
		return -1;                                                                 \
	}                                                                                  \
	cu.name = (PFN_##name)fn;
	DRIVER(RESOLVE)
#undef RESOLVE
	return 0;
}

/* Loads and initializes the driver; a forked rank calls this itself, since
 * a child cannot use a driver its parent initialized. */
int load_driver(char *why, size_t len)
{
	void *lib;
	CUresult r;

	cu.path = library_path();
	lib = dlopen(cu.path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(why, len, "no CUDA driver: %s", dlerror());
		return -1;
	}
	if (resolve_all(lib, why, len))
		return -1;
	r = cu.cuInit(0);
	if (r == CUDA_SUCCESS)
		r = cu.cuDriverGetVersion(&cu.version);
	if (r == CUDA_SUCCESS)
		r = cu.cuDeviceGetCount(&cu.devices);
	if (r != CUDA_SUCCESS) {
		snprintf(why, len, "cuInit or a device query failed: %s", cu_name(r));
		return -1;
	}
	return 0;
}

/* Makes device dev's primary context current on this thread. */
CUresult enter_device(int dev)
{
	CUcontext ctx = NULL;
	CUresult r = cu.cuDevicePrimaryCtxRetain(&ctx, dev);

	return r == CUDA_SUCCESS ? cu.cuCtxSetCurrent(ctx) : r;
}

int driver_or_report(const char *check)
{
	char why[256];
	struct json j;

	if (load_driver(why, sizeof(why)) == 0 && enter_device(0) == CUDA_SUCCESS)
		return 0;
	j_begin(&j, check);
	j_str(&j, "result", "fail");
	j_str(&j, "error", why);
	j_end(&j);
	return -1;
}

/* The attribute's value; *r says whether the driver gave one. */
int attribute(int dev, int attrib, CUresult *r)
{
	int value = 0;

	*r = cu.cuDeviceGetAttribute(&value, attrib, dev);
	return value;
}

int host_node(void)
{
	CUresult r;
	int node = attribute(0, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, &r);

	return r != CUDA_SUCCESS || node < 0 ? 0 : node;
}
