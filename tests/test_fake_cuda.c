/* The fake CUDA driver, driven the way the CUDA backend drives libcuda.so.1:
 * dlopen, dlsym of cuGetProcAddress_v2 only, every entry point by base name
 * and version. Each case runs in a child that sets its own SSEG_FAKE_CUDA
 * before it loads the fake (the configuration is read once per process);
 * sharing is checked with grandchildren that import what the child exported. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "driver/cuda_abi.h"
#include "sseg_fake_cuda.h"
#include "testutil.h"

#define MiB (1ull << 20)
#define GRAN (2 * MiB)
#define SEGV_EXIT 42
#define CU_ERROR_INVALID_CONTEXT 201

#define CHECK_CU(expr, expect)                                                       \
	do {                                                                         \
		CUresult cu_ = (expr);                                               \
		if (cu_ != (expect)) {                                               \
			fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, \
				__LINE__, #expr, cu_, (expect));                     \
			exit(1);                                                     \
		}                                                                    \
	} while (0)
#define CU_OK(expr) CHECK_CU(expr, CUDA_SUCCESS)

#define DRIVER_ENTRIES(X)                \
	X(cuGetErrorName)                \
	X(cuInit)                        \
	X(cuDriverGetVersion)            \
	X(cuDeviceGetCount)              \
	X(cuDeviceGet)                   \
	X(cuDeviceGetAttribute)          \
	X(cuDevicePrimaryCtxRetain)      \
	X(cuDevicePrimaryCtxRelease)     \
	X(cuCtxSetCurrent)               \
	X(cuMemGetAllocationGranularity) \
	X(cuMemCreate)                   \
	X(cuMemRelease)                  \
	X(cuMemAddressReserve)           \
	X(cuMemAddressFree)              \
	X(cuMemMap)                      \
	X(cuMemUnmap)                    \
	X(cuMemSetAccess)                \
	X(cuMemExportToShareableHandle)  \
	X(cuMemImportFromShareableHandle) \
	X(cuMemHostRegister)             \
	X(cuMemHostUnregister)           \
	X(cuMemHostGetDevicePointer)

#define CONTROL_ENTRIES(X)             \
	X(sseg_fake_cuda_fail)         \
	X(sseg_fake_cuda_configure)    \
	X(sseg_fake_cuda_calls)        \
	X(sseg_fake_cuda_live_handles) \
	X(sseg_fake_cuda_live_reservations) \
	X(sseg_fake_cuda_live_mappings) \
	X(sseg_fake_cuda_live_registrations) \
	X(sseg_fake_cuda_live_contexts) \
	X(sseg_fake_cuda_bugs)         \
	X(sseg_fake_cuda_registration) \
	X(sseg_fake_cuda_access)       \
	X(sseg_fake_cuda_reset)

/* The driver as the backend sees it, and the fake's control API. */
static struct {
	void *lib;
	PFN_cuGetProcAddress_v2 cuGetProcAddress;
#define DRIVER_FIELD(name) PFN_##name name;
	DRIVER_ENTRIES(DRIVER_FIELD)
#undef DRIVER_FIELD
#define CONTROL_FIELD(name) __typeof__(name) *name;
	CONTROL_ENTRIES(CONTROL_FIELD)
#undef CONTROL_FIELD
} cu;

static const char *fake_path(void)
{
	static char path[4096];
	const char *dir = getenv("SSEG_BUILD_DIR");

	snprintf(path, sizeof(path), "%s/libsseg_fake_cuda.so", dir ? dir : ".");
	return path;
}

static void *resolve(const char *name)
{
	void *fn = NULL;
	int status = -1;

	CU_OK(cu.cuGetProcAddress(name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
	CHECK(fn && status == CU_GET_PROC_ADDRESS_SUCCESS);
	return fn;
}

/* Loads the fake with this configuration; the caller is a fresh child. */
static void load(const char *config, const char *failures)
{
	CHECK(!dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD));
	setenv("SSEG_FAKE_CUDA", config, 1);
	if (failures)
		setenv("SSEG_FAKE_CUDA_FAIL", failures, 1);
	else
		unsetenv("SSEG_FAKE_CUDA_FAIL");
	cu.lib = dlopen(fake_path(), RTLD_NOW | RTLD_LOCAL);
	if (!cu.lib)
		fprintf(stderr, "dlopen: %s\n", dlerror());
	CHECK(cu.lib);
	cu.cuGetProcAddress = (PFN_cuGetProcAddress_v2)dlsym(cu.lib, "cuGetProcAddress_v2");
	CHECK(cu.cuGetProcAddress);
#define DRIVER_RESOLVE(name) cu.name = (PFN_##name)resolve(#name);
	DRIVER_ENTRIES(DRIVER_RESOLVE)
#undef DRIVER_RESOLVE
	/* The instance the library under test loaded, as a test reaches it. */
	void *same = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	CHECK(same == cu.lib);
#define CONTROL_RESOLVE(name) CHECK((cu.name = (__typeof__(name) *)dlsym(same, #name)));
	CONTROL_ENTRIES(CONTROL_RESOLVE)
#undef CONTROL_RESOLVE
}

static void load_and_init(const char *config, const char *failures)
{
	load(config, failures);
	CU_OK(cu.cuInit(0));
}

static CUmemAllocationProp host_prop(int node, unsigned handle_types)
{
	CUmemAllocationProp prop;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop.location.id = node;
	prop.requestedHandleTypes = handle_types;
	return prop;
}

static CUmemGenericAllocationHandle create(size_t size, unsigned handle_types)
{
	CUmemAllocationProp prop = host_prop(0, handle_types);
	CUmemGenericAllocationHandle handle = 0;

	CU_OK(cu.cuMemCreate(&handle, size, &prop, 0));
	CHECK(handle != 0);
	return handle;
}

static void set_access(CUdeviceptr va, size_t size, CUmemAccess_flags host, int devices)
{
	CUmemAccessDesc desc[4];
	size_t n = 0;

	desc[n].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	desc[n].location.id = 0;
	desc[n++].flags = host;
	for (int dev = 0; dev < devices; dev++) {
		desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		desc[n].location.id = dev;
		desc[n++].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	}
	CU_OK(cu.cuMemSetAccess(va, size, desc, n));
}

/* Reserves and maps the whole handle; the CPU may not touch it yet. */
static unsigned char *map_new(CUmemGenericAllocationHandle handle, size_t size)
{
	CUdeviceptr va = 0;

	CU_OK(cu.cuMemAddressReserve(&va, size, 0, 0, 0));
	CHECK(va % GRAN == 0);
	CU_OK(cu.cuMemMap(va, size, 0, handle, 0));
	return (unsigned char *)(uintptr_t)va;
}

static void unmap_free(unsigned char *p, size_t size)
{
	CU_OK(cu.cuMemUnmap((CUdeviceptr)(uintptr_t)p, size));
	CU_OK(cu.cuMemAddressFree((CUdeviceptr)(uintptr_t)p, size));
}

struct live {
	int handles, mappings, reservations, registrations, contexts, bugs;
};

static struct live live_now(void)
{
	return (struct live){ cu.sseg_fake_cuda_live_handles(), cu.sseg_fake_cuda_live_mappings(),
			      cu.sseg_fake_cuda_live_reservations(),
			      cu.sseg_fake_cuda_live_registrations(),
			      cu.sseg_fake_cuda_live_contexts(), cu.sseg_fake_cuda_bugs() };
}

/* A forked child starts with its parent's driver state (the fake, unlike
 * the real driver, keeps working after fork), so it compares with that. */
static void check_back_to(struct live before)
{
	struct live now = live_now();

	if (memcmp(&now, &before, sizeof(now)) != 0) {
		fprintf(stderr, "left: %d handles, %d mappings, %d reservations, "
			"%d registrations, %d contexts, %d bugs\n", now.handles - before.handles,
			now.mappings - before.mappings, now.reservations - before.reservations,
			now.registrations - before.registrations, now.contexts - before.contexts,
			now.bugs - before.bugs);
		exit(1);
	}
}

static void check_clean(void)
{
	check_back_to((struct live){ 0 });
}

static void on_segv(int sig)
{
	_exit(SEGV_EXIT);
}

static int touch_child(void *arg)
{
	struct sigaction sa = { .sa_handler = on_segv };

	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	return *(volatile unsigned char *)arg == 0xff ? 3 : 0;
}

/* 0 when a read of p works, SEGV_EXIT when it faults. */
static int touch(unsigned char *p)
{
	return tu_wait(tu_fork(touch_child, p), 10000);
}

static void fill(unsigned char *p, size_t size, int rank)
{
	for (size_t off = 0; off < size; off += 4093)
		p[off] = tu_pattern(rank, off);
}

static int holds(const unsigned char *p, size_t size, int rank)
{
	for (size_t off = 0; off < size; off += 4093)
		if (p[off] != tu_pattern(rank, off))
			return 0;
	return 1;
}

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
}

static void check_error_names(void)
{
	const char *name = NULL;

	CU_OK(cu.cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &name));
	CHECK(strcmp(name, "CUDA_ERROR_OUT_OF_MEMORY") == 0);
	CU_OK(cu.cuGetErrorName(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, &name));
	CHECK(strcmp(name, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED") == 0);
	CU_OK(cu.cuGetErrorName(CUDA_ERROR_NOT_PERMITTED, &name));
	CHECK(strcmp(name, "CUDA_ERROR_NOT_PERMITTED") == 0);
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
	CU_OK(cu.cuDeviceGetAttribute(
		&value, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
	CHECK(value == 0);
	CU_OK(cu.cuDeviceGetAttribute(&value, 1, 0)); /* not modelled: 0 */
	CHECK(value == 0);
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
	CHECK_CU(cu.cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
	CU_OK(cu.sseg_fake_cuda_configure("host_numa_vmm=1;granularity=65536"));
	CU_OK(cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	CHECK(gran == 65536);
	prop.location.id = 0;
	CHECK_CU(cu.cuMemCreate(&handle, gran, &prop, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK(cu.sseg_fake_cuda_configure("no_such_key=1") < 0);
	CHECK(cu.sseg_fake_cuda_calls("cuInit") == 1);
	CHECK(cu.sseg_fake_cuda_calls("cuNoSuchEntry") == -1);
	check_clean();
	return 0;
}

/* ---- one allocation, mapped, shared over a POSIX fd ---- */

struct shared {
	int fd;                   /* the exported POSIX fd */
	CUmemFabricHandle fabric; /* or the fabric handle */
	CUmemAllocationHandleType type;
	size_t size;
};

/* A peer: imports, maps, checks the owner's bytes and writes its own in
 * the second half. */
static int peer_child(void *arg)
{
	const struct shared *s = arg;
	void *os_handle = s->type == CU_MEM_HANDLE_TYPE_FABRIC ? (void *)&s->fabric
							       : (void *)(uintptr_t)s->fd;
	struct live before = live_now();
	CUmemGenericAllocationHandle handle = 0;
	unsigned char *p;

	CU_OK(cu.cuMemImportFromShareableHandle(&handle, os_handle, s->type));
	p = map_new(handle, s->size);
	CU_OK(cu.cuMemRelease(handle));
	CHECK(touch(p) == SEGV_EXIT);
	set_access((CUdeviceptr)(uintptr_t)p, s->size, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 1);
	CHECK(holds(p, s->size / 2, 0));
	fill(p + s->size / 2, s->size / 2, 1);
	unmap_free(p, s->size);
	check_back_to(before);
	return 0;
}

static void check_fault_until_access(unsigned char *p, size_t size)
{
	CHECK(touch(p) == SEGV_EXIT);
	CHECK(cu.sseg_fake_cuda_access(0) == 0);
	set_access((CUdeviceptr)(uintptr_t)p, size, CU_MEM_ACCESS_FLAGS_PROT_READ, 0);
	CHECK(touch(p) == 0);
	CHECK(cu.sseg_fake_cuda_access(0) == 0);
	set_access((CUdeviceptr)(uintptr_t)p, size, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 2);
	CHECK(cu.sseg_fake_cuda_access(0) == 1 && cu.sseg_fake_cuda_access(1) == 1);
}

/* Owner side of a share: the owner fills the first half, a peer process
 * the second; the owner's handle is released before the peer maps. */
static void share(struct shared *s, unsigned types)
{
	CUmemGenericAllocationHandle handle = create(s->size, types);
	unsigned char *p = map_new(handle, s->size);

	check_fault_until_access(p, s->size);
	fill(p, s->size / 2, 0);
	if (s->type == CU_MEM_HANDLE_TYPE_FABRIC)
		CU_OK(cu.cuMemExportToShareableHandle(&s->fabric, handle, s->type, 0));
	else
		CU_OK(cu.cuMemExportToShareableHandle(&s->fd, handle, s->type, 0));
	CHECK(tu_wait(tu_fork(peer_child, s), 30000) == 0);
	CHECK(holds(p + s->size / 2, s->size / 2, 1));
	CU_OK(cu.cuMemRelease(handle));
	CHECK(holds(p, s->size / 2, 0)); /* the mapping keeps the memory */
	unmap_free(p, s->size);
	check_clean();
}

static int case_posix_fd(void *arg)
{
	struct shared s = { .type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, .size = 4 * GRAN };

	load_and_init("devices=2", NULL);
	share(&s, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CHECK(close(s.fd) == 0);
	return 0;
}

/* ---- fabric: works when configured, and the attribute that lies ---- */

static int stale_fabric_child(void *arg)
{
	CUmemGenericAllocationHandle handle;

	CHECK_CU(cu.cuMemImportFromShareableHandle(&handle, arg, CU_MEM_HANDLE_TYPE_FABRIC),
		 CUDA_ERROR_INVALID_VALUE);
	return 0;
}

static void check_bad_fabric(void)
{
	CUmemGenericAllocationHandle handle = create(GRAN, CU_MEM_HANDLE_TYPE_FABRIC), imported = 0;
	CUmemFabricHandle fabric, forged;

	CU_OK(cu.cuMemExportToShareableHandle(&fabric, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0));
	forged = fabric;
	forged.data[0] ^= 1;
	CHECK_CU(cu.cuMemImportFromShareableHandle(&imported, &forged, CU_MEM_HANDLE_TYPE_FABRIC),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK(imported == 0);
	CHECK_CU(cu.cuMemExportToShareableHandle(&forged, handle,
						 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		 CUDA_ERROR_INVALID_VALUE); /* not requested at creation */
	CU_OK(cu.cuMemRelease(handle));
	CHECK(tu_wait(tu_fork(stale_fabric_child, &fabric), 10000) == 0);
}

static int case_fabric(void *arg)
{
	struct shared s = { .type = CU_MEM_HANDLE_TYPE_FABRIC, .size = 2 * GRAN };

	load_and_init("devices=2;fabric=1;fabric_works=1", NULL);
	share(&s, CU_MEM_HANDLE_TYPE_FABRIC | CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	check_bad_fabric();
	check_clean();
	return 0;
}

static int case_fabric_lie(void *arg)
{
	CUmemAllocationProp prop = host_prop(0, CU_MEM_HANDLE_TYPE_FABRIC);
	CUmemGenericAllocationHandle handle;
	CUmemFabricHandle fabric;
	int value = 0;

	load_and_init("fabric=1", NULL);
	CU_OK(cu.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0));
	CHECK(value == 1);
	CHECK_CU(cu.cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_NOT_PERMITTED);
	handle = create(GRAN, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CHECK_CU(cu.cuMemExportToShareableHandle(&fabric, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0),
		 CUDA_ERROR_NOT_PERMITTED);
	CU_OK(cu.cuMemRelease(handle));
	CU_OK(cu.sseg_fake_cuda_configure("fabric=0"));
	CHECK_CU(cu.cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
	check_clean();
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

	load_and_init("", "cuMemMap:2:CUDA_ERROR_OUT_OF_MEMORY,cuMemUnmap:1-:999");
	handle = create(GRAN, 0);
	CU_OK(cu.cuMemAddressReserve(&va, 2 * GRAN, 0, 0, 0));
	p = (unsigned char *)(uintptr_t)va;
	check_env_script(handle, p);
	CU_OK(cu.cuMemAddressFree(va, 2 * GRAN));
	CU_OK(cu.cuMemRelease(handle));
	check_runtime_script();
	check_clean();
	return 0;
}

static int case_bugs(void *arg)
{
	CUmemGenericAllocationHandle handle;
	unsigned char *p;
	CUdeviceptr va;

	load_and_init("", NULL);
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
	check_clean();
	return 0;
}

/* ---- host registration ---- */

static void check_chunks(unsigned char *p)
{
	void *start;
	size_t bytes;
	unsigned flags;
	unsigned both = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;

	CU_OK(cu.cuMemHostRegister(p + 4 * MiB, 4 * MiB, CU_MEMHOSTREGISTER_PORTABLE));
	CU_OK(cu.cuMemHostRegister(p, 4 * MiB, both));
	CHECK_CU(cu.cuMemHostRegister(p + 2 * MiB, 4 * MiB, both),
		 CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	CHECK(cu.sseg_fake_cuda_live_registrations() == 2);
	CU_OK(cu.sseg_fake_cuda_registration(0, &start, &bytes, &flags));
	CHECK(start == p && bytes == 4 * MiB && flags == both);
	CU_OK(cu.sseg_fake_cuda_registration(1, &start, &bytes, &flags));
	CHECK(start == p + 4 * MiB && flags == CU_MEMHOSTREGISTER_PORTABLE);
	CHECK(cu.sseg_fake_cuda_registration(2, &start, &bytes, &flags) < 0);
}

static void check_device_pointers(unsigned char *p)
{
	CUdeviceptr dptr = 0;

	CU_OK(cu.cuMemHostGetDevicePointer(&dptr, p + 12345, 0));
	CHECK(dptr == (CUdeviceptr)(uintptr_t)(p + 12345));
	CHECK_CU(cu.cuMemHostGetDevicePointer(&dptr, p + 5 * MiB, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cu.cuMemHostGetDevicePointer(&dptr, p + 9 * MiB, 0), CUDA_ERROR_INVALID_VALUE);
}

static void check_limits(unsigned char *p, size_t size)
{
	CU_OK(cu.sseg_fake_cuda_configure("max_register=4194304"));
	CHECK_CU(cu.cuMemHostRegister(p, size, 0), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.sseg_fake_cuda_configure("max_register=549755813887"));
	munmap(p + size - MiB, MiB);
	CHECK_CU(cu.cuMemHostRegister(p, size, 0), CUDA_ERROR_INVALID_VALUE); /* a hole */
}

static int case_host_register(void *arg)
{
	size_t size = 10 * MiB;
	unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CUcontext ctx = NULL;

	CHECK(p != MAP_FAILED);
	load_and_init("", NULL);
	CHECK_CU(cu.cuMemHostRegister(p, MiB, 0), CU_ERROR_INVALID_CONTEXT);
	CU_OK(cu.cuDevicePrimaryCtxRetain(&ctx, 0));
	CU_OK(cu.cuCtxSetCurrent(ctx));
	check_chunks(p);
	check_device_pointers(p);
	CHECK_CU(cu.cuMemHostUnregister(p + MiB), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CHECK(cu.sseg_fake_cuda_bugs() == 1);
	CU_OK(cu.cuMemHostUnregister(p));
	CU_OK(cu.cuMemHostUnregister(p + 4 * MiB));
	check_limits(p, size);
	CU_OK(cu.cuDevicePrimaryCtxRelease(0));
	CHECK_CU(cu.cuMemHostRegister(p, MiB, 0), CU_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuDevicePrimaryCtxRelease(0), CU_ERROR_INVALID_CONTEXT);
	CHECK(cu.sseg_fake_cuda_bugs() == 2);
	cu.sseg_fake_cuda_reset();
	check_clean();
	return 0;
}

/* ---- several threads at once ---- */

static void *churn(void *arg)
{
	for (int i = 0; i < 100; i++) {
		CUmemGenericAllocationHandle handle = create(GRAN, 0);
		unsigned char *p = map_new(handle, GRAN);

		set_access((CUdeviceptr)(uintptr_t)p, GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 1);
		p[i] = (unsigned char)i;
		unmap_free(p, GRAN);
		CU_OK(cu.cuMemRelease(handle));
	}
	return NULL;
}

static int case_threads(void *arg)
{
	pthread_t threads[4];

	load_and_init("", NULL);
	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&threads[i], NULL, churn, NULL) == 0);
	for (int i = 0; i < 4; i++)
		pthread_join(threads[i], NULL);
	CHECK(cu.sseg_fake_cuda_calls("cuMemCreate") == 400);
	check_clean();
	return 0;
}

static void run(const char *name, int (*fn)(void *))
{
	int status = tu_wait(tu_fork(fn, NULL), 60000);

	if (status != 0) {
		fprintf(stderr, "case %s failed: status %d\n", name, status);
		exit(1);
	}
	printf("ok %s\n", name);
}

int main(void)
{
	run("driver", case_driver);
	run("posix_fd", case_posix_fd);
	run("fabric", case_fabric);
	run("fabric_lie", case_fabric_lie);
	run("scripted", case_scripted);
	run("bugs", case_bugs);
	run("host_register", case_host_register);
	run("threads", case_threads);
	return 0;
}
