/* SPDX-License-Identifier: Apache-2.0 */
/* The real probes of the cuda backend. Attributes claim what the driver
 * then refuses: HOST_NUMA allocations fail in containers whose seccomp
 * profile blocks get_mempolicy and on NUMA nodes without CPUs, and fabric
 * handles export without an IMEX channel that importers share. So each is
 * tried once per (device, node) and process, for real and at the minimum
 * size, under the device's primary context (the driver's VMM calls need a
 * current context), and the answer is kept (probecache.c). Whether the
 * backend is usable and the probe's device section ask them. */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_probe.h"
#include "backend/probecache.h"
#include "registry.h"

enum probe_what { PROBE_HOST_VMM, PROBE_FABRIC };

static struct sseg_probe_cache probes = SSEG_PROBE_CACHE_INIT;

/* What a probe function is asked about. */
struct probe_target {
	const struct sseg_cuda *cu;
	CUdevice dev;
	int node;
};

void sseg_cuda_forget_probes(void)
{
	sseg_probe_forget(&probes);
}

/* Retains dev's primary context and makes it current; leave_primary puts
 * the caller's context back and releases the retain. */
static int enter_primary(const struct sseg_cuda *cu, CUdevice dev, CUcontext *saved)
{
	CUcontext ctx = NULL;
	int rc = sseg_cuda_result(cu->cuDevicePrimaryCtxRetain(&ctx, dev),
				  "cuDevicePrimaryCtxRetain");

	if (rc)
		return rc;
	rc = sseg_cuda_enter(cu, ctx, saved);
	if (rc)
		cu->cuDevicePrimaryCtxRelease(dev);
	return rc;
}

static void leave_primary(const struct sseg_cuda *cu, CUdevice dev, CUcontext saved)
{
	CUresult r;

	sseg_cuda_leave(cu, saved);
	r = cu->cuDevicePrimaryCtxRelease(dev);
	if (r != CUDA_SUCCESS)
		sseg_log(SSEG_LOG_WARN, "a probe could not release device %d's primary context: %s",
			 dev, sseg_cuda_error_name(r));
}

/* One granule of pinned memory on host node `node`. */
static CUresult create_minimum(const struct sseg_cuda *cu, int node, unsigned types,
			       CUmemGenericAllocationHandle *h)
{
	CUmemAllocationProp prop;
	size_t gran = 0;
	CUresult r;

	sseg_cuda_host_prop(&prop, node, types);
	r = cu->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	return r != CUDA_SUCCESS ? r : cu->cuMemCreate(h, gran, &prop, 0);
}

/* Once, whatever it answers: a handle whose release failed is abandoned
 * (counted in sseg_abandoned_handles), as a segment's own would be. */
static void release_probe_handle(const struct sseg_cuda *cu, CUmemGenericAllocationHandle h)
{
	CUresult r = cu->cuMemRelease(h);

	if (r == CUDA_SUCCESS)
		return;
	sseg_registry_abandoned();
	sseg_log(SSEG_LOG_ERROR, "a probe's memory handle could not be released (cuMemRelease "
		 "failed: %s); it is not released again", sseg_cuda_error_name(r));
}

/* ---- HOST_NUMA allocations ---- */

/* 1 works; 0 refused, why says how; -ENOMEM: no answer (memory is short). */
static int try_host_vmm(const struct sseg_cuda *cu, int node, char *why, size_t len)
{
	CUmemGenericAllocationHandle h;
	CUresult r = create_minimum(cu, node, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, &h);

	if (r == CUDA_SUCCESS) {
		release_probe_handle(cu, h);
		return 1;
	}
	if (r == CUDA_ERROR_OUT_OF_MEMORY)
		return sseg_cuda_result(r, "cuMemCreate(HOST_NUMA, minimum size)");
	snprintf(why, len, "HOST_NUMA cuMemCreate on node %d failed: %s (%d): %s", node,
		 sseg_cuda_error_name(r), r, sseg_cuda_host_numa_hint());
	return 0;
}

static int ask_host_vmm(void *arg, char *why, size_t len)
{
	const struct probe_target *t = arg;
	CUcontext saved;
	int rc = enter_primary(t->cu, t->dev, &saved);

	if (rc)
		return rc; /* no answer about HOST_NUMA: asked again next time */
	rc = try_host_vmm(t->cu, t->node, why, len);
	leave_primary(t->cu, t->dev, saved);
	return rc;
}

int sseg_cuda_host_vmm_works(const struct sseg_cuda *cu, CUdevice dev, int node)
{
	struct probe_target t = { cu, dev, node };
	char why[SSEG_ERR_MAX - 32];
	int rc = sseg_probe_ask(&probes, PROBE_HOST_VMM, dev, node, ask_host_vmm, &t, why,
				sizeof(why));

	if (rc == 0)
		return sseg_err(-EOPNOTSUPP, "device %d: %s", dev, why);
	return rc < 0 ? rc : 0;
}

/* ---- fabric handles ---- */

/* Create with both handle types (as segments are), export the fabric
 * handle and import it again, release both: creating and exporting alone
 * pass where importing is refused. A process shares its own IMEX channel,
 * so a refusal here means no importer on this host can succeed either;
 * whether another host's importers share the channel only their import
 * can tell, and its error says so. */
static bool try_fabric(const struct sseg_cuda *cu, int node)
{
	CUmemGenericAllocationHandle h, imported;
	CUmemFabricHandle fabric;
	bool ok;

	if (create_minimum(cu, node,
			   CU_MEM_HANDLE_TYPE_FABRIC | CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
			   &h) != CUDA_SUCCESS)
		return false;
	ok = cu->cuMemExportToShareableHandle(&fabric, h, CU_MEM_HANDLE_TYPE_FABRIC, 0) ==
		     CUDA_SUCCESS &&
	     cu->cuMemImportFromShareableHandle(&imported, &fabric, CU_MEM_HANDLE_TYPE_FABRIC) ==
		     CUDA_SUCCESS;
	if (ok)
		release_probe_handle(cu, imported);
	release_probe_handle(cu, h);
	return ok;
}

/* 1 works, 0 does not, -EIO no answer (the context could not be had). */
static int ask_fabric(void *arg, char *why, size_t len)
{
	const struct probe_target *t = arg;
	CUcontext saved;
	bool works;

	(void)why;
	(void)len;
	if (sseg_cuda_attribute(t->cu, t->dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED) <= 0)
		return 0;
	if (enter_primary(t->cu, t->dev, &saved))
		return -EIO;
	works = try_fabric(t->cu, t->node);
	leave_primary(t->cu, t->dev, saved);
	if (!works)
		sseg_log(SSEG_LOG_INFO,
			 "device %d claims fabric handles, but creating, exporting and importing "
			 "one on node %d failed (no IMEX channel?): peers get POSIX fds",
			 t->dev, t->node);
	return works;
}

bool sseg_cuda_fabric_works(const struct sseg_cuda *cu, CUdevice dev, int node)
{
	struct probe_target t = { cu, dev, node };

	if (!cu->vmm)
		return false;
	/* No answer (no context) is asked again next time. */
	return sseg_probe_ask(&probes, PROBE_FABRIC, dev, node, ask_fabric, &t, NULL, 0) > 0;
}

/* ---- whether the backend is usable ---- */

/* The node a default segment on dev gets (the driver's word; -1: 0). */
static int device_node(const struct sseg_cuda *cu, CUdevice dev)
{
	int id = -1;

	if (cu->cuDeviceGetAttribute(&id, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS)
		return 0;
	return id < 0 ? 0 : id;
}

/* Usable when some device can allocate VMM host memory for real; else
 * device 0's reason (the one a default segment would meet). */
static int any_device(const struct sseg_cuda *cu, int count, char *why, size_t len)
{
	char first[SSEG_ERR_MAX];
	int first_rc = 0;

	for (int d = 0; d < count; d++) {
		CUdevice dev;
		int rc = sseg_cuda_device(cu, d, SSEG_CUDA_NEED_VMM_HOST, &dev);

		if (!rc)
			rc = sseg_cuda_host_vmm_works(cu, dev, device_node(cu, dev));
		if (!rc) {
			snprintf(why, len, "available: %d device(s), driver %d", count, cu->version);
			sseg_err_clear();
			return 0;
		}
		if (!first_rc) {
			first_rc = rc;
			snprintf(first, sizeof(first), "%s", sseg_last_error());
		}
	}
	snprintf(why, len, "not available: %s", first);
	return first_rc;
}

int sseg_cuda_usable(char *why, size_t len)
{
	const struct sseg_cuda *cu;
	int count = 0, rc = sseg_cuda_get(&cu);
	CUresult r;

	if (rc) {
		snprintf(why, len, "not available: %s", sseg_last_error());
		return rc;
	}
	if (!cu->vmm) {
		snprintf(why, len, "not available: driver %d lacks the VMM entry points", cu->version);
		return -EOPNOTSUPP;
	}
	r = cu->cuDeviceGetCount(&count);
	if (r != CUDA_SUCCESS) {
		snprintf(why, len, "not available: cuDeviceGetCount failed: %s (%d)",
			 sseg_cuda_error_name(r), r);
		return -EIO;
	}
	if (count == 0) {
		snprintf(why, len, "not available: no CUDA device");
		return -ENODEV;
	}
	return any_device(cu, count, why, len);
}

/* ---- the probe's device section ---- */

static void probe_attributes(const struct sseg_cuda *cu, CUdevice dev, struct sseg_probe_device *g)
{
	CUuuid uuid;

	if (sseg_cuda_uuid(cu, dev, &uuid))
		sseg_cuda_uuid_text(&uuid, g->uuid, sizeof(g->uuid));
	g->vmm = sseg_cuda_attribute(cu, dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
	g->host_vmm = sseg_cuda_attribute(cu, dev,
					  CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
	g->fabric_claimed = sseg_cuda_attribute(cu, dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED);
	g->ipc_fd = sseg_cuda_attribute(cu, dev,
					CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
	g->host_register = sseg_cuda_attribute(cu, dev, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
	g->host_register_readonly =
		sseg_cuda_attribute(cu, dev, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED);
	g->host_numa_id = -1;
	if (cu->cuDeviceGetAttribute(&g->host_numa_id, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) !=
	    CUDA_SUCCESS)
		g->host_numa_id = -1;
}

/* Attributes, then the real probes where the attributes do not say no. */
int sseg_cuda_probe_device(int index, struct sseg_probe_device *g)
{
	const struct sseg_cuda *cu;
	CUdevice dev;
	int count = 0, node, rc = sseg_cuda_get(&cu);

	if (rc)
		return rc;
	if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || index < 0 || index >= count)
		return sseg_err(-ENOENT, "no CUDA device %d", index);
	if (cu->cuDeviceGet(&dev, index) != CUDA_SUCCESS)
		return sseg_err(-EIO, "cuDeviceGet(%d) failed", index);
	probe_attributes(cu, dev, g);
	node = g->host_numa_id < 0 ? 0 : g->host_numa_id;
	g->host_vmm_works = 0;
	if (cu->vmm && g->vmm > 0 && g->host_vmm != 0)
		g->host_vmm_works = sseg_cuda_host_vmm_works(cu, dev, node) == 0;
	g->fabric_works = g->host_vmm_works && sseg_cuda_fabric_works(cu, dev, node);
	sseg_err_clear();
	return 0;
}
