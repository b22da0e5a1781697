/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check env: the driver, the devices, what the OS refuses, what the library concludes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "driver.h"
#include "env.h"
#include "importer.h"
#include "lines.h"
#include "rules.h"

static const struct {
	int attrib;
	const char *name;
} attributes[] = {
	{ CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "unified_addressing" },
	{ CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, "host_pointer_for_registered" },
	{ CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, "host_register" },
	{ CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, "pageable_host_page_tables" },
	{ CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "vmm" },
	{ CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, "posix_fd_handles" },
	{ CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, "read_only_host_register" },
	{ CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, "fabric_handles" },
	{ CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, "host_numa_id" },
	{ CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "host_numa_vmm" },
};

static void env_device(int dev)
{
	CUuuid uuid;
	CUresult r = cu.cuDeviceGetUuid ? cu.cuDeviceGetUuid(&uuid, dev) : CUDA_ERROR_NOT_FOUND;
	const unsigned char *u = (const unsigned char *)uuid.bytes;
	char text[48];
	struct json j;

	j_begin(&j, "device");
	j_int(&j, "ordinal", dev);
	snprintf(text, sizeof(text), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
	j_str(&j, "uuid", r == CUDA_SUCCESS ? text : cu_name(r));
	for (size_t i = 0; i < sizeof(attributes) / sizeof(attributes[0]); i++) {
		int value = attribute(dev, attributes[i].attrib, &r);

		if (r == CUDA_SUCCESS)
			j_int(&j, attributes[i].name, value);
		else
			j_str(&j, attributes[i].name, cu_name(r));
	}
	j_end(&j);
}

static void env_peers(void)
{
	struct json j;

	j_begin(&j, "peers");
	j_array_begin(&j, "can_access_peer");
	for (int a = 0; a < cu.devices; a++) {
		j_array_begin(&j, NULL);
		for (int b = 0; b < cu.devices; b++) {
			int can = -1;

			cu.cuDeviceCanAccessPeer(&can, a, b);
			j_int(&j, NULL, can);
		}
		j_array_end(&j);
	}
	j_array_end(&j);
	j_end(&j);
}

/* -- what the OS refuses (seccomp, gVisor, Firecracker kernels) -- */

static void os_line(const char *what, int err, const char *skip_why)
{
	struct json j;

	j_begin(&j, "os");
	j_str(&j, "what", what);
	j_str(&j, "result", skip_why ? "skipped" : err ? "refused" : "ok");
	if (skip_why || err)
		j_str(&j, "error", skip_why ? skip_why : errno_name(err));
	j_end(&j);
}

/* A 2 MiB memfd mapping; flags go to memfd_create. */
static void *memfd_map(unsigned flags, int *fd, int *err)
{
	void *p = MAP_FAILED;

	*fd = memfd_create("gpu-check-probe", MFD_CLOEXEC | flags);
	*err = *fd < 0 || ftruncate(*fd, 2 * MiB) ? errno : 0;
	if (!*err)
		p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (!*err && p == MAP_FAILED)
		*err = errno;
	return p == MAP_FAILED ? NULL : p;
}

static void probe_populate_write(void)
{
	int fd, err;
	void *p = memfd_map(0, &fd, &err);

	if (p && madvise(p, 2 * MiB, MADV_POPULATE_WRITE))
		err = errno;
	os_line("madv_populate_write", err, NULL);
	if (p)
		munmap(p, 2 * MiB);
	if (fd >= 0)
		close(fd);
}

static void probe_seals(const char *what, int seals)
{
	int fd = memfd_create("gpu-check-seal", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int err = fd < 0 || fcntl(fd, F_ADD_SEALS, seals) ? errno : 0;

	os_line(what, err, NULL);
	if (fd >= 0)
		close(fd);
}

/* MFD_HUGETLB itself, then a page: no free page is not a refusal. */
static void probe_hugetlb(void)
{
	int fd = memfd_create("gpu-check-huge", MFD_CLOEXEC | MFD_HUGETLB), err = 0;
	void *p = MAP_FAILED;

	if (fd < 0 || ftruncate(fd, 2 * MiB))
		err = errno;
	else
		p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (fd >= 0 && !err && p == MAP_FAILED && errno == ENOMEM)
		os_line("mfd_hugetlb", 0, "no free 2 MiB HugeTLB page");
	else
		os_line("mfd_hugetlb", err ? err : p == MAP_FAILED ? errno : 0, NULL);
	if (p != MAP_FAILED)
		munmap(p, 2 * MiB);
	if (fd >= 0)
		close(fd);
}

/* Docker's and containerd's seccomp profiles refuse these without
 * CAP_SYS_NICE; the driver's HOST_NUMA allocations are said to need them. */
static void probe_mempolicy(void)
{
	int mode = 0, err;
	void *p;

	err = syscall(SYS_get_mempolicy, &mode, NULL, 0, NULL, 0) ? errno : 0;
	os_line("get_mempolicy", err, NULL);
	p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	err = p == MAP_FAILED || syscall(SYS_mbind, p, 2 * MiB, 0 /* MPOL_DEFAULT */, NULL, 0, 0)
		      ? errno : 0;
	os_line("mbind", err, NULL);
	if (p != MAP_FAILED)
		munmap(p, 2 * MiB);
}

static void env_os(void)
{
	probe_populate_write();
	probe_seals("memfd_seals", F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	probe_seals("memfd_seal_future_write", F_SEAL_FUTURE_WRITE);
	probe_hugetlb();
	probe_mempolicy();
}

/* What the library itself concludes from its real probes (a create under
 * the primary context per device and node) and sseg_check_support. */
static void library_probe(void)
{
	int rc = sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO);
	char why[512];
	struct json j;

	snprintf(why, sizeof(why), "%s", rc ? sseg_last_error() : "available");
	for (int d = 0; d < cu.devices; d++) {
		struct sseg_probe_device g = { .sz = sizeof(g) };

		j_begin(&j, "library_probe");
		j_int(&j, "ordinal", d);
		if (sseg_probe_device(SSEG_BACKEND_CUDA, d, &g)) {
			j_str(&j, "error", sseg_last_error());
		} else {
			j_str(&j, "uuid", g.uuid);
			j_int(&j, "host_vmm", g.host_vmm);
			j_int(&j, "host_vmm_works", g.host_vmm_works);
			j_int(&j, "fabric_claimed", g.fabric_claimed);
			j_int(&j, "fabric_works", g.fabric_works);
			j_int(&j, "host_register", g.host_register);
			j_int(&j, "host_register_readonly", g.host_register_readonly);
		}
		j_str(&j, "supported", why);
		j_end(&j);
	}
}

int env_main(void)
{
	pid_t helper_pid = -1;
	int helper = helper_start(&helper_pid); /* before the driver is loaded here */
	struct json j;

	env_os();
	if (driver_or_report("driver")) {
		if (helper >= 0)
			close(helper);
		return 1;
	}
	j_begin(&j, "driver");
	j_str(&j, "result", "pass");
	j_str(&j, "library", cu.path);
	j_int(&j, "driver_version", cu.version);
	j_int(&j, "devices", cu.devices);
	j_end(&j);
	for (int d = 0; d < cu.devices; d++)
		env_device(d);
	env_peers();
	rules_check(helper);
	library_probe();
	close(helper);
	if (helper_pid > 0)
		waitpid(helper_pid, NULL, 0);
	return 0;
}
