/* SPDX-License-Identifier: Apache-2.0 */
/* Devices, placement, access and the real probes of the ascend backend. */
#define _GNU_SOURCE /* syscall */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "backend/ascend_device.h"
#include "object.h"
#include "os/numa.h"
#include "registry.h"

static int device_count(const struct sseg_acl *acl, uint32_t *count)
{
	*count = 0;
	return sseg_acl_result(acl->aclrtGetDeviceCount(count), "aclrtGetDeviceCount");
}

int sseg_ascend_usable(char *why, size_t len, int *ndevices)
{
	const struct sseg_acl *acl;
	uint32_t count = 0;
	int rc = sseg_acl_get(&acl);

	if (!rc && !acl->vmm)
		rc = sseg_err(-EOPNOTSUPP, "the ACL runtime %s lacks the virtual memory entry points "
			      "(aclrtMallocPhysical, aclrtMemExportToShareableHandle, ...)",
			      acl->path);
	if (!rc)
		rc = device_count(acl, &count);
	if (!rc && count == 0)
		rc = sseg_err(-ENODEV, "the ACL runtime sees no device");
	*ndevices = (int)count;
	if (rc) {
		snprintf(why, len, "not available: %s", sseg_last_error());
		return rc;
	}
	snprintf(why, len, "available: %u device(s), ACL runtime %d.%d.%d", count,
		 acl->version / 1000000, acl->version / 1000 % 1000, acl->version % 1000);
	return 0;
}

int sseg_ascend_device_open(const struct sseg_acl *acl, int ordinal, aclrtContext *ctx)
{
	aclrtContext saved = NULL;
	uint32_t count;
	int rc = device_count(acl, &count);

	if (rc)
		return rc;
	if (ordinal < 0 || (uint32_t)ordinal >= count)
		return sseg_err(-ENODEV, "device=%d, but the ACL runtime sees %u device(s)", ordinal,
				count);
	if (acl->aclrtGetCurrentContext(&saved) != ACL_SUCCESS)
		saved = NULL; /* this thread has no context yet */
	rc = sseg_acl_result(acl->aclrtSetDevice(ordinal), "aclrtSetDevice");
	if (rc)
		return rc;
	rc = sseg_acl_result(acl->aclrtGetCurrentContext(ctx), "aclrtGetCurrentContext");
	sseg_acl_leave(acl, saved);
	if (rc)
		acl->aclrtResetDevice(ordinal); /* the reference just taken; the error is rc's */
	return rc;
}

int sseg_ascend_device_close(const struct sseg_acl *acl, int ordinal)
{
	return sseg_acl_result(acl->aclrtResetDevice(ordinal), "aclrtResetDevice");
}

static int current_node(void)
{
	unsigned cpu = 0, node = 0;

	if (syscall(SYS_getcpu, &cpu, &node, NULL) != 0)
		return 0;
	return (int)node;
}

int sseg_ascend_placement(struct sseg *seg, int *node)
{
	uint64_t nodes = 0;

	switch (seg->opts.numa) {
	case SSEG_NUMA_NODE:
		*node = seg->opts.numa_node;
		break;
	case SSEG_NUMA_NONE:
		/* Where the owner runs, as first touch would place it. */
		*node = current_node();
		seg->opts.numa_node = *node;
		break;
	default:
		return sseg_err(-EOPNOTSUPP, "numa=%s is not available with the ascend backend",
				sseg_numa_name(seg->opts.numa));
	}
	sseg_os_numa_nodes(&nodes);
	if (*node < 0 || *node > 63 || !(nodes & (1ull << *node)))
		return sseg_err(-EINVAL, "numa node %d has no memory on this host", *node);
	return 0;
}

/* acl_rt.h marks ACL_MEM_LOCATION_TYPE_HOST "reserved, not supported" where
 * the struct reference describes it for allocations: HOST_NUMA with an
 * explicit node is the reading both agree on. */
void sseg_ascend_prop(aclrtPhysicalMemProp *prop, bool huge, int node)
{
	memset(prop, 0, sizeof(*prop));
	prop->handleType = ACL_MEM_HANDLE_TYPE_NONE;
	prop->allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
	prop->memAttr = huge ? ACL_DDR_MEM_HUGE : ACL_DDR_MEM_NORMAL;
	prop->location.type = ACL_MEM_LOCATION_TYPE_HOST_NUMA;
	prop->location.id = (uint32_t)node;
}

/* The reference allows only READWRITE, and for a host location an id of 0.
 * Whether the CPU needs the host entry to load and store through the
 * mapping is not documented: it is granted, and the fake faults without it. */
void sseg_ascend_access(int device, aclrtMemAccessDesc desc[2])
{
	memset(desc, 0, 2 * sizeof(*desc));
	desc[0].flags = ACL_RT_MEM_ACCESS_FLAGS_READWRITE;
	desc[0].location.type = ACL_MEM_LOCATION_TYPE_HOST;
	desc[1].flags = ACL_RT_MEM_ACCESS_FLAGS_READWRITE;
	desc[1].location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
	desc[1].location.id = (uint32_t)device;
}

/* ---- real probes, cached per (what, device, node) ---- */

enum probe_kind { PROBE_FABRIC, PROBE_HOST_VMM, PROBE_HOST_REGISTER };

#define PROBE_CACHE 64

struct probe_answer {
	enum probe_kind kind;
	int device;
	int node;
	bool works;
};

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static struct probe_answer probe_cache[PROBE_CACHE];
static int probe_cached;

/* One granule on node: created, exported as shareType, freed once
 * whatever the export answered. */
static bool try_export(const struct sseg_acl *acl, int node, aclrtMemSharedHandleType type)
{
	aclrtMemFabricHandle fabric;
	aclrtPhysicalMemProp prop;
	aclrtDrvMemHandle h = NULL;
	uint64_t shareable = 0;
	size_t gran = 0;
	bool ok;

	sseg_ascend_prop(&prop, true, node);
	if (acl->aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
						  &gran) != ACL_SUCCESS ||
	    !gran || acl->aclrtMallocPhysical(&h, gran, &prop, 0) != ACL_SUCCESS)
		return false;
	if (type == ACL_MEM_SHARE_HANDLE_TYPE_FABRIC)
		ok = acl->aclrtMemExportToShareableHandleV2(
			     h, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION, type, &fabric) ==
		     ACL_SUCCESS;
	else
		ok = acl->aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE,
							  ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
							  &shareable) == ACL_SUCCESS;
	/* Once, whatever it answers: a handle whose free failed is abandoned. */
	if (acl->aclrtFreePhysical(h) != ACL_SUCCESS) {
		sseg_registry_abandoned();
		sseg_log(SSEG_LOG_ERROR, "the probe's physical memory handle could not be freed "
			 "(aclrtFreePhysical failed); it is not freed again");
	}
	return ok;
}

/* A page of this process registered and unregistered again. */
static bool try_register(const struct sseg_acl *acl)
{
	size_t len = 2u << 20;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *dev = NULL;
	bool ok;

	if (p == MAP_FAILED)
		return false;
	memset(p, 0, len);
	ok = acl->aclrtHostRegister(p, len, ACL_HOST_REGISTER_MAPPED, &dev) == ACL_SUCCESS;
	if (ok)
		ok = acl->aclrtHostUnregister(p) == ACL_SUCCESS;
	munmap(p, len);
	return ok;
}

static bool run_probe(const struct sseg_acl *acl, enum probe_kind kind, int node)
{
	switch (kind) {
	case PROBE_FABRIC:
		return acl->fabric && try_export(acl, node, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC);
	case PROBE_HOST_VMM:
		return acl->vmm && try_export(acl, node, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT);
	case PROBE_HOST_REGISTER:
		return acl->host_register && try_register(acl);
	}
	return false;
}

static bool probe_cached_run(const struct sseg_acl *acl, enum probe_kind kind, int device,
			     int node)
{
	bool works = false;
	int i;

	pthread_mutex_lock(&probe_lock);
	for (i = 0; i < probe_cached; i++)
		if (probe_cache[i].kind == kind && probe_cache[i].device == device &&
		    probe_cache[i].node == node)
			break;
	if (i < probe_cached) {
		works = probe_cache[i].works;
	} else {
		works = run_probe(acl, kind, node);
		if (probe_cached < PROBE_CACHE)
			probe_cache[probe_cached++] = (struct probe_answer){ kind, device, node, works };
	}
	pthread_mutex_unlock(&probe_lock);
	return works;
}

/* SSEG_ASCEND_FABRIC=0 keeps fabric handles off (the in-server handle and
 * its trust list, one host only) where the runtime could make them. */
static bool fabric_wanted(void)
{
	const char *env = getenv("SSEG_ASCEND_FABRIC");

	return !env || strcmp(env, "0") != 0;
}

bool sseg_ascend_fabric_works(const struct sseg_acl *acl, int device, int node)
{
	bool works = fabric_wanted() && probe_cached_run(acl, PROBE_FABRIC, device, node);

	sseg_err_clear();
	return works;
}

/* The reference: with a kernel of 5.10 or older, registering memory that
 * is not aclrtMallocHost's fails; newer kernels take ordinary memory. */
static bool kernel_newer_than_5_10(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return false;
	return major > 5 || (major == 5 && minor > 10);
}

int sseg_ascend_hostreg_usable(char *why, size_t len)
{
	const struct sseg_acl *acl;
	int rc = sseg_acl_get(&acl);

	if (rc) {
		snprintf(why, len, "%s", sseg_last_error());
		return rc;
	}
	if (!acl->host_register) {
		snprintf(why, len, "the ACL runtime %s has no aclrtHostRegister", acl->path);
		return -EOPNOTSUPP;
	}
	if (!kernel_newer_than_5_10()) {
		snprintf(why, len, "aclrtHostRegister takes memory that aclrtMallocHost did not "
			 "allocate only on kernels newer than 5.10");
		return -EOPNOTSUPP;
	}
	return 0;
}

/* ---- the probe's device section ---- */

static void probe_one(const struct sseg_acl *acl, int index, struct sseg_probe_device *g)
{
	char why[128];
	int node = current_node();

	g->vmm = acl->vmm;
	g->host_vmm = -1;       /* the runtime has no attribute for it */
	g->fabric_claimed = -1; /* likewise: only a real export tells */
	g->ipc_fd = 0;          /* ACL handles are numbers, not file descriptors */
	g->host_vmm_works = probe_cached_run(acl, PROBE_HOST_VMM, index, node);
	g->fabric_works = probe_cached_run(acl, PROBE_FABRIC, index, node);
	g->host_register = !sseg_ascend_hostreg_usable(why, sizeof(why)) &&
			   probe_cached_run(acl, PROBE_HOST_REGISTER, index, -1);
	g->host_register_readonly = 0; /* ACL_HOST_REGISTER_READONLY: reserved, unsupported */
	g->host_numa_id = -1;          /* no query of a device's host node is documented */
}

int sseg_ascend_probe_device(int index, struct sseg_probe_device *g)
{
	const struct sseg_acl *acl;
	aclrtContext ctx, saved;
	uint32_t count = 0;
	int rc;

	if (sseg_acl_get(&acl))
		return sseg_err(-EOPNOTSUPP, "no ACL runtime");
	if (acl->aclrtGetDeviceCount(&count) != ACL_SUCCESS || index < 0 ||
	    (uint32_t)index >= count)
		return sseg_err(-ENOENT, "no ACL device %d", index);
	/* The device is there; what it can do stays unknown if it cannot be set. */
	g->vmm = g->host_vmm = g->host_vmm_works = g->fabric_claimed = -1;
	g->fabric_works = g->host_register = g->host_register_readonly = -1;
	rc = sseg_ascend_device_open(acl, index, &ctx);
	if (!rc && !sseg_acl_enter(acl, ctx, &saved)) {
		probe_one(acl, index, g);
		sseg_acl_leave(acl, saved);
	}
	if (!rc)
		sseg_ascend_device_close(acl, index);
	sseg_err_clear();
	return 0;
}
