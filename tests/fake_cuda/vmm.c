/* SPDX-License-Identifier: Apache-2.0 */
/* test_fake_cuda: the rules of the VMM calls (context, peer access, map offset, locations). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "fake_cuda/cases.h"
#include "fake_cuda/harness.h"

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

int case_context(void *arg)
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

/* Rule: an importer, or a device granted access to device memory, needs
 * peer access to the allocation's device (the creating context's, for
 * host memory); access to host memory needs none; a list with one refused
 * entry applies none. */
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
	CHECK(devices == 0xf);
	CU_OK(cu.cuMemSetAccess(va_of(p), GRAN, &one, 1));
	CU_OK(cu.sseg_fake_cuda_granted(p, &devices, NULL));
	CHECK(devices == 0xd);
	one.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
	CU_OK(cu.cuMemSetAccess(va_of(p), GRAN, &one, 1));
	CU_OK(cu.sseg_fake_cuda_granted(p, &devices, NULL));
	CHECK(devices == 0xf && cu.sseg_fake_cuda_access(0) == 0); /* the last call's alone */
	CHECK(cu.sseg_fake_cuda_granted(p + GRAN, &devices, NULL) == -ENOENT);
}

/* Host memory: devices 2 and 3, without peer access to 0, are granted; a
 * device without VMM (novmm=) is not, and its refusal takes the host entry
 * of the same list with it. */
static void check_peer_access(unsigned char *p)
{
	CUmemAccessDesc mixed[2] = {
		access_desc(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
		access_desc(CU_MEM_LOCATION_TYPE_DEVICE, 2, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
	};
	int vmm = -1;

	CU_OK(cu.sseg_fake_cuda_configure("novmm=2"));
	CU_OK(cu.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
				      2));
	CHECK(vmm == 0);
	CU_OK(cu.cuDeviceGetAttribute(
		&vmm, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 2));
	CHECK(vmm == 0);
	CU_OK(cu.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
				      3));
	CHECK(vmm == 1);
	CHECK_CU(cu.cuMemSetAccess(va_of(p), GRAN, mixed, 2), CUDA_ERROR_NOT_SUPPORTED);
	CHECK(touch(p) == SEGV_EXIT); /* the host entry was not applied either */
	mixed[1].flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
	CU_OK(cu.cuMemSetAccess(va_of(p), GRAN, mixed, 2));
	CHECK(touch(p) == 0);
	CU_OK(cu.sseg_fake_cuda_configure("novmm=none"));
	set_access(va_of(p), GRAN, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 4);
	check_granted(p);
}

/* Device memory on device 0: device 1 (a peer) is granted, device 2 is
 * refused with 217. */
static void check_device_memory_peers(void)
{
	CUmemAllocationProp prop = host_prop(0, 0);
	CUmemGenericAllocationHandle handle;
	unsigned char *p;

	prop.location = (CUmemLocation){ .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
	CU_OK(cu.cuMemCreate(&handle, GRAN, &prop, 0));
	p = map_new(handle, GRAN);
	CU_OK(cu.cuMemSetAccess(va_of(p), GRAN,
				&(CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, 1 },
						    CU_MEM_ACCESS_FLAGS_PROT_READWRITE },
				1));
	CHECK_CU(cu.cuMemSetAccess(va_of(p), GRAN,
				   &(CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, 2 },
						       CU_MEM_ACCESS_FLAGS_PROT_READWRITE },
				   1),
		 CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	unmap_free(p, GRAN);
	CU_OK(cu.cuMemRelease(handle));
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

int case_peer(void *arg)
{
	CUmemGenericAllocationHandle handle;
	unsigned char *p;
	int can = -1;

	start("devices=4;peer=0-1,2-3", NULL);
	check_peer_matrix();
	handle = create(GRAN, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	p = map_new(handle, GRAN);
	check_peer_access(p);
	check_device_memory_peers();
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
int case_map_offset(void *arg)
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
int case_access_locations(void *arg)
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
int case_host_numa_blocked(void *arg)
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
