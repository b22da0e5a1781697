/* SPDX-License-Identifier: Apache-2.0 */
/* The real probes of the ascend backend: each does what a segment's owner
 * does, on one granule (allocate, reserve, map, grant the device, export,
 * then undo it all), as a fabric handle (decides whether segments use
 * fabric handles), as an in-server handle (host_vmm_works, and whether the
 * backend is available), and on one GiB of 1 GiB fabric pages (whether a
 * fabric segment of whole GiB uses them); a page registered and
 * unregistered answers host_register. A probe that stops at
 * the export misses what the driver refuses later, at access or map time.
 * Each answer is kept per (what, device, node) and process. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/ascend/ascend_device.h"
#include "backend/ascend/ascend_probe.h"
#include "backend/probecache.h"
#include "registry.h"
#include "segment_types.h"

enum probe_what { PROBE_FABRIC, PROBE_HOST_VMM, PROBE_HOST_REGISTER, PROBE_FABRIC_1G };

static const char *const probe_names[] = {
	[PROBE_FABRIC] = "fabric handles",
	[PROBE_HOST_VMM] = "the in-server handle",
	[PROBE_HOST_REGISTER] = "host registration",
	[PROBE_FABRIC_1G] = "1 GiB fabric pages",
};

static struct sseg_probe_cache probes = SSEG_PROBE_CACHE_INIT;

/* What a probe is asked about. */
struct probe_target {
	const struct sseg_acl *acl;
	enum probe_what what;
	int device;
	int node; /* -1: the one the calling thread runs on */
};

/* Once, whatever it answers: a handle whose free failed is abandoned
 * (counted in sseg_abandoned_handles), as a segment's own would be. */
static void free_probe_handle(const struct sseg_acl *acl, aclrtDrvMemHandle h)
{
	if (acl->aclrtFreePhysical(h) != ACL_SUCCESS) {
		sseg_registry_abandoned();
		sseg_log(SSEG_LOG_ERROR, "the probe's physical memory handle could not be freed "
			 "(aclrtFreePhysical failed); it is not freed again");
	}
}

static int try_export(const struct sseg_acl *acl, aclrtDrvMemHandle h, bool fabric)
{
	aclrtMemFabricHandle handle;
	uint64_t shareable = 0;

	if (fabric)
		return sseg_acl_result(acl->aclrtMemExportToShareableHandleV2(
					       h, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
					       ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &handle),
				       "aclrtMemExportToShareableHandleV2(fabric)");
	return sseg_acl_result(acl->aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE,
								    ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
								    &shareable),
			       "aclrtMemExportToShareableHandle");
}

/* Reserve, map, grant, export; every stage undone whatever the next
 * answered. 0, or the first refusal with its sentence. */
static int try_mapped(const struct sseg_acl *acl, aclrtDrvMemHandle h, size_t size, int device,
		      bool fabric)
{
	void *va = NULL;
	int rc = sseg_acl_result(acl->aclrtReserveMemAddress(&va, size, 0, NULL, 0),
				 "aclrtReserveMemAddress");

	if (rc)
		return rc;
	rc = sseg_acl_result(acl->aclrtMapMem(va, size, 0, h, 0), "aclrtMapMem");
	if (!rc) {
		rc = sseg_ascend_grant(acl, va, size, device);
		if (!rc)
			rc = try_export(acl, h, fabric);
		if (acl->aclrtUnmapMem(va) != ACL_SUCCESS) /* the reservation stays */
			return rc ? rc : sseg_err(-EIO, "the probe's aclrtUnmapMem failed");
	}
	acl->aclrtReleaseMemAddress(va);
	return rc;
}

/* 1 works, 0 refused (why), -ENOMEM no answer (memory is short). One
 * granule, or one GiB of 1 GiB pages: what a segment will use. */
static int try_segment(const struct probe_target *t, char *why, size_t len)
{
	struct sseg_ascend_want want = { .fabric = t->what != PROBE_HOST_VMM,
					 .huge1g = t->what == PROBE_FABRIC_1G,
					 .huge = true, .node = t->node };
	struct sseg_ascend_memory mem;
	aclrtDrvMemHandle h = NULL;
	int rc;

	if (want.node < 0)
		want.node = sseg_ascend_current_node();
	rc = sseg_ascend_allocate(t->acl, &want, want.huge1g ? SSEG_1G : 1, &mem, &h);
	if (!rc) {
		rc = try_mapped(t->acl, h, mem.size, t->device, want.fabric);
		free_probe_handle(t->acl, h);
	}
	if (rc == -ENOMEM)
		return rc;
	if (rc)
		snprintf(why, len, "%s", sseg_last_error());
	return !rc;
}

/* A page of this process registered and unregistered again. */
static int try_register(const struct sseg_acl *acl, char *why, size_t len)
{
	size_t bytes = 2u << 20;
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *dev = NULL;
	int rc;

	if (p == MAP_FAILED)
		return sseg_err(-ENOMEM, "no memory for the registration probe");
	memset(p, 0, bytes);
	rc = sseg_acl_result(acl->aclrtHostRegister(p, bytes, ACL_HOST_REGISTER_MAPPED, &dev),
			     "aclrtHostRegister");
	if (!rc)
		rc = sseg_acl_result(acl->aclrtHostUnregister(p), "aclrtHostUnregister");
	munmap(p, bytes);
	if (rc)
		snprintf(why, len, "%s", sseg_last_error());
	return !rc;
}

/* What is missing for the probe: an entry point group of the runtime. */
static const char *missing_for(const struct probe_target *t)
{
	switch (t->what) {
	case PROBE_FABRIC:
	case PROBE_FABRIC_1G:
		return t->acl->fabric ? NULL : "aclrtMemExportToShareableHandleV2";
	case PROBE_HOST_VMM:
		return t->acl->vmm ? NULL : "aclrtMallocPhysical";
	case PROBE_HOST_REGISTER:
		return t->acl->host_register ? NULL : "aclrtHostRegister";
	}
	return NULL;
}

static int run_on_device(const struct probe_target *t, char *why, size_t len)
{
	if (t->what == PROBE_HOST_REGISTER)
		return try_register(t->acl, why, len);
	return try_segment(t, why, len);
}

/* Sets the device (one reference of it) and makes its context current
 * around the probe, the caller's put back: a probe runs where no device is
 * set yet (the backend's probe) as well as inside a segment's create. A
 * device that cannot be set gives no answer. */
static int run_probe(void *arg, char *why, size_t len)
{
	const struct probe_target *t = arg;
	const char *missing = missing_for(t);
	aclrtContext ctx, saved;
	int rc;

	if (missing) {
		snprintf(why, len, "the ACL runtime %s has no %s", t->acl->path, missing);
		return 0;
	}
	rc = sseg_ascend_device_open(t->acl, t->device, &ctx);
	if (rc)
		return rc;
	rc = sseg_acl_enter(t->acl, ctx, &saved);
	if (!rc) {
		rc = run_on_device(t, why, len);
		sseg_acl_leave(t->acl, saved);
	}
	sseg_ascend_device_close(t->acl, t->device);
	if (rc == 0)
		sseg_log(SSEG_LOG_INFO, "ACL device %d: a probe of %s was refused: %s", t->device,
			 probe_names[t->what], why);
	return rc;
}

/* 1 works, 0 refused (why), -errno no answer. */
static int ask(const struct sseg_acl *acl, enum probe_what what, int device, int node, char *why,
	       size_t len)
{
	struct probe_target t = { acl, what, device, node };

	return sseg_probe_ask(&probes, what, device, node, run_probe, &t, why, len);
}

/* SHAREDSEG_ASCEND_FABRIC=0 keeps fabric handles off (the in-server handle and
 * its trust list, one host only) where the runtime could make them. */
static bool fabric_wanted(void)
{
	const char *env = sseg_env("SHAREDSEG_ASCEND_FABRIC");

	return !env || strcmp(env, "0") != 0;
}

bool sseg_ascend_fabric_works(const struct sseg_acl *acl, int device, int node)
{
	bool works = fabric_wanted() && ask(acl, PROBE_FABRIC, device, node, NULL, 0) > 0;

	sseg_err_clear();
	return works;
}

bool sseg_ascend_huge1g_works(const struct sseg_acl *acl, int device, int node)
{
	bool works = ask(acl, PROBE_FABRIC_1G, device, node, NULL, 0) > 0;

	sseg_err_clear();
	return works;
}

/* Usable where some device maps ACL VMM host memory for real (what a
 * segment does, on one granule); else device 0's reason: a device on PCIe
 * is refused it (HCCS only), which a create would meet at its grant. */
static int any_device(const struct sseg_acl *acl, uint32_t count)
{
	char why[SSEG_ERR_MAX], first[SSEG_ERR_MAX] = "";
	int first_rc = 0;

	for (uint32_t d = 0; d < count; d++) {
		int rc = ask(acl, PROBE_HOST_VMM, (int)d, -1, why, sizeof(why));

		if (rc > 0)
			return 0;
		if (rc == 0)
			rc = sseg_err(-EOPNOTSUPP, "%s", why);
		if (!first_rc) {
			first_rc = rc;
			snprintf(first, sizeof(first), "%s", sseg_last_error());
		}
	}
	return sseg_err(first_rc, "%s", first);
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
		rc = sseg_ascend_device_count(acl, &count);
	if (!rc && count == 0)
		rc = sseg_err(-ENODEV, "the ACL runtime sees no device");
	*ndevices = (int)count;
	if (!rc)
		rc = any_device(acl, count);
	if (rc) {
		sseg_probe_reason(why, len, sseg_last_error());
		return rc;
	}
	snprintf(why, len, "available: %u device(s), ACL runtime %d.%d.%d", count,
		 acl->version / 1000000, acl->version / 1000 % 1000, acl->version % 1000);
	return 0;
}

/* ---- the probe's device section ---- */

/* 1, 0, or -1 where the probe gave no answer (the device could not be set). */
static int fact(int answer)
{
	return answer < 0 ? -1 : answer;
}

int sseg_ascend_probe_device(int index, struct sseg_probe_device *g)
{
	const struct sseg_acl *acl;
	uint32_t count = 0;
	char why[128];

	if (sseg_acl_get(&acl))
		return sseg_err(-EOPNOTSUPP, "no ACL runtime");
	if (acl->aclrtGetDeviceCount(&count) != ACL_SUCCESS || index < 0 ||
	    (uint32_t)index >= count)
		return sseg_err(-ENOENT, "no ACL device %d", index);
	g->vmm = acl->vmm;
	g->host_vmm = -1;       /* the runtime has no attribute for it */
	g->fabric_claimed = -1; /* likewise: only a real export tells */
	g->ipc_fd = 0;          /* ACL handles are numbers, not file descriptors */
	g->host_vmm_works = fact(ask(acl, PROBE_HOST_VMM, index, -1, NULL, 0));
	g->fabric_works = fact(ask(acl, PROBE_FABRIC, index, sseg_ascend_fabric_node(acl, index),
				   NULL, 0));
	g->host_register = sseg_ascend_hostreg_usable(why, sizeof(why))
				   ? 0
				   : fact(ask(acl, PROBE_HOST_REGISTER, index, -1, NULL, 0));
	g->host_register_readonly = 0; /* ACL_HOST_REGISTER_READONLY: reserved, unsupported */
	g->host_numa_id = -1;          /* no query of a device's host node is documented */
	sseg_err_clear();
	return 0;
}
