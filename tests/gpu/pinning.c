/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check pinning: what pinning SIZE bytes costs, per GiB. What the
 * driver or the sandbox refuses is a "refused" line, not a failure. Registration
 * (cuMemHostRegister of a populated memfd mapping) is what every rank of
 * vLLM's or SGLang's shared region pays, and sharedseg's registration path;
 * a VMM host allocation (cuMemCreate on the host node, exported as a POSIX
 * fd, imported in a second process, mapped with access granted) is what
 * sharedseg's VMM backend pays: the create once for the group, the import
 * and the map in each peer. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "driver.h"
#include "importer.h"
#include "lines.h"
#include "pinning.h"

#define GiB (1ull << 30)

static void refused(const char *mechanism, unsigned long long size, const char *what,
		    const char *error)
{
	struct json j;

	j_begin(&j, "pinning");
	j_str(&j, "mechanism", mechanism);
	j_int(&j, "size", (long long)size);
	j_str(&j, "what", what);
	j_str(&j, "result", "refused");
	j_str(&j, "error", error);
	j_end(&j);
}

static void timed(const char *mechanism, unsigned long long size, const char *const *names,
		  const double *seconds, int n, double pin)
{
	struct json j;

	j_begin(&j, "pinning");
	j_str(&j, "mechanism", mechanism);
	j_int(&j, "size", (long long)size);
	j_str(&j, "result", "pass");
	for (int i = 0; i < n; i++)
		j_num(&j, names[i], seconds[i]);
	j_num(&j, "pin_s", pin);
	j_num(&j, "pin_s_per_gib", pin / ((double)size / GiB));
	j_end(&j);
}

/* A memfd mapping of size bytes, populated on 4 KiB pages (untimed by the
 * registration: vLLM's and SGLang's regions are populated first too). */
static unsigned char *populated(unsigned long long size, double *seconds, int *err)
{
	int fd = memfd_create("gpu-check-pinning", MFD_CLOEXEC);
	void *p = MAP_FAILED;
	double t0 = now();

	*err = fd < 0 || ftruncate(fd, (off_t)size) ? errno : 0;
	if (!*err)
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (!*err && p == MAP_FAILED)
		*err = errno;
	if (fd >= 0)
		close(fd);
	*seconds = now() - t0;
	return p == MAP_FAILED ? NULL : p;
}

static int pin_register(unsigned long long size)
{
	static const char *const names[] = { "populate_s", "register_s", "unregister_s" };
	double s[3];
	int err;
	unsigned char *p = populated(size, &s[0], &err);
	CUresult r;

	if (!p) {
		refused("cuMemHostRegister", size, "memfd mapping", errno_name(err));
		return 0;
	}
	s[1] = now();
	r = cu.cuMemHostRegister(p, size, CU_MEMHOSTREGISTER_PORTABLE |
					    CU_MEMHOSTREGISTER_DEVICEMAP);
	s[1] = now() - s[1];
	s[2] = now();
	if (r == CUDA_SUCCESS)
		cu.cuMemHostUnregister(p);
	s[2] = now() - s[2];
	munmap(p, size);
	if (r != CUDA_SUCCESS) {
		refused("cuMemHostRegister", size, "cuMemHostRegister", cu_name(r));
		return 0;
	}
	timed("cuMemHostRegister", size, names, s, 3, s[1]);
	return 0;
}

struct vmm_host {
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle handle;
	CUdeviceptr va;
	int fd;
	int mapped;
	const char *failed; /* the call that failed */
};

/* Reserves, maps and grants the host and device 0 access, as a peer does. */
static CUresult map_with_access(struct vmm_host *v, size_t size)
{
	CUmemAccessDesc desc[2] = {
		{ { CU_MEM_LOCATION_TYPE_HOST_NUMA, v->prop.location.id },
		  CU_MEM_ACCESS_FLAGS_PROT_READWRITE },
		{ { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE },
	};
	CUresult r;

	v->failed = "cuMemAddressReserve";
	r = cu.cuMemAddressReserve(&v->va, size, 0, 0, 0);
	if (r != CUDA_SUCCESS)
		return r;
	v->failed = "cuMemMap";
	r = cu.cuMemMap(v->va, size, 0, v->handle, 0);
	if (r != CUDA_SUCCESS)
		return r;
	v->mapped = 1;
	v->failed = "cuMemSetAccess(host node + device 0)";
	return cu.cuMemSetAccess(v->va, size, desc, 2);
}

/* create, export, import in the helper, map: the seconds of each. */
static CUresult vmm_steps(struct vmm_host *v, size_t size, int helper, double *s)
{
	double t = now();
	CUresult r = cu.cuMemCreate(&v->handle, size, &v->prop, 0);

	v->failed = "cuMemCreate(HOST_NUMA)";
	s[0] = now() - t;
	if (r != CUDA_SUCCESS)
		return r;
	t = now();
	v->failed = "cuMemExportToShareableHandle(POSIX fd)";
	r = cu.cuMemExportToShareableHandle(&v->fd, v->handle,
					    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	s[1] = now() - t;
	if (r != CUDA_SUCCESS)
		return r;
	t = now();
	v->failed = "cuMemImportFromShareableHandle in a second process";
	r = other_process_imports(helper, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0, &v->fd);
	s[2] = now() - t;
	if (r != CUDA_SUCCESS)
		return r;
	t = now();
	r = map_with_access(v, size);
	s[3] = now() - t;
	return r;
}

static void vmm_release(struct vmm_host *v, size_t size)
{
	if (v->mapped)
		cu.cuMemUnmap(v->va, size);
	if (v->va)
		cu.cuMemAddressFree(v->va, size);
	if (v->fd >= 0)
		close(v->fd);
	if (v->handle)
		cu.cuMemRelease(v->handle);
	*v = (struct vmm_host){ .prop = v->prop, .fd = -1 };
}

static int pin_vmm(unsigned long long size, size_t gran, int helper, struct vmm_host *v)
{
	static const char *const names[] = { "create_s", "export_s", "import_s", "map_s" };
	size_t rounded = (size + gran - 1) / gran * gran;
	double s[4] = { 0 };
	CUresult r = vmm_steps(v, rounded, helper, s);

	vmm_release(v, rounded);
	if (r != CUDA_SUCCESS) {
		refused("cuMemCreate+export+import", size, v->failed, cu_name(r));
		return 0;
	}
	timed("cuMemCreate+export+import", size, names, s, 4, s[0] + s[1] + s[2]);
	return 0;
}

/* The helper loads the driver on its first import: one granule first, so
 * its cuInit is not counted in the first size. */
static void warm_helper(size_t gran, int helper, struct vmm_host *v)
{
	double s[4];

	vmm_steps(v, gran, helper, s);
	vmm_release(v, gran);
}

int pinning_main(const unsigned long long *sizes, int n)
{
	pid_t helper_pid = -1;
	int helper = helper_start(&helper_pid), failures = 0; /* before the driver loads */
	struct vmm_host v = { .fd = -1,
			      .prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
					.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
					.location = { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 } } };
	size_t gran = 2 * MiB;

	if (driver_or_report("pinning")) {
		failures = 1;
		goto out;
	}
	v.prop.location.id = host_node();
	if (!cu.cuMemCreate ||
	    cu.cuMemGetAllocationGranularity(&gran, &v.prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM))
		gran = 2 * MiB;
	if (cu.cuMemCreate)
		warm_helper(gran, helper, &v);
	for (int i = 0; i < n; i++) {
		failures += pin_register(sizes[i]);
		if (cu.cuMemCreate)
			failures += pin_vmm(sizes[i], gran, helper, &v);
		else
			refused("cuMemCreate+export+import", sizes[i], "cuMemCreate",
				"the driver has no VMM entry points");
	}
out:
	if (helper >= 0)
		close(helper);
	if (helper_pid > 0)
		waitpid(helper_pid, NULL, 0);
	return failures ? 1 : 0;
}
