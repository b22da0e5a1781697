/* SPDX-License-Identifier: Apache-2.0 */
/* The real probes of the cuda backend. Attributes claim what the driver
 * then refuses: HOST_NUMA allocations fail in containers whose seccomp
 * profile blocks get_mempolicy and on NUMA nodes without CPUs, and fabric
 * handles export without an IMEX channel that importers share. So each is
 * tried once per (device, node) and process, for real and at the minimum
 * size, under the device's primary context (the driver's VMM calls need a
 * current context), and the answer is kept. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_device.h"
#include "registry.h"

#define PROBE_CACHE 64

struct probe_answer {
	CUdevice dev;
	int node;
	int host_vmm;  /* 1 works, 0 refused, -1 not asked yet */
	int fabric;    /* the same */
	char why[320]; /* why HOST_NUMA allocations are refused */
};

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static struct probe_answer answers[PROBE_CACHE];
static int nanswers;

/* The entry for (dev, node), made on first use; NULL when the table is
 * full (the probe then runs every time). Under probe_lock. */
static struct probe_answer *answer_for(CUdevice dev, int node)
{
	for (int i = 0; i < nanswers; i++)
		if (answers[i].dev == dev && answers[i].node == node)
			return &answers[i];
	if (nanswers == PROBE_CACHE)
		return NULL;
	answers[nanswers] = (struct probe_answer){ dev, node, -1, -1, "" };
	return &answers[nanswers++];
}

void sseg_cuda_forget_probes(void)
{
	pthread_mutex_lock(&probe_lock);
	nanswers = 0;
	pthread_mutex_unlock(&probe_lock);
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

static int ask_host_vmm(const struct sseg_cuda *cu, struct probe_answer *a)
{
	CUcontext saved;
	int rc = enter_primary(cu, a->dev, &saved);

	if (rc)
		return rc; /* no answer about HOST_NUMA: asked again next time */
	rc = try_host_vmm(cu, a->node, a->why, sizeof(a->why));
	leave_primary(cu, a->dev, saved);
	if (rc < 0)
		return rc;
	a->host_vmm = rc;
	return 0;
}

int sseg_cuda_host_vmm_works(const struct sseg_cuda *cu, CUdevice dev, int node)
{
	struct probe_answer scratch = { dev, node, -1, -1, "" }, *a;
	int rc = 0;

	pthread_mutex_lock(&probe_lock);
	a = answer_for(dev, node);
	if (!a)
		a = &scratch;
	if (a->host_vmm < 0)
		rc = ask_host_vmm(cu, a);
	if (!rc && !a->host_vmm)
		rc = sseg_err(-EOPNOTSUPP, "device %d: %s", dev, a->why);
	pthread_mutex_unlock(&probe_lock);
	return rc;
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

/* 1 works, 0 does not, -1 no answer (the context could not be had). */
static int ask_fabric(const struct sseg_cuda *cu, CUdevice dev, int node)
{
	CUcontext saved;
	bool works;

	if (sseg_cuda_attribute(cu, dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED) <= 0)
		return 0;
	if (enter_primary(cu, dev, &saved))
		return -1;
	works = try_fabric(cu, node);
	leave_primary(cu, dev, saved);
	if (!works)
		sseg_log(SSEG_LOG_INFO,
			 "device %d claims fabric handles, but creating, exporting and importing "
			 "one on node %d failed (no IMEX channel?): peers get POSIX fds",
			 dev, node);
	return works;
}

bool sseg_cuda_fabric_works(const struct sseg_cuda *cu, CUdevice dev, int node)
{
	struct probe_answer scratch = { dev, node, -1, -1, "" }, *a;
	bool works;

	if (!cu->vmm)
		return false;
	pthread_mutex_lock(&probe_lock);
	a = answer_for(dev, node);
	if (!a)
		a = &scratch;
	if (a->fabric < 0)
		a->fabric = ask_fabric(cu, dev, node);
	works = a->fabric > 0; /* -1 (no context): asked again next time */
	pthread_mutex_unlock(&probe_lock);
	return works;
}
