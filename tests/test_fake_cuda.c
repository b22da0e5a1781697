/* SPDX-License-Identifier: Apache-2.0 */
/* The fake CUDA driver, driven the way the CUDA backend drives libcuda.so.1:
 * dlopen, dlsym of cuGetProcAddress_v2 only, every entry point by base name
 * and version. Each case runs in a child that sets its own SSEG_FAKE_CUDA
 * before it loads the fake (the configuration is read once per process).
 * The fake is as strict as the real driver, and each rule has a case here:
 * contexts, peer access, IMEX, attributes by driver version, cuMemMap's
 * offset, a container that blocks HOST_NUMA, fork, and host registration.
 * Sharing is checked with peer processes forked before the driver is
 * initialized, since a child forked after cannot use it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include "driver/cuda_abi.h"
#include "sseg_fake_cuda.h"
#include "testutil.h"

#define MiB (1ull << 20)
#define GRAN (2 * MiB)
#define SEGV_EXIT 42

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

typedef PFN_cuDeviceGetUuid_v2 PFN_cuDeviceGetUuid;

#define DRIVER_ENTRIES(X)                \
	X(cuGetErrorName)                \
	X(cuInit)                        \
	X(cuDriverGetVersion)            \
	X(cuDeviceGetCount)              \
	X(cuDeviceGet)                   \
	X(cuDeviceGetAttribute)          \
	X(cuDeviceCanAccessPeer)         \
	X(cuDeviceGetUuid)               \
	X(cuDevicePrimaryCtxRetain)      \
	X(cuDevicePrimaryCtxRelease)     \
	X(cuCtxSetCurrent)               \
	X(cuCtxGetCurrent)               \
	X(cuCtxSynchronize)              \
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
	X(cuMemHostGetDevicePointer)     \
	X(cuMemAlloc)                    \
	X(cuMemFree)                     \
	X(cuMemHostAlloc)                \
	X(cuMemFreeHost)                 \
	X(cuMemcpyHtoD)                  \
	X(cuMemcpyDtoH)

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
	X(sseg_fake_cuda_granted)      \
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

static void *resolve_at(const char *name, int version)
{
	void *fn = NULL;
	int status = -1;

	CU_OK(cu.cuGetProcAddress(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status));
	CHECK(fn && status == CU_GET_PROC_ADDRESS_SUCCESS);
	return fn;
}

static void *resolve(const char *name)
{
	return resolve_at(name, 12000);
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

/* Retains dev's primary context and makes it current on this thread. */
static void enter_device(int dev)
{
	CUcontext ctx = NULL;

	CU_OK(cu.cuDevicePrimaryCtxRetain(&ctx, dev));
	CU_OK(cu.cuCtxSetCurrent(ctx));
}

static void leave_device(int dev)
{
	CU_OK(cu.cuCtxSetCurrent(NULL));
	CU_OK(cu.cuDevicePrimaryCtxRelease(dev));
}

/* Loaded, initialized, and device 0's context current: what VMM calls need. */
static void start(const char *config, const char *failures)
{
	load(config, failures);
	CU_OK(cu.cuInit(0));
	enter_device(0);
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

static CUmemAccessDesc access_desc(CUmemLocationType type, int id, CUmemAccess_flags flags)
{
	return (CUmemAccessDesc){ .location = { .type = type, .id = id }, .flags = flags };
}

/* Host access and read-write for devices 0..devices-1. */
static CUresult try_access(CUdeviceptr va, size_t size, CUmemAccess_flags host, int devices)
{
	CUmemAccessDesc desc[1 + 16];
	size_t n = 0;

	desc[n++] = access_desc(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, host);
	for (int dev = 0; dev < devices; dev++)
		desc[n++] = access_desc(CU_MEM_LOCATION_TYPE_DEVICE, dev,
					CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	return cu.cuMemSetAccess(va, size, desc, n);
}

static void set_access(CUdeviceptr va, size_t size, CUmemAccess_flags host, int devices)
{
	CU_OK(try_access(va, size, host, devices));
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

static CUdeviceptr va_of(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

static void unmap_free(unsigned char *p, size_t size)
{
	CU_OK(cu.cuMemUnmap(va_of(p), size));
	CU_OK(cu.cuMemAddressFree(va_of(p), size));
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

/* Nothing alive but the context start() made current. */
static void check_clean(void)
{
	check_back_to((struct live){ .contexts = 1 });
}

static void finish(void)
{
	leave_device(0);
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

/* 0 when a read of p works, SEGV_EXIT when it faults (the child makes no
 * driver call: it could not, after fork). */
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

/* ---- sharing with a peer process ---- */

struct shared {
	int fd;                   /* the exported POSIX fd */
	CUmemFabricHandle fabric; /* or the fabric handle */
	CUmemAllocationHandleType type;
	size_t size;
};

/* A peer process, forked before this one initializes the driver (a child
 * forked after could not use it); it gets the handle over a pipe. */
struct peer {
	const char *config;
	int device;
	CUresult import_rc; /* what its import must answer */
	int pipe[2];
	pid_t pid;
};

/* The handle travels over a pipe; a POSIX fd is opened again through
 * /proc (the peer is the owner's child), as it would arrive over a socket. */
static void send_shared(int out, const struct shared *s)
{
	CHECK(write(out, s, sizeof(*s)) == (ssize_t)sizeof(*s));
}

static void recv_shared(int in, struct shared *s)
{
	char path[64];

	CHECK(read(in, s, sizeof(*s)) == (ssize_t)sizeof(*s));
	if (s->type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getppid(), s->fd);
	s->fd = open(path, O_RDWR | O_CLOEXEC);
	CHECK(s->fd >= 0);
}

/* Imports, maps, checks the owner's bytes and writes its own in the second
 * half; or checks that the import is refused as it must be. */
static void peer_use(const struct shared *s, CUresult import_rc, int device)
{
	void *os_handle = s->type == CU_MEM_HANDLE_TYPE_FABRIC ? (void *)&s->fabric
							       : (void *)(uintptr_t)s->fd;
	CUmemGenericAllocationHandle handle = 0;
	unsigned char *p;

	CHECK_CU(cu.cuMemImportFromShareableHandle(&handle, os_handle, s->type), import_rc);
	if (import_rc != CUDA_SUCCESS)
		return;
	p = map_new(handle, s->size);
	CU_OK(cu.cuMemRelease(handle));
	CHECK(touch(p) == SEGV_EXIT);
	set_access(va_of(p), s->size, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, device + 1);
	CHECK(holds(p, s->size / 2, 0));
	fill(p + s->size / 2, s->size / 2, 1);
	unmap_free(p, s->size);
}

static int peer_main(void *arg)
{
	struct peer *peer = arg;
	struct shared s;

	close(peer->pipe[1]);
	recv_shared(peer->pipe[0], &s);
	load(peer->config, NULL);
	CU_OK(cu.cuInit(0));
	enter_device(peer->device);
	peer_use(&s, peer->import_rc, peer->device);
	if (s.type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		close(s.fd);
	leave_device(peer->device);
	check_back_to((struct live){ 0 });
	return 0;
}

static void peer_start(struct peer *peer)
{
	CHECK(pipe2(peer->pipe, O_CLOEXEC) == 0);
	peer->pid = tu_fork(peer_main, peer);
	close(peer->pipe[0]);
}

static int peer_finish(struct peer *peer, const struct shared *s)
{
	send_shared(peer->pipe[1], s);
	close(peer->pipe[1]);
	return tu_wait(peer->pid, 30000);
}

static void check_fault_until_access(unsigned char *p, size_t size)
{
	CHECK(touch(p) == SEGV_EXIT);
	CHECK(cu.sseg_fake_cuda_access(0) == 0);
	set_access(va_of(p), size, CU_MEM_ACCESS_FLAGS_PROT_READ, 0);
	CHECK(touch(p) == 0);
	CHECK(cu.sseg_fake_cuda_access(0) == 0);
	set_access(va_of(p), size, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 2);
	CHECK(cu.sseg_fake_cuda_access(0) == 1 && cu.sseg_fake_cuda_access(1) == 1);
}

/* Owner side of a share: the owner fills the first half, the peer the
 * second; the owner's handle is released before the peer maps. */
static void share(struct shared *s, unsigned types, struct peer *peer)
{
	CUmemGenericAllocationHandle handle = create(s->size, types);
	unsigned char *p = map_new(handle, s->size);

	check_fault_until_access(p, s->size);
	fill(p, s->size / 2, 0);
	if (s->type == CU_MEM_HANDLE_TYPE_FABRIC)
		CU_OK(cu.cuMemExportToShareableHandle(&s->fabric, handle, s->type, 0));
	else
		CU_OK(cu.cuMemExportToShareableHandle(&s->fd, handle, s->type, 0));
	CHECK(peer_finish(peer, s) == 0);
	if (peer->import_rc == CUDA_SUCCESS)
		CHECK(holds(p + s->size / 2, s->size / 2, 1));
	CU_OK(cu.cuMemRelease(handle));
	CHECK(holds(p, s->size / 2, 0)); /* the mapping keeps the memory */
	unmap_free(p, s->size);
	check_clean();
}

static int case_posix_fd(void *arg)
{
	struct shared s = { .type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, .size = 4 * GRAN };
	struct peer peer = { .config = "devices=2", .device = 1 };

	peer_start(&peer);
	start("devices=2", NULL);
	share(&s, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, &peer);
	CHECK(close(s.fd) == 0);
	finish();
	return 0;
}

/* ---- fabric handles and IMEX channels ---- */

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
	/* The exporter may import its own handle, until it is released. */
	CHECK_CU(cu.cuMemImportFromShareableHandle(&imported, &fabric, CU_MEM_HANDLE_TYPE_FABRIC),
		 CUDA_ERROR_INVALID_VALUE);
}

static int case_fabric(void *arg)
{
	struct shared s = { .type = CU_MEM_HANDLE_TYPE_FABRIC, .size = 2 * GRAN };
	struct peer peer = { .config = "devices=2;fabric=1;imex=1", .device = 1 };

	peer_start(&peer);
	start("devices=2;fabric=1;imex=1", NULL);
	share(&s, CU_MEM_HANDLE_TYPE_FABRIC | CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, &peer);
	check_bad_fabric();
	finish();
	return 0;
}

/* Rule (IMEX): with a channel, FABRIC allocations are created and exported,
 * and a process that does not share the exporter's channel cannot import
 * them (NOT_PERMITTED); without one, creating fails (NOT_PERMITTED) though
 * the attribute says 1. */
static void check_no_channel(void)
{
	CUmemAllocationProp prop = host_prop(0, CU_MEM_HANDLE_TYPE_FABRIC);
	CUmemGenericAllocationHandle handle;
	CUmemFabricHandle fabric;

	CU_OK(cu.sseg_fake_cuda_configure("imex_channel=0"));
	CHECK_CU(cu.cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_NOT_PERMITTED);
	handle = create(GRAN, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CHECK_CU(cu.cuMemExportToShareableHandle(&fabric, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0),
		 CUDA_ERROR_NOT_PERMITTED);
	CU_OK(cu.cuMemRelease(handle));
	CU_OK(cu.sseg_fake_cuda_configure("fabric_works=1"));
	CU_OK(cu.cuMemCreate(&handle, GRAN, &prop, 0));
	CU_OK(cu.cuMemRelease(handle));
	CU_OK(cu.sseg_fake_cuda_configure("fabric=0"));
	CHECK_CU(cu.cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
}

static int case_imex(void *arg)
{
	struct shared s = { .type = CU_MEM_HANDLE_TYPE_FABRIC, .size = GRAN };
	struct peer peer = { .config = "devices=2;fabric=1", .import_rc = CUDA_ERROR_NOT_PERMITTED };
	int value = 0;

	peer_start(&peer);
	start("devices=2;fabric=1", NULL);
	CU_OK(cu.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0));
	CHECK(value == 1);
	share(&s, CU_MEM_HANDLE_TYPE_FABRIC, &peer);
	check_no_channel();
	check_clean();
	finish();
	return 0;
}

/* ---- the rules of the VMM calls ---- */

/* Rule: every VMM call needs a current context (CUDA_ERROR_INVALID_CONTEXT),
 * and one made current on another thread does not count. */
static void check_vmm_calls_refused(CUmemGenericAllocationHandle handle, unsigned char *p)
{
	CUmemAllocationProp prop = host_prop(0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CUmemAccessDesc desc = access_desc(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0,
					   CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	CUmemGenericAllocationHandle other;
	CUdeviceptr va;
	size_t gran;
	int fd;

	CHECK_CU(cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
		 CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuMemCreate(&other, GRAN, &prop, 0), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuMemAddressReserve(&va, GRAN, 0, 0, 0), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuMemMap(va_of(p) + GRAN, GRAN, 0, handle, 0), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuMemSetAccess(va_of(p), GRAN, &desc, 1), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuMemExportToShareableHandle(&fd, handle,
						 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		 CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuMemImportFromShareableHandle(&other, (void *)(uintptr_t)0,
						   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
		 CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuMemUnmap(va_of(p), GRAN), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuMemAddressFree(va_of(p), 2 * GRAN), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuMemRelease(handle), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuMemHostRegister(p, GRAN, 0), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
}

static void *without_context(void *arg)
{
	check_vmm_calls_refused(((CUmemGenericAllocationHandle *)arg)[0],
				(unsigned char *)(uintptr_t)((CUmemGenericAllocationHandle *)arg)[1]);
	return NULL;
}

static int case_context(void *arg)
{
	CUmemGenericAllocationHandle handle, args[2];
	CUmemAllocationProp prop = host_prop(0, 0);
	unsigned char *p;
	CUdeviceptr va;
	pthread_t thread;

	start("", NULL);
	handle = create(GRAN, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CU_OK(cu.cuMemAddressReserve(&va, 2 * GRAN, 0, 0, 0));
	p = (unsigned char *)(uintptr_t)va;
	CU_OK(cu.cuMemMap(va, GRAN, 0, handle, 0));
	args[0] = handle;
	args[1] = (CUmemGenericAllocationHandle)(uintptr_t)p;
	CHECK(pthread_create(&thread, NULL, without_context, args) == 0);
	pthread_join(thread, NULL);
	CU_OK(cu.cuCtxSetCurrent(NULL));
	check_vmm_calls_refused(handle, p);
	CU_OK(cu.sseg_fake_cuda_configure("vmm_ctx=0"));
	CU_OK(cu.cuMemCreate(&args[0], GRAN, &prop, 0));
	CU_OK(cu.cuMemRelease(args[0]));
	CU_OK(cu.sseg_fake_cuda_configure("vmm_ctx=1"));
	enter_device(0);
	CU_OK(cu.cuDevicePrimaryCtxRelease(0)); /* the second retain */
	CU_OK(cu.cuMemUnmap(va, GRAN));
	CU_OK(cu.cuMemAddressFree(va, 2 * GRAN));
	CU_OK(cu.cuMemRelease(handle));
	finish();
	return 0;
}

/* Rule: a device granted access, or importing, needs peer access to the
 * allocation's device (the creating context's, for host memory); a list
 * with one refused entry applies none. */
static void check_peer_matrix(void)
{
	int can = -1;

	CU_OK(cu.cuDeviceCanAccessPeer(&can, 0, 1));
	CHECK(can == 1);
	CU_OK(cu.cuDeviceCanAccessPeer(&can, 0, 2));
	CHECK(can == 0);
	CU_OK(cu.cuDeviceCanAccessPeer(&can, 1, 1));
	CHECK(can == 0); /* not its own peer */
	CHECK_CU(cu.cuDeviceCanAccessPeer(&can, 0, 4), CUDA_ERROR_INVALID_DEVICE);
}

/* What every call granted, one device per call, adds up per mapping;
 * PROT_NONE takes a device away. */
static void check_granted(unsigned char *p)
{
	CUmemAccessDesc one = access_desc(CU_MEM_LOCATION_TYPE_DEVICE, 1,
					  CU_MEM_ACCESS_FLAGS_PROT_NONE);
	unsigned devices = 0;

	CU_OK(cu.sseg_fake_cuda_granted(p + 100, &devices, NULL));
	CHECK(devices == 0x3);
	CU_OK(cu.cuMemSetAccess(va_of(p), GRAN, &one, 1));
	CU_OK(cu.sseg_fake_cuda_granted(p, &devices, NULL));
	CHECK(devices == 0x1);
	one.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
	CU_OK(cu.cuMemSetAccess(va_of(p), GRAN, &one, 1));
	CU_OK(cu.sseg_fake_cuda_granted(p, &devices, NULL));
	CHECK(devices == 0x3 && cu.sseg_fake_cuda_access(0) == 0); /* the last call's alone */
	CHECK(cu.sseg_fake_cuda_granted(p + GRAN, &devices, NULL) == -ENOENT);
}

static void check_peer_access(unsigned char *p)
{
	CUmemAccessDesc mixed[2] = {
		access_desc(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
		access_desc(CU_MEM_LOCATION_TYPE_DEVICE, 2, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
	};

	CHECK_CU(cu.cuMemSetAccess(va_of(p), GRAN, mixed, 2), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	CHECK(touch(p) == SEGV_EXIT); /* the host entry was not applied either */
	mixed[1].flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
	CU_OK(cu.cuMemSetAccess(va_of(p), GRAN, mixed, 2));
	CHECK(touch(p) == 0);
	set_access(va_of(p), GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 2);
	CHECK_CU(try_access(va_of(p), GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 3),
		 CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	check_granted(p);
}

/* The same process imports its own fd on another device's context. */
static void check_peer_import(CUmemGenericAllocationHandle handle)
{
	CUmemGenericAllocationHandle imported;
	int fd;

	CU_OK(cu.cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
					      0));
	enter_device(2);
	CHECK_CU(cu.cuMemImportFromShareableHandle(&imported, (void *)(uintptr_t)fd,
						   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
		 CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	leave_device(2);
	enter_device(1);
	CU_OK(cu.cuMemImportFromShareableHandle(&imported, (void *)(uintptr_t)fd,
						CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	CU_OK(cu.cuMemRelease(imported));
	leave_device(1);
	enter_device(0);
	CU_OK(cu.cuDevicePrimaryCtxRelease(0)); /* the second retain */
	close(fd);
}

static int case_peer(void *arg)
{
	CUmemGenericAllocationHandle handle;
	unsigned char *p;
	int can = -1;

	start("devices=4;peer=0-1,2-3", NULL);
	check_peer_matrix();
	handle = create(GRAN, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	p = map_new(handle, GRAN);
	check_peer_access(p);
	check_peer_import(handle);
	unmap_free(p, GRAN);
	CU_OK(cu.cuMemRelease(handle));
	CU_OK(cu.sseg_fake_cuda_configure("peer=all;nopeer=0-1"));
	CU_OK(cu.cuDeviceCanAccessPeer(&can, 1, 0));
	CHECK(can == 0);
	CU_OK(cu.cuDeviceCanAccessPeer(&can, 0, 3));
	CHECK(can == 1);
	finish();
	return 0;
}

/* Rule: cuMemMap's offset "currently must be zero". */
static int case_map_offset(void *arg)
{
	CUmemGenericAllocationHandle handle;
	CUdeviceptr va;

	start("", NULL);
	handle = create(2 * GRAN, 0);
	CU_OK(cu.cuMemAddressReserve(&va, GRAN, 0, 0, 0));
	CHECK_CU(cu.cuMemMap(va, GRAN, GRAN, handle, 0), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.sseg_fake_cuda_configure("map_offset=1"));
	CU_OK(cu.cuMemMap(va, GRAN, GRAN, handle, 0));
	CU_OK(cu.cuMemUnmap(va, GRAN));
	CU_OK(cu.cuMemAddressFree(va, GRAN));
	CU_OK(cu.cuMemRelease(handle));
	finish();
	return 0;
}

/* Rules on access locations: a HOST_NUMA entry's node "is ignored", and a
 * HOST_NUMA entry for an allocation made on a device is refused. */
static int case_access_locations(void *arg)
{
	CUmemAllocationProp prop = host_prop(0, 0);
	CUmemAccessDesc host = access_desc(CU_MEM_LOCATION_TYPE_HOST_NUMA, 77,
					   CU_MEM_ACCESS_FLAGS_PROT_READ);
	CUmemGenericAllocationHandle handle = 0;
	unsigned char *p;

	start("numa=0", NULL);
	handle = create(GRAN, 0);
	p = map_new(handle, GRAN);
	CU_OK(cu.cuMemSetAccess(va_of(p), GRAN, &host, 1));
	CHECK(touch(p) == 0);
	unmap_free(p, GRAN);
	CU_OK(cu.cuMemRelease(handle));
	prop.location = (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, 0 };
	CU_OK(cu.cuMemCreate(&handle, GRAN, &prop, 0));
	p = map_new(handle, GRAN);
	CHECK_CU(cu.cuMemSetAccess(va_of(p), GRAN, &host, 1), CUDA_ERROR_INVALID_VALUE);
	host = access_desc(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	CU_OK(cu.cuMemSetAccess(va_of(p), GRAN, &host, 1));
	unmap_free(p, GRAN);
	CU_OK(cu.cuMemRelease(handle));
	finish();
	return 0;
}

/* Rule: where seccomp refuses get_mempolicy, HOST_NUMA allocations fail
 * (CUDA_ERROR_OPERATING_SYSTEM); device memory and queries do not. */
static int case_host_numa_blocked(void *arg)
{
	CUmemAllocationProp prop = host_prop(0, 0);
	CUmemGenericAllocationHandle handle;
	size_t gran = 0;

	start("host_numa_blocked=1", NULL);
	CU_OK(cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CHECK_CU(cu.cuMemCreate(&handle, gran, &prop, 0), CUDA_ERROR_OPERATING_SYSTEM);
	prop.location = (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, 0 };
	CU_OK(cu.cuMemCreate(&handle, gran, &prop, 0));
	CU_OK(cu.cuMemRelease(handle));
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

/* host_pointer=0 (attribute 91): each registration where the device puts
 * it; within one, offsets hold; two side by side are not side by side. */
static void check_device_view(unsigned char *p)
{
	CUdeviceptr first = 0, inside = 0, second = 0;
	int value = -1;

	CU_OK(cu.sseg_fake_cuda_configure("host_pointer=0"));
	CU_OK(cu.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
				      0));
	CHECK(value == 0);
	CU_OK(cu.cuMemHostGetDevicePointer(&first, p, 0));
	CU_OK(cu.cuMemHostGetDevicePointer(&inside, p + 12345, 0));
	CU_OK(cu.cuMemHostGetDevicePointer(&second, p + 4 * MiB, 0));
	CHECK(first != va_of(p) && inside == first + 12345 && second != first + 4 * MiB);
	CU_OK(cu.sseg_fake_cuda_configure("host_pointer=1"));
}

/* With unified addressing a registration without DEVICEMAP has a device
 * pointer too; uva=0 demands the flag. */
static void check_device_pointers(unsigned char *p)
{
	CUdeviceptr dptr = 0;

	CU_OK(cu.cuMemHostGetDevicePointer(&dptr, p + 12345, 0));
	CHECK(dptr == va_of(p + 12345));
	CU_OK(cu.cuMemHostGetDevicePointer(&dptr, p + 5 * MiB, 0));
	CHECK(dptr == va_of(p + 5 * MiB));
	CU_OK(cu.sseg_fake_cuda_configure("uva=0"));
	CHECK_CU(cu.cuMemHostGetDevicePointer(&dptr, p + 5 * MiB, 0), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.sseg_fake_cuda_configure("uva=1"));
	CHECK_CU(cu.cuMemHostGetDevicePointer(&dptr, p + 9 * MiB, 0), CUDA_ERROR_INVALID_VALUE);
	check_device_view(p);
}

/* Rule: memory the CPU may only read is registered with READ_ONLY, unless
 * the device reads through the host's page tables (attribute 100). */
static void check_read_only_mapping(unsigned char *p)
{
	int value = -1;

	CHECK(mprotect(p, 2 * MiB, PROT_READ) == 0);
	CHECK_CU(cu.cuMemHostRegister(p, 2 * MiB, CU_MEMHOSTREGISTER_PORTABLE),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cu.cuMemHostRegister(p + MiB, 2 * MiB, 0), CUDA_ERROR_INVALID_VALUE); /* half */
	CU_OK(cu.cuMemHostRegister(p, 2 * MiB, CU_MEMHOSTREGISTER_READ_ONLY));
	CU_OK(cu.cuMemHostUnregister(p));
	CU_OK(cu.sseg_fake_cuda_configure("pageable_host_pt=1"));
	CU_OK(cu.cuDeviceGetAttribute(&value,
				      CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0));
	CHECK(value == 1);
	CU_OK(cu.cuMemHostRegister(p, 2 * MiB, CU_MEMHOSTREGISTER_PORTABLE));
	CU_OK(cu.cuMemHostUnregister(p));
	CU_OK(cu.sseg_fake_cuda_configure("pageable_host_pt=0"));
	CHECK(mprotect(p, 2 * MiB, PROT_READ | PROT_WRITE) == 0);
}

/* Rules: READ_ONLY needs attribute 113 (NOT_SUPPORTED, as documented), no
 * registration where attribute 99 is 0, and register_aligned=1 (a sandbox
 * passing the address through) refuses one inside a page. */
static void check_register_rules(unsigned char *p)
{
	CU_OK(cu.sseg_fake_cuda_configure("ro_register=0"));
	CHECK_CU(cu.cuMemHostRegister(p, MiB, CU_MEMHOSTREGISTER_READ_ONLY),
		 CUDA_ERROR_NOT_SUPPORTED);
	CU_OK(cu.cuMemHostRegister(p, MiB, 0));
	CU_OK(cu.cuMemHostUnregister(p));
	CU_OK(cu.sseg_fake_cuda_configure("ro_register=1;host_register=0"));
	CHECK_CU(cu.cuMemHostRegister(p, MiB, 0), CUDA_ERROR_NOT_SUPPORTED);
	CU_OK(cu.sseg_fake_cuda_configure("host_register=1;register_aligned=1"));
	CHECK_CU(cu.cuMemHostRegister(p + 100, MiB, 0), CUDA_ERROR_NOT_SUPPORTED);
	CU_OK(cu.cuMemHostRegister(p, MiB, CU_MEMHOSTREGISTER_READ_ONLY));
	CU_OK(cu.cuMemHostUnregister(p));
	CU_OK(cu.sseg_fake_cuda_configure("register_aligned=0"));
	CU_OK(cu.cuMemHostRegister(p + 100, MiB, 0));
	CU_OK(cu.cuMemHostUnregister(p + 100));
	check_read_only_mapping(p);
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

	CHECK(p != MAP_FAILED);
	load("", NULL);
	CU_OK(cu.cuInit(0));
	CHECK_CU(cu.cuMemHostRegister(p, MiB, 0), CUDA_ERROR_INVALID_CONTEXT);
	enter_device(0);
	check_chunks(p);
	check_device_pointers(p);
	CHECK_CU(cu.cuMemHostUnregister(p + MiB), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CHECK(cu.sseg_fake_cuda_bugs() == 1);
	CU_OK(cu.cuMemHostUnregister(p));
	CU_OK(cu.cuMemHostUnregister(p + 4 * MiB));
	check_register_rules(p);
	check_limits(p, size);
	CU_OK(cu.cuDevicePrimaryCtxRelease(0));
	CHECK_CU(cu.cuMemHostRegister(p, MiB, 0), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_CU(cu.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
	CHECK(cu.sseg_fake_cuda_bugs() == 2);
	cu.sseg_fake_cuda_reset();
	check_back_to((struct live){ 0 });
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
	run("attributes", case_attributes);
	run("uuid", case_uuid);
	run("posix_fd", case_posix_fd);
	run("fabric", case_fabric);
	run("imex", case_imex);
	run("context", case_context);
	run("peer", case_peer);
	run("map_offset", case_map_offset);
	run("access_locations", case_access_locations);
	run("host_numa_blocked", case_host_numa_blocked);
	run("fork", case_fork);
	run("scripted", case_scripted);
	run("bugs", case_bugs);
	run("host_register", case_host_register);
	run("copies", case_copies);
	run("threads", case_threads);
	return 0;
}
