/* SPDX-License-Identifier: Apache-2.0 */
/* What the driver refuses, next to what the fake driver answers. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "driver.h"
#include "importer.h"
#include "lines.h"
#include "rules.h"

static void rule_line(const char *rule, const char *call, CUresult got, CUresult fake)
{
	struct json j;

	j_begin(&j, "rule");
	j_str(&j, "rule", rule);
	j_str(&j, "call", call);
	j_str(&j, "result", cu_name(got));
	j_str(&j, "fake", cu_name(fake));
	j_bool(&j, "matches_fake", got == fake);
	j_end(&j);
}

/* The VMM calls with no current context (the fake: INVALID_CONTEXT). */
static void rules_without_context(const CUmemAllocationProp *prop, size_t gran)
{
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr va = 0;
	size_t g = 0;
	CUresult rg, rc, rr;

	cu.cuCtxSetCurrent(NULL);
	rg = cu.cuMemGetAllocationGranularity(&g, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	rc = cu.cuMemCreate(&h, gran, prop, 0);
	rr = cu.cuMemAddressReserve(&va, gran, 0, 0, 0);
	enter_device(0);
	if (rc == CUDA_SUCCESS)
		cu.cuMemRelease(h);
	if (rr == CUDA_SUCCESS)
		cu.cuMemAddressFree(va, gran);
	rule_line("vmm_needs_context", "cuMemGetAllocationGranularity", rg,
		  CUDA_ERROR_INVALID_CONTEXT);
	rule_line("vmm_needs_context", "cuMemCreate", rc, CUDA_ERROR_INVALID_CONTEXT);
	rule_line("vmm_needs_context", "cuMemAddressReserve", rr, CUDA_ERROR_INVALID_CONTEXT);
}

/* One HOST_NUMA allocation of 2 granules, reserved and mapped at va. */
struct vmm {
	CUmemAllocationProp prop;
	size_t gran;
	CUmemGenericAllocationHandle handle;
	CUdeviceptr va;
	int mapped;
};

static CUresult access_every_device(const struct vmm *m, int host_node)
{
	CUmemAccessDesc desc[1 + 64];
	size_t n = 0;

	desc[n++] = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_HOST_NUMA, host_node },
				       CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	for (int d = 0; d < cu.devices && n < 65; d++)
		desc[n++] = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, d },
					       CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	return cu.cuMemSetAccess(m->va, 2 * m->gran, desc, n);
}

static CUresult access_one(const struct vmm *m, CUmemLocationType type, int id)
{
	CUmemAccessDesc desc = { { type, id }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };

	return cu.cuMemSetAccess(m->va, 2 * m->gran, &desc, 1);
}

/* As the library grants: the host, the own device, then each other device
 * alone; the fake grants host memory to a device without peer access to
 * the creating context's device (0) as well: the docs tie no peer rule to
 * it, and the 217 of the field reports came from the import. */
static void rules_access_one_by_one(const struct vmm *m)
{
	char call[64];
	int can;

	rule_line("access_host_alone", "cuMemSetAccess(HOST_NUMA)",
		  access_one(m, CU_MEM_LOCATION_TYPE_HOST_NUMA, m->prop.location.id), CUDA_SUCCESS);
	rule_line("access_own_device_alone", "cuMemSetAccess(device 0)",
		  access_one(m, CU_MEM_LOCATION_TYPE_DEVICE, 0), CUDA_SUCCESS);
	for (int d = 1; d < cu.devices; d++) {
		can = 0;
		cu.cuDeviceCanAccessPeer(&can, d, 0);
		snprintf(call, sizeof(call), "cuMemSetAccess(device %d alone)", d);
		rule_line(can ? "access_peer_device" : "access_no_peer_device", call,
			  access_one(m, CU_MEM_LOCATION_TYPE_DEVICE, d), CUDA_SUCCESS);
	}
}

static void rules_mapping(struct vmm *m)
{
	CUresult r;

	r = cu.cuMemMap(m->va, m->gran, m->gran, m->handle, 0);
	rule_line("map_offset_zero", "cuMemMap(offset=granularity)", r, CUDA_ERROR_INVALID_VALUE);
	if (r == CUDA_SUCCESS)
		cu.cuMemUnmap(m->va, m->gran);
	m->mapped = cu.cuMemMap(m->va, 2 * m->gran, 0, m->handle, 0) == CUDA_SUCCESS;
	if (!m->mapped)
		return;
	/* "CUmemLocation::id is ignored" for HOST_NUMA access entries; one
	 * call for the host and every device, peers of 0 or not. */
	r = access_every_device(m, 77);
	rule_line("host_numa_access_id_ignored", "cuMemSetAccess(HOST_NUMA id 77 + devices)", r,
		  CUDA_SUCCESS);
	r = access_every_device(m, m->prop.location.id);
	rule_line("access_every_device", "cuMemSetAccess(host + every device)", r, CUDA_SUCCESS);
	rules_access_one_by_one(m);
}

static void rules_import(struct vmm *m, int helper)
{
	int fd = -1, can = 0;
	CUresult r;

	r = cu.cuMemExportToShareableHandle(&fd, m->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
					    0);
	rule_line("posix_fd_export", "cuMemExportToShareableHandle(POSIX fd)", r, CUDA_SUCCESS);
	if (r != CUDA_SUCCESS)
		return;
	r = other_process_imports(helper, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0, &fd);
	rule_line("posix_fd_import", "cuMemImportFromShareableHandle(POSIX fd, device 0)", r,
		  CUDA_SUCCESS);
	if (cu.devices > 1) {
		cu.cuDeviceCanAccessPeer(&can, 1, 0);
		r = other_process_imports(helper, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1, &fd);
		rule_line(can ? "posix_fd_import_peer" : "posix_fd_import_no_peer",
			  "cuMemImportFromShareableHandle(POSIX fd, device 1)", r,
			  can ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	}
	close(fd);
}

static void vmm_release(struct vmm *m)
{
	if (m->mapped)
		cu.cuMemUnmap(m->va, 2 * m->gran);
	if (m->va)
		cu.cuMemAddressFree(m->va, 2 * m->gran);
	if (m->handle)
		cu.cuMemRelease(m->handle);
}

/* HOST_NUMA allocations: created, mapped at offset 0, access, sharing. */
static void rules_host_numa(int helper)
{
	struct vmm m = { .prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				   .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
				   .location = { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 } } };
	CUresult r;

	m.prop.location.id = host_node();
	r = cu.cuMemGetAllocationGranularity(&m.gran, &m.prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (r != CUDA_SUCCESS)
		m.gran = 2 * MiB;
	rules_without_context(&m.prop, m.gran);
	r = cu.cuMemCreate(&m.handle, 2 * m.gran, &m.prop, 0);
	rule_line("host_numa_create", "cuMemCreate(HOST_NUMA)", r, CUDA_SUCCESS);
	if (r != CUDA_SUCCESS)
		return;
	if (cu.cuMemAddressReserve(&m.va, 2 * m.gran, 0, 0, 0) == CUDA_SUCCESS)
		rules_mapping(&m);
	rules_import(&m, helper);
	vmm_release(&m);
}

/* Fabric handles: the fake's model is a channel for create and export,
 * and importing from another process needs the same channel (imex=0). */
/* One granule with a fabric handle type: what the attribute promises. */
static CUresult fabric_create(const CUmemAllocationProp *prop, CUmemGenericAllocationHandle *h,
			      const char *rule, const char *call)
{
	size_t gran = 2 * MiB;
	CUresult r;
	int attr = attribute(0, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, &r);

	attr = r == CUDA_SUCCESS && attr;
	cu.cuMemGetAllocationGranularity(&gran, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	r = cu.cuMemCreate(h, gran, prop, 0);
	rule_line(rule, call, r, attr ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED);
	return r;
}

static void rules_fabric(int helper)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	CUmemGenericAllocationHandle h = 0, imported;
	CUmemFabricHandle fabric;
	CUresult r;

	if (fabric_create(&prop, &h, "fabric_create", "cuMemCreate(FABRIC)") != CUDA_SUCCESS)
		return;
	r = cu.cuMemExportToShareableHandle(&fabric, h, CU_MEM_HANDLE_TYPE_FABRIC, 0);
	rule_line("fabric_export", "cuMemExportToShareableHandle(FABRIC)", r, CUDA_SUCCESS);
	if (r == CUDA_SUCCESS) {
		r = cu.cuMemImportFromShareableHandle(&imported, &fabric, CU_MEM_HANDLE_TYPE_FABRIC);
		rule_line("fabric_import_self", "cuMemImportFromShareableHandle(FABRIC)", r,
			  CUDA_SUCCESS);
		if (r == CUDA_SUCCESS)
			cu.cuMemRelease(imported);
		r = other_process_imports(helper, CU_MEM_HANDLE_TYPE_FABRIC, 0, &fabric);
		rule_line("fabric_import_other_process", "cuMemImportFromShareableHandle(FABRIC)",
			  r, CUDA_ERROR_NOT_PERMITTED);
	}
	cu.cuMemRelease(h);
}

/* The library's fabric probe, as it runs: HOST_NUMA memory with both
 * handle types, exported as fabric and imported again by this process. */
static void rules_fabric_host_numa(void)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC |
							     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
				     .location = { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 } };
	CUmemGenericAllocationHandle h = 0, imported;
	CUmemFabricHandle fabric;
	CUresult r;

	prop.location.id = host_node();
	if (fabric_create(&prop, &h, "fabric_fd_host_numa_create",
			  "cuMemCreate(HOST_NUMA, FABRIC|POSIX_FD)") != CUDA_SUCCESS)
		return;
	r = cu.cuMemExportToShareableHandle(&fabric, h, CU_MEM_HANDLE_TYPE_FABRIC, 0);
	if (r == CUDA_SUCCESS)
		r = cu.cuMemImportFromShareableHandle(&imported, &fabric, CU_MEM_HANDLE_TYPE_FABRIC);
	rule_line("fabric_fd_host_numa_roundtrip", "export + import (FABRIC, HOST_NUMA)", r,
		  CUDA_SUCCESS);
	if (r == CUDA_SUCCESS)
		cu.cuMemRelease(imported);
	cu.cuMemRelease(h);
}

/* A HOST_NUMA access entry for memory created on a device: refused. */
static void rules_device_memory(void)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	CUmemAccessDesc host = { { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 },
				 CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CUmemGenericAllocationHandle h;
	CUdeviceptr va = 0;
	size_t gran = 2 * MiB;
	CUresult r;

	cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (cu.cuMemCreate(&h, gran, &prop, 0) != CUDA_SUCCESS)
		return;
	if (cu.cuMemAddressReserve(&va, gran, 0, 0, 0) == CUDA_SUCCESS &&
	    cu.cuMemMap(va, gran, 0, h, 0) == CUDA_SUCCESS) {
		r = cu.cuMemSetAccess(va, gran, &host, 1);
		rule_line("host_numa_access_device_memory", "cuMemSetAccess(HOST_NUMA)", r,
			  CUDA_ERROR_INVALID_VALUE);
		cu.cuMemUnmap(va, gran);
	}
	if (va)
		cu.cuMemAddressFree(va, gran);
	cu.cuMemRelease(h);
}

/* Host registration: an address inside a page (gVisor's nvproxy and the
 * kernel module's ioctl take page-aligned ones only; the API sets none),
 * READ_ONLY, and a device pointer without DEVICEMAP. */
/* Memory the CPU may only read (a read-only peer's mapping): cuda.h makes
 * READ_ONLY required without attribute 100; the code without it is the
 * fake's guess (INVALID_VALUE). */
static void rules_register_read_only_mapping(void)
{
	unsigned char *p = mmap(NULL, 2 * MiB, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
				-1, 0);
	CUresult r, r100, r113;
	int pageable = attribute(0, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
				 &r100);
	int ro = attribute(0, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, &r113);

	if (p == MAP_FAILED)
		return;
	pageable = r100 == CUDA_SUCCESS && pageable;
	r = cu.cuMemHostRegister(p, 2 * MiB, CU_MEMHOSTREGISTER_PORTABLE);
	rule_line("register_read_only_mapping_plain", "cuMemHostRegister(PROT_READ memory)", r,
		  pageable ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
	if (r == CUDA_SUCCESS)
		cu.cuMemHostUnregister(p);
	r = cu.cuMemHostRegister(p, 2 * MiB, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_READ_ONLY);
	rule_line("register_read_only_mapping_flag", "cuMemHostRegister(PROT_READ, READ_ONLY)", r,
		  r113 == CUDA_SUCCESS && ro ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED);
	if (r == CUDA_SUCCESS)
		cu.cuMemHostUnregister(p);
	munmap(p, 2 * MiB);
}

/* destroy's quiesce: cuCtxSynchronize on the current context, and none. */
static void rules_synchronize(void)
{
	rule_line("ctx_synchronize", "cuCtxSynchronize", cu.cuCtxSynchronize(), CUDA_SUCCESS);
	cu.cuCtxSetCurrent(NULL);
	rule_line("ctx_synchronize_no_context", "cuCtxSynchronize without a context",
		  cu.cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
	enter_device(0);
}

static void rules_register(void)
{
	unsigned char *p = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	CUdeviceptr dptr = 0;
	CUresult r, attr_r;
	int ro = attribute(0, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, &attr_r);

	if (p == MAP_FAILED)
		return;
	r = cu.cuMemHostRegister(p + 100, MiB, CU_MEMHOSTREGISTER_PORTABLE);
	rule_line("register_unaligned", "cuMemHostRegister(page + 100)", r, CUDA_SUCCESS);
	if (r == CUDA_SUCCESS)
		cu.cuMemHostUnregister(p + 100);
	r = cu.cuMemHostRegister(p, MiB, CU_MEMHOSTREGISTER_READ_ONLY);
	rule_line("register_read_only", "cuMemHostRegister(READ_ONLY)", r,
		  attr_r == CUDA_SUCCESS && ro ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED);
	if (r == CUDA_SUCCESS)
		cu.cuMemHostUnregister(p);
	r = cu.cuMemHostRegister(p, MiB, CU_MEMHOSTREGISTER_PORTABLE);
	if (r == CUDA_SUCCESS) {
		r = cu.cuMemHostGetDevicePointer(&dptr, p, 0);
		rule_line(dptr == (CUdeviceptr)(uintptr_t)p ? "device_pointer_without_devicemap"
							    : "device_pointer_differs",
			  "cuMemHostGetDevicePointer(no DEVICEMAP)", r, CUDA_SUCCESS);
		cu.cuMemHostUnregister(p);
	}
	munmap(p, 4 * MiB);
}

static void rules_attributes(void)
{
	CUresult r;

	attribute(0, 9999, &r);
	rule_line("unknown_attribute", "cuDeviceGetAttribute(9999)", r, CUDA_ERROR_INVALID_VALUE);
	attribute(0, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, &r);
	rule_line("attribute_141_needs_12090", "cuDeviceGetAttribute(141)", r,
		  cu.version >= 12090 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* A child forked after cuInit (the fake: NOT_INITIALIZED). */
static void rules_fork(void)
{
	int fds[2], count = 0;
	CUresult r = CUDA_ERROR_UNKNOWN;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		r = cu.cuDeviceGetCount(&count);
		_exit(write(fds[1], &r, sizeof(r)) == sizeof(r) ? 0 : 1);
	}
	close(fds[1]);
	if (pid < 0 || read(fds[0], &r, sizeof(r)) != sizeof(r))
		r = CUDA_ERROR_UNKNOWN;
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	rule_line("fork_child", "cuDeviceGetCount in a forked child", r,
		  CUDA_ERROR_NOT_INITIALIZED);
}

/* Every rule, in the order env has always reported them. */
void rules_check(int helper)
{
	rules_attributes();
	rules_register();
	rules_register_read_only_mapping();
	rules_synchronize();
	if (cu.cuMemCreate) {
		rules_host_numa(helper);
		rules_fabric(helper);
		rules_fabric_host_numa();
		rules_device_memory();
	}
	rules_fork();
}
