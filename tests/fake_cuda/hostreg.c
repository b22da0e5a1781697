/* SPDX-License-Identifier: Apache-2.0 */
/* test_fake_cuda: host registration. */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "fake_cuda/cases.h"
#include "fake_cuda/harness.h"

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

int case_host_register(void *arg)
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
