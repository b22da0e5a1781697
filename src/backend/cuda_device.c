/* Device capabilities, placement and access for the CUDA backend and its
 * host registration. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda_device.h"
#include "object.h"
#include "os/numa.h"

int sseg_cuda_attribute(const struct sseg_cuda *cu, CUdevice dev, int attr)
{
	int value = 0;
	CUresult r = cu->cuDeviceGetAttribute(&value, attr, dev);

	if (r == CUDA_ERROR_INVALID_VALUE)
		return -1; /* older than the attribute: unknown, not "no" */
	return r == CUDA_SUCCESS ? value : 0;
}

/* A capability the path needs: a failed query is named as such, an
 * attribute the driver does not know means a driver too old for it. */
static int require(const struct sseg_cuda *cu, CUdevice dev, int ordinal, int attr,
		   const char *missing)
{
	int value = 0;
	CUresult r = cu->cuDeviceGetAttribute(&value, attr, dev);
	char call[64];

	if (r == CUDA_SUCCESS && value)
		return 0;
	if (r == CUDA_SUCCESS)
		return sseg_err(-EOPNOTSUPP, "device %d %s", ordinal, missing);
	if (r == CUDA_ERROR_INVALID_VALUE)
		return sseg_err(-EOPNOTSUPP, "device %d %s (the driver does not know attribute "
				"%d: too old)", ordinal, missing, attr);
	snprintf(call, sizeof(call), "cuDeviceGetAttribute(%d) of device %d", attr, ordinal);
	return sseg_cuda_result(r, call);
}

int sseg_cuda_device(const struct sseg_cuda *cu, int ordinal, int need, CUdevice *dev)
{
	int count = 0, rc;

	rc = sseg_cuda_result(cu->cuDeviceGetCount(&count), "cuDeviceGetCount");
	if (rc)
		return rc;
	if (ordinal < 0 || ordinal >= count)
		return sseg_err(-ENODEV, "device=%d, but the driver sees %d device(s)", ordinal,
				count);
	rc = sseg_cuda_result(cu->cuDeviceGet(dev, ordinal), "cuDeviceGet");
	if (rc || !(need & SSEG_CUDA_NEED_VMM_HOST))
		return rc;
	rc = require(cu, *dev, ordinal, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
		     "does not support VMM");
	if (!rc)
		rc = require(cu, *dev, ordinal,
			     CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
			     "cannot allocate VMM host memory (HOST_NUMA location; driver 12.2 or "
			     "newer needed)");
	return rc;
}

/* Usable when some device can allocate VMM host memory; else device 0's
 * reason (the one a default segment would meet). */
static int any_device(const struct sseg_cuda *cu, int count, char *why, size_t len)
{
	char first[SSEG_ERR_MAX];
	int first_rc = 0;

	for (int d = 0; d < count; d++) {
		CUdevice dev;
		int rc = sseg_cuda_device(cu, d, SSEG_CUDA_NEED_VMM_HOST, &dev);

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

int sseg_cuda_placement(const struct sseg_cuda *cu, struct sseg *seg, CUdevice dev, int *node)
{
	uint64_t nodes = 0;
	int id = -1, rc;

	switch (seg->opts.numa) {
	case SSEG_NUMA_NODE:
		/* Only the node asked for is checked: another GPU's or node's
		 * trouble does not concern this allocation. */
		sseg_os_numa_nodes(&nodes);
		if (!(nodes & (1ull << seg->opts.numa_node)))
			return sseg_err(-EINVAL, "numa node %d has no memory on this host",
					seg->opts.numa_node);
		*node = seg->opts.numa_node;
		return 0;
	case SSEG_NUMA_NONE:
	case SSEG_NUMA_DEVICE_LOCAL:
		rc = sseg_cuda_result(cu->cuDeviceGetAttribute(&id, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID,
							      dev),
				      "cuDeviceGetAttribute(HOST_NUMA_ID)");
		if (rc)
			return rc;
		*node = id < 0 ? 0 : id; /* -1: no NUMA; the driver wants 0 */
		seg->opts.numa_node = *node;
		return 0;
	case SSEG_NUMA_INTERLEAVE:
		break;
	}
	return sseg_err(-EOPNOTSUPP,
			"numa=interleave is not available with the cuda backend: one allocation "
			"lives on one host node");
}

/* ---- the fabric probe, cached per (device, node) ---- */

#define FABRIC_CACHE 64

struct fabric_answer {
	CUdevice dev;
	int node;
	bool works;
};

static pthread_mutex_t fabric_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fabric_answer fabric_cache[FABRIC_CACHE];
static int fabric_cached;

static bool try_fabric(const struct sseg_cuda *cu, int node)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h;
	CUmemFabricHandle fabric;
	size_t gran = 0;
	bool ok;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop.location.id = node;
	if (cu->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ||
	    cu->cuMemCreate(&h, gran, &prop, 0))
		return false;
	ok = cu->cuMemExportToShareableHandle(&fabric, h, CU_MEM_HANDLE_TYPE_FABRIC, 0) ==
	     CUDA_SUCCESS;
	cu->cuMemRelease(h); /* once, whatever it answers */
	return ok;
}

static const struct fabric_answer *cached(CUdevice dev, int node)
{
	for (int i = 0; i < fabric_cached; i++)
		if (fabric_cache[i].dev == dev && fabric_cache[i].node == node)
			return &fabric_cache[i];
	return NULL;
}

int sseg_cuda_fabric_works(const struct sseg_cuda *cu, CUdevice dev, int node)
{
	const struct fabric_answer *known;
	bool works;
	int attr;

	pthread_mutex_lock(&fabric_lock);
	known = cached(dev, node);
	if (known) {
		works = known->works;
		goto out;
	}
	attr = sseg_cuda_attribute(cu, dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED);
	works = attr > 0 && try_fabric(cu, node);
	if (attr > 0 && !works)
		sseg_log(SSEG_LOG_INFO,
			 "device %d claims fabric handles but creating one on node %d failed (no "
			 "IMEX channel?): peers get POSIX fds",
			 dev, node);
	if (fabric_cached < FABRIC_CACHE)
		fabric_cache[fabric_cached++] = (struct fabric_answer){ dev, node, works };
out:
	pthread_mutex_unlock(&fabric_lock);
	return works;
}

/* ---- access ---- */

int sseg_cuda_access_list(const struct sseg_cuda *cu, int node, bool readonly,
			  CUmemAccessDesc **list, size_t *n)
{
	CUmemAccess_flags flags = readonly ? CU_MEM_ACCESS_FLAGS_PROT_READ
					   : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CUmemAccessDesc *desc;
	int count = 0, rc;

	rc = sseg_cuda_result(cu->cuDeviceGetCount(&count), "cuDeviceGetCount");
	if (rc)
		return rc;
	desc = calloc((size_t)count + 1, sizeof(*desc));
	if (!desc)
		return sseg_err(-ENOMEM, "out of memory");
	/* CPU access to a HOST_NUMA allocation is granted on a HOST_NUMA
	 * location (the driver ignores its id); until then CPU loads fault. */
	*n = 0;
	desc[*n].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	desc[*n].location.id = node;
	desc[(*n)++].flags = flags;
	for (int d = 0; d < count; d++) {
		CUdevice dev;

		if (cu->cuDeviceGet(&dev, d) ||
		    sseg_cuda_attribute(cu, dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) <= 0)
			continue;
		desc[*n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		desc[*n].location.id = dev;
		desc[(*n)++].flags = flags;
	}
	*list = desc;
	return 0;
}

/* ---- the probe's device section ---- */

int sseg_cuda_probe_device(int index, struct sseg_probe_device *g)
{
	const struct sseg_cuda *cu;
	CUdevice dev;
	int count = 0, node;

	if (sseg_cuda_get(&cu))
		return sseg_err(-ENOENT, "no CUDA driver");
	if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || index < 0 || index >= count)
		return sseg_err(-ENOENT, "no CUDA device %d", index);
	if (cu->cuDeviceGet(&dev, index) != CUDA_SUCCESS)
		return sseg_err(-EIO, "cuDeviceGet(%d) failed", index);
	g->vmm = sseg_cuda_attribute(cu, dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
	g->host_vmm = sseg_cuda_attribute(cu, dev,
					  CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
	g->host_vmm_works = -1;
	g->fabric_claimed = sseg_cuda_attribute(cu, dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED);
	g->ipc_fd = sseg_cuda_attribute(cu, dev,
					CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
	g->host_register = -1;
	g->host_register_readonly = -1;
	node = -1;
	if (cu->cuDeviceGetAttribute(&node, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS)
		node = -1;
	g->host_numa_id = node;
	g->fabric_works = cu->vmm && g->vmm > 0 &&
			  sseg_cuda_fabric_works(cu, dev, node < 0 ? 0 : node);
	return 0;
}
