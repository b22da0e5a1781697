/* SPDX-License-Identifier: Apache-2.0 */
/* test_fake_cuda's harness: loads the fake, resolves its entry points and
 * control API, and the helpers the cases share. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda/harness.h"

struct fake_cuda cu;

static const char *fake_path(void)
{
	static char path[4096];
	const char *dir = getenv("SSEG_BUILD_DIR");

	snprintf(path, sizeof(path), "%s/libsseg_fake_cuda.so", dir ? dir : ".");
	return path;
}

void *resolve_at(const char *name, int version)
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
void load(const char *config, const char *failures)
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
void enter_device(int dev)
{
	CUcontext ctx = NULL;

	CU_OK(cu.cuDevicePrimaryCtxRetain(&ctx, dev));
	CU_OK(cu.cuCtxSetCurrent(ctx));
}

void leave_device(int dev)
{
	CU_OK(cu.cuCtxSetCurrent(NULL));
	CU_OK(cu.cuDevicePrimaryCtxRelease(dev));
}

/* Loaded, initialized, and device 0's context current: what VMM calls need. */
void start(const char *config, const char *failures)
{
	load(config, failures);
	CU_OK(cu.cuInit(0));
	enter_device(0);
}

CUmemAllocationProp host_prop(int node, unsigned handle_types)
{
	CUmemAllocationProp prop;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop.location.id = node;
	prop.requestedHandleTypes = handle_types;
	return prop;
}

CUmemGenericAllocationHandle create(size_t size, unsigned handle_types)
{
	CUmemAllocationProp prop = host_prop(0, handle_types);
	CUmemGenericAllocationHandle handle = 0;

	CU_OK(cu.cuMemCreate(&handle, size, &prop, 0));
	CHECK(handle != 0);
	return handle;
}

CUmemAccessDesc access_desc(CUmemLocationType type, int id, CUmemAccess_flags flags)
{
	return (CUmemAccessDesc){ .location = { .type = type, .id = id }, .flags = flags };
}

/* Host access and read-write for devices 0..devices-1. */
CUresult try_access(CUdeviceptr va, size_t size, CUmemAccess_flags host, int devices)
{
	CUmemAccessDesc desc[1 + 16];
	size_t n = 0;

	desc[n++] = access_desc(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, host);
	for (int dev = 0; dev < devices; dev++)
		desc[n++] = access_desc(CU_MEM_LOCATION_TYPE_DEVICE, dev,
					CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
	return cu.cuMemSetAccess(va, size, desc, n);
}

void set_access(CUdeviceptr va, size_t size, CUmemAccess_flags host, int devices)
{
	CU_OK(try_access(va, size, host, devices));
}

/* Reserves and maps the whole handle; the CPU may not touch it yet. */
unsigned char *map_new(CUmemGenericAllocationHandle handle, size_t size)
{
	CUdeviceptr va = 0;

	CU_OK(cu.cuMemAddressReserve(&va, size, 0, 0, 0));
	CHECK(va % GRAN == 0);
	CU_OK(cu.cuMemMap(va, size, 0, handle, 0));
	return (unsigned char *)(uintptr_t)va;
}

CUdeviceptr va_of(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

void unmap_free(unsigned char *p, size_t size)
{
	CU_OK(cu.cuMemUnmap(va_of(p), size));
	CU_OK(cu.cuMemAddressFree(va_of(p), size));
}

static struct live live_now(void)
{
	return (struct live){ cu.sseg_fake_cuda_live_handles(), cu.sseg_fake_cuda_live_mappings(),
			      cu.sseg_fake_cuda_live_reservations(),
			      cu.sseg_fake_cuda_live_registrations(),
			      cu.sseg_fake_cuda_live_contexts(), cu.sseg_fake_cuda_bugs() };
}

void check_back_to(struct live before)
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
void check_clean(void)
{
	check_back_to((struct live){ .contexts = 1 });
}

void finish(void)
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
int touch(unsigned char *p)
{
	return tu_wait(tu_fork(touch_child, p), 10000);
}

void fill(unsigned char *p, size_t size, int rank)
{
	for (size_t off = 0; off < size; off += 4093)
		p[off] = tu_pattern(rank, off);
}

int holds(const unsigned char *p, size_t size, int rank)
{
	for (size_t off = 0; off < size; off += 4093)
		if (p[off] != tu_pattern(rank, off))
			return 0;
	return 1;
}
