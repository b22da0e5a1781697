/* SPDX-License-Identifier: Apache-2.0 */
/* The fake CUDA driver, driven the way the CUDA backend drives libcuda.so.1:
 * dlopen, dlsym of cuGetProcAddress_v2 only, every entry point by base name
 * and version. Each case runs in a child that sets its own SSEG_FAKE_CUDA
 * before it loads the fake (the configuration is read once per process).
 * The fake is as strict as the real driver, and each rule has a case here:
 * contexts, peer access, IMEX, attributes by driver version, cuMemMap's
 * offset, a container that blocks HOST_NUMA, fork, and host registration.
 * Sharing is checked with peer processes forked before the driver is
 * initialized, since a child forked after cannot use it.
 * The loader and helpers are in fake_cuda_harness.c; sharing, the VMM rules
 * and host registration in fake_cuda_sharing.c, fake_cuda_vmm.c and
 * fake_cuda_hostreg.c. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda/cases.h"
#include "fake_cuda/harness.h"
#include "runcases.h"

/* ---- lookup, errors, devices ---- */

static void check_lookup(void)
{
	PFN_cuGetProcAddress_v1 v1 = (PFN_cuGetProcAddress_v1)dlsym(cu.lib, "cuGetProcAddress");
	void *fn = &fn;
	int status = 0;

	CHECK(!dlsym(cu.lib, "cuMemCreate")); /* only through cuGetProcAddress */
	CHECK_CU(cu.cuGetProcAddress("cuNoSuchEntry", &fn, 12000, 0, &status), CUDA_ERROR_NOT_FOUND);
	CHECK(fn == NULL && status == 1);
	CHECK_CU(cu.cuGetProcAddress("cuMemCreate", &fn, 10010, 0, &status), CUDA_ERROR_NOT_FOUND);
	CHECK(fn == NULL && status != 0);
	CU_OK(cu.cuGetProcAddress("cuMemCreate", &fn, 13000, 0, &status));
	CHECK(fn == (void *)cu.cuMemCreate && status == 0);
	CHECK(v1);
	CU_OK(v1("cuMemMap", &fn, 12000, 0));
	CHECK(fn == (void *)cu.cuMemMap);
	CU_OK(v1("cuGetProcAddress", &fn, 11030, 0));
	CHECK(fn == (void *)v1);
	/* cuDeviceGetUuid: _v2 from 11.4 on, the first one before. */
	CHECK(resolve_at("cuDeviceGetUuid", 11040) == (void *)cu.cuDeviceGetUuid);
	CHECK(resolve_at("cuDeviceGetUuid", 9020) != (void *)cu.cuDeviceGetUuid);
	CHECK_CU(cu.cuGetProcAddress("cuDeviceGetUuid", &fn, 9010, 0, &status),
		 CUDA_ERROR_NOT_FOUND);
}

static void check_error_names(void)
{
	static const CUresult codes[] = {
		CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
		CUDA_ERROR_NOT_PERMITTED, CUDA_ERROR_INVALID_CONTEXT,
		CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, CUDA_ERROR_OPERATING_SYSTEM,
	};
	static const char *const names[] = {
		"CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
		"CUDA_ERROR_NOT_PERMITTED", "CUDA_ERROR_INVALID_CONTEXT",
		"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "CUDA_ERROR_OPERATING_SYSTEM",
	};
	const char *name = NULL;

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		CU_OK(cu.cuGetErrorName(codes[i], &name));
		CHECK(strcmp(name, names[i]) == 0);
	}
	CHECK_CU(cu.cuGetErrorName(12345, &name), CUDA_ERROR_INVALID_VALUE);
}

static void check_devices(void)
{
	int count = 0, value = -1, version = 0;
	CUdevice dev = -1;

	CU_OK(cu.cuDriverGetVersion(&version));
	CHECK(version == 12080);
	CHECK_CU(cu.cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
	CU_OK(cu.cuInit(0));
	CU_OK(cu.cuDeviceGetCount(&count));
	CHECK(count == 2);
	CU_OK(cu.cuDeviceGet(&dev, 1));
	CHECK(dev == 1);
	CHECK_CU(cu.cuDeviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE);
	CU_OK(cu.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 1));
	CHECK(value == 3);
	CU_OK(cu.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0));
	CHECK(value == 1);
	CU_OK(cu.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
	CHECK(value == 1);
	CHECK_CU(cu.cuDeviceGetAttribute(&value, 1, 2), CUDA_ERROR_INVALID_DEVICE);
}

static int case_driver(void *arg)
{
	size_t gran = 0;
	CUmemAllocationProp prop = host_prop(3, 0);
	CUmemGenericAllocationHandle handle;

	load("devices=2;numa=2,3;fabric=1;host_numa_vmm=0;driver=12080", NULL);
	check_lookup();
	check_error_names();
	check_devices();
	enter_device(0);
	CHECK_CU(cu.cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
	CU_OK(cu.sseg_fake_cuda_configure("host_numa_vmm=1;granularity=65536"));
	CU_OK(cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	CHECK(gran == 65536);
	prop.location.id = 0;
	CHECK_CU(cu.cuMemCreate(&handle, gran, &prop, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK(cu.sseg_fake_cuda_configure("no_such_key=1") < 0);
	CHECK(cu.sseg_fake_cuda_configure("peer=0-x") < 0);
	CHECK(cu.sseg_fake_cuda_configure("novmm=16") < 0 &&
	      cu.sseg_fake_cuda_configure("novmm=") < 0);
	CHECK(cu.sseg_fake_cuda_calls("cuInit") == 1);
	CHECK(cu.sseg_fake_cuda_calls("cuNoSuchEntry") == -1);
	finish();
	return 0;
}

/* Rule: an attribute the driver does not know answers INVALID_VALUE; which
 * ones it knows follows its version (141 came with 12.9, 128 with 12.3,
 * 134 with 12.2), and the fake knows only what it models. */
static int attribute_rc(int attrib)
{
	int value = -1;

	return cu.cuDeviceGetAttribute(&value, attrib, 0);
}

static int case_attributes(void *arg)
{
	int value = -1;

	start("driver=12080;host_register=0;ro_register=0", NULL);
	CHECK_CU(attribute_rc(CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED),
		 CUDA_ERROR_INVALID_VALUE);
	CU_OK(attribute_rc(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED));
	CU_OK(attribute_rc(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID));
	CHECK_CU(attribute_rc(1), CUDA_ERROR_INVALID_VALUE);    /* not modelled */
	CHECK_CU(attribute_rc(9999), CUDA_ERROR_INVALID_VALUE); /* beyond any driver */
	CU_OK(cu.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 0));
	CHECK(value == 0);
	CU_OK(cu.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED,
				      0));
	CHECK(value == 0);
	CU_OK(cu.sseg_fake_cuda_configure("driver=12020;ro_register=1"));
	CHECK_CU(attribute_rc(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED),
		 CUDA_ERROR_INVALID_VALUE);
	CU_OK(attribute_rc(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID));
	CU_OK(cu.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED,
				      0));
	CHECK(value == 1);
	CU_OK(cu.sseg_fake_cuda_configure("driver=12090"));
	CU_OK(cu.cuDeviceGetAttribute(&value,
				      CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
	CHECK(value == 1);
	finish();
	return 0;
}

/* Rule: cuDeviceGetUuid gives a device the same 16 bytes in every process
 * (the library puts the owner GPU's in its blob), another device others. */
static int uuid_child(void *arg)
{
	const int *out = arg;
	CUuuid uuid;

	load("devices=2", NULL);
	CU_OK(cu.cuInit(0));
	CU_OK(cu.cuDeviceGetUuid(&uuid, 1));
	return write(*out, &uuid, sizeof(uuid)) == sizeof(uuid) ? 0 : 1;
}

static int case_uuid(void *arg)
{
	CUuuid first, second, theirs;
	int fds[2];
	pid_t child;

	CHECK(pipe(fds) == 0);
	child = tu_fork(uuid_child, &fds[1]); /* before this process initializes */
	close(fds[1]);
	start("devices=2", NULL);
	CU_OK(cu.cuDeviceGetUuid(&first, 0));
	CU_OK(cu.cuDeviceGetUuid(&second, 1));
	CHECK(memcmp(&first, &second, sizeof(first)) != 0);
	CHECK(read(fds[0], &theirs, sizeof(theirs)) == sizeof(theirs));
	CHECK(memcmp(&theirs, &second, sizeof(theirs)) == 0);
	CHECK(tu_wait(child, 10000) == 0);
	close(fds[0]);
	CHECK_CU(cu.cuDeviceGetUuid(&first, 2), CUDA_ERROR_INVALID_DEVICE);
	CHECK_CU(cu.cuDeviceGetUuid(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	finish();
	return 0;
}

/* ---- fork ---- */

/* In a child forked after cuInit the driver is gone: NOT_INITIALIZED from
 * cuInit and every call that needs it; version and error names remain. */
static int forked_child(void *arg)
{
	const char *name = NULL;
	CUcontext ctx = NULL;
	int count = 0, version = 0;

	CHECK_CU(cu.cuInit(0), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_CU(cu.cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_CU(cu.cuCtxSetCurrent(NULL), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_CU(cu.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_CU(cu.cuMemHostRegister(&count, sizeof(count), 0), CUDA_ERROR_NOT_INITIALIZED);
	CU_OK(cu.cuDriverGetVersion(&version));
	CU_OK(cu.cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &name));
	CHECK(cu.sseg_fake_cuda_live_contexts() == 1); /* the control API stays */
	return 0;
}

static int forked_child_works(void *arg)
{
	int count = 0;

	CU_OK(cu.cuDeviceGetCount(&count));
	return count == 1 ? 0 : 1;
}

static int case_fork(void *arg)
{
	start("", NULL);
	CHECK(tu_wait(tu_fork(forked_child, NULL), 10000) == 0);
	CU_OK(cu.sseg_fake_cuda_configure("fork_works=1"));
	CHECK(tu_wait(tu_fork(forked_child_works, NULL), 10000) == 0);
	finish();
	return 0;
}

/* ---- scripted failures and rule violations ---- */

static void check_env_script(CUmemGenericAllocationHandle handle, unsigned char *p)
{
	CUdeviceptr va = (CUdeviceptr)(uintptr_t)p;

	CU_OK(cu.cuMemMap(va, GRAN, 0, handle, 0));
	CHECK_CU(cu.cuMemMap(va + GRAN, GRAN, 0, handle, 0), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(cu.sseg_fake_cuda_live_mappings() == 1);
	CU_OK(cu.cuMemMap(va + GRAN, GRAN, 0, handle, 0));
	CHECK(cu.sseg_fake_cuda_calls("cuMemMap") == 3);
	CHECK_CU(cu.cuMemUnmap(va, 2 * GRAN), CUDA_ERROR_UNKNOWN);
	CHECK_CU(cu.cuMemUnmap(va, 2 * GRAN), CUDA_ERROR_UNKNOWN);
	cu.sseg_fake_cuda_fail(NULL, 0, 0, 0);
	CU_OK(cu.cuMemUnmap(va, 2 * GRAN)); /* one call for two mappings */
}

static void check_runtime_script(void)
{
	CUmemGenericAllocationHandle first, second;
	CUmemAllocationProp prop = host_prop(0, 0);

	first = create(GRAN, 0);
	cu.sseg_fake_cuda_fail("cuMemCreate", 2, 1, CUDA_ERROR_OUT_OF_MEMORY);
	second = create(GRAN, 0);
	CHECK_CU(cu.cuMemCreate(&second, GRAN, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
	CU_OK(cu.cuMemRelease(second));
	cu.sseg_fake_cuda_fail("cuMemRelease", 1, -1, CUDA_ERROR_UNKNOWN);
	for (int i = 0; i < 3; i++)
		CHECK_CU(cu.cuMemRelease(first), CUDA_ERROR_UNKNOWN);
	cu.sseg_fake_cuda_fail(NULL, 0, 0, 0);
	CU_OK(cu.cuMemRelease(first));
}

static int case_scripted(void *arg)
{
	CUmemGenericAllocationHandle handle;
	unsigned char *p;
	CUdeviceptr va = 0;

	start("", "cuMemMap:2:CUDA_ERROR_OUT_OF_MEMORY,cuMemUnmap:1-:999");
	handle = create(GRAN, 0);
	CU_OK(cu.cuMemAddressReserve(&va, 2 * GRAN, 0, 0, 0));
	p = (unsigned char *)(uintptr_t)va;
	check_env_script(handle, p);
	CU_OK(cu.cuMemAddressFree(va, 2 * GRAN));
	CU_OK(cu.cuMemRelease(handle));
	check_runtime_script();
	finish();
	return 0;
}

static int case_bugs(void *arg)
{
	CUmemGenericAllocationHandle handle;
	unsigned char *p;
	CUdeviceptr va;

	start("", NULL);
	handle = create(2 * GRAN, 0);
	p = map_new(handle, 2 * GRAN);
	va = (CUdeviceptr)(uintptr_t)p;
	CU_OK(cu.cuMemRelease(handle));
	CHECK_CU(cu.cuMemRelease(handle), CUDA_ERROR_INVALID_VALUE);
	CHECK(cu.sseg_fake_cuda_bugs() == 1);
	CHECK_CU(cu.cuMemAddressFree(va, 2 * GRAN), CUDA_ERROR_INVALID_VALUE);
	CHECK(cu.sseg_fake_cuda_bugs() == 2);
	CHECK_CU(cu.cuMemUnmap(va, GRAN), CUDA_ERROR_INVALID_VALUE); /* half a mapping */
	CHECK(cu.sseg_fake_cuda_bugs() == 3);
	unmap_free(p, 2 * GRAN);
	CHECK_CU(cu.cuMemUnmap(va, 2 * GRAN), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cu.cuMemAddressFree(va, 2 * GRAN), CUDA_ERROR_INVALID_VALUE);
	CHECK(cu.sseg_fake_cuda_bugs() == 5);
	CHECK(touch(p) == SEGV_EXIT); /* really gone */
	cu.sseg_fake_cuda_reset();
	CHECK(cu.sseg_fake_cuda_calls(NULL) == 0);
	finish();
	return 0;
}

/* ---- device memory and copies ---- */

/* A copy needs a context, and a device end the device can address. */
static int case_copies(void *arg)
{
	unsigned char *host = NULL, back[4096], pageable[4096];
	CUdeviceptr dev = 0;

	load("", NULL);
	CU_OK(cu.cuInit(0));
	CHECK_CU(cu.cuMemAlloc(&dev, MiB), CUDA_ERROR_INVALID_CONTEXT);
	enter_device(0);
	CU_OK(cu.cuMemAlloc(&dev, MiB));
	CU_OK(cu.cuMemHostAlloc((void **)&host, MiB, 0));
	fill(host, sizeof(back), 0);
	CU_OK(cu.cuMemcpyHtoD(dev + 4096, host, sizeof(back)));
	CU_OK(cu.cuMemcpyDtoH(back, dev + 4096, sizeof(back)));
	CHECK(holds(back, sizeof(back), 0));
	CU_OK(cu.cuMemcpyHtoD(va_of(host), back, sizeof(back))); /* pinned: addressable */
	CHECK_CU(cu.cuMemcpyHtoD(va_of(pageable), back, sizeof(back)), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cu.cuMemcpyDtoH(back, dev + MiB - 100, sizeof(back)), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cu.cuMemHostAlloc((void **)&host, MiB, 0x80), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuMemFreeHost(host));
	CU_OK(cu.cuMemFree(dev));
	CHECK_CU(cu.cuMemFree(dev), CUDA_ERROR_INVALID_VALUE);
	CHECK(cu.sseg_fake_cuda_bugs() == 1);
	cu.sseg_fake_cuda_reset();
	finish();
	return 0;
}

/* The memory type of a pointer: HOST for pinned, registered and host VMM
 * memory, DEVICE for device memory, INVALID_VALUE for pageable memory. */
static unsigned int memory_type_of(const void *p, CUresult want)
{
	unsigned int type = 0;

	CHECK_CU(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va_of(p)), want);
	return type;
}

static int case_memory_type(void *arg)
{
	static unsigned char pageable[8192] __attribute__((aligned(4096)));
	CUmemGenericAllocationHandle handle;
	unsigned char *host = NULL, *vmm;
	CUdeviceptr dev = 0;
	unsigned int type;

	load("", NULL);
	CU_OK(cu.cuInit(0));
	CHECK_CU(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0),
		 CUDA_ERROR_INVALID_CONTEXT);
	enter_device(0);
	CU_OK(cu.cuMemAlloc(&dev, MiB));
	CU_OK(cu.cuMemHostAlloc((void **)&host, MiB, 0));
	CHECK(memory_type_of(host + 100, CUDA_SUCCESS) == CU_MEMORYTYPE_HOST);
	CHECK(memory_type_of((void *)(uintptr_t)(dev + 100), CUDA_SUCCESS) == CU_MEMORYTYPE_DEVICE);
	memory_type_of(pageable, CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuMemHostRegister(pageable, sizeof(pageable), 0));
	CHECK(memory_type_of(pageable + 4096, CUDA_SUCCESS) == CU_MEMORYTYPE_HOST);
	CU_OK(cu.cuMemHostUnregister(pageable));
	memory_type_of(pageable, CUDA_ERROR_INVALID_VALUE);
	handle = create(GRAN, 0);
	vmm = map_new(handle, GRAN);
	CHECK(memory_type_of(vmm + 8, CUDA_SUCCESS) == CU_MEMORYTYPE_HOST);
	unmap_free(vmm, GRAN);
	CU_OK(cu.cuMemRelease(handle));
	CU_OK(cu.cuMemFreeHost(host));
	CU_OK(cu.cuMemFree(dev));
	CHECK(cu.sseg_fake_cuda_bugs() == 0);
	cu.sseg_fake_cuda_reset();
	finish();
	return 0;
}

/* ---- several threads at once ---- */

/* The current context is per thread: each takes its own. */
static void *churn(void *arg)
{
	enter_device(0);
	for (int i = 0; i < 100; i++) {
		CUmemGenericAllocationHandle handle = create(GRAN, 0);
		unsigned char *p = map_new(handle, GRAN);

		set_access(va_of(p), GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 1);
		p[i] = (unsigned char)i;
		unmap_free(p, GRAN);
		CU_OK(cu.cuMemRelease(handle));
	}
	leave_device(0);
	return NULL;
}

static int case_threads(void *arg)
{
	pthread_t threads[4];

	start("", NULL);
	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&threads[i], NULL, churn, NULL) == 0);
	for (int i = 0; i < 4; i++)
		pthread_join(threads[i], NULL);
	CHECK(cu.sseg_fake_cuda_calls("cuMemCreate") == 400);
	finish();
	return 0;
}

static const struct tu_case cases[] = {
	{ "driver", case_driver, NULL, 0 },
	{ "attributes", case_attributes, NULL, 0 },
	{ "uuid", case_uuid, NULL, 0 },
	{ "posix_fd", case_posix_fd, NULL, 0 },
	{ "fabric", case_fabric, NULL, 0 },
	{ "imex", case_imex, NULL, 0 },
	{ "context", case_context, NULL, 0 },
	{ "peer", case_peer, NULL, 0 },
	{ "map_offset", case_map_offset, NULL, 0 },
	{ "access_locations", case_access_locations, NULL, 0 },
	{ "host_numa_blocked", case_host_numa_blocked, NULL, 0 },
	{ "fork", case_fork, NULL, 0 },
	{ "scripted", case_scripted, NULL, 0 },
	{ "bugs", case_bugs, NULL, 0 },
	{ "host_register", case_host_register, NULL, 0 },
	{ "copies", case_copies, NULL, 0 },
	{ "memory_type", case_memory_type, NULL, 0 },
	{ "threads", case_threads, NULL, 0 },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	return tu_run_cases(argc, argv, cases);
}
