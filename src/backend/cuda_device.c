/* Device capabilities, placement and access for the CUDA backend. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda_device.h"

static int attribute(const struct sseg_cuda *cu, CUdevice dev, int attr, int *value)
{
	*value = 0;
	return cu->cuDeviceGetAttribute(value, attr, dev) == CUDA_SUCCESS ? 0 : -EIO;
}

int sseg_cuda_device(const struct sseg_cuda *cu, int ordinal, CUdevice *dev)
{
	int count = 0, rc;

	rc = sseg_cuda_result(cu->cuDeviceGetCount(&count), "cuDeviceGetCount");
	if (rc)
		return rc;
	if (ordinal >= count)
		return sseg_err(-ENODEV, "device=%d, but the driver sees %d device(s)", ordinal, count);
	return sseg_cuda_result(cu->cuDeviceGet(dev, ordinal), "cuDeviceGet");
}

/* 0 when device 0 has the capability; else why not, naming a failed query. */
static int require(const struct sseg_cuda *cu, CUdevice dev, int attr, const char *missing,
		   char *why, size_t len)
{
	int value = 0;
	CUresult r = cu->cuDeviceGetAttribute(&value, attr, dev);

	if (r != CUDA_SUCCESS) {
		snprintf(why, len, "not available: cuDeviceGetAttribute(%d) failed: %s (%d)", attr,
			 sseg_cuda_error_name(r), r);
		return -EIO;
	}
	if (!value) {
		snprintf(why, len, "not available: device 0 %s", missing);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int usable_device(const struct sseg_cuda *cu, char *why, size_t len)
{
	CUdevice dev;
	int count = 0, rc;
	CUresult r;

	r = cu->cuDeviceGetCount(&count);
	if (r == CUDA_SUCCESS && count == 0) {
		snprintf(why, len, "not available: no CUDA device");
		return -ENODEV;
	}
	if (r == CUDA_SUCCESS)
		r = cu->cuDeviceGet(&dev, 0);
	if (r != CUDA_SUCCESS) {
		snprintf(why, len, "not available: listing devices failed: %s (%d)",
			 sseg_cuda_error_name(r), r);
		return -EIO;
	}
	rc = require(cu, dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
		     "does not support VMM", why, len);
	if (!rc)
		rc = require(cu, dev, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
			     "cannot allocate VMM host memory (HOST_NUMA location; driver 12.2 or "
			     "newer needed)",
			     why, len);
	if (!rc)
		snprintf(why, len, "available: %d device(s), driver %d", count, cu->version);
	return rc;
}

int sseg_cuda_usable(char *why, size_t len)
{
	const struct sseg_cuda *cu;
	int rc = sseg_cuda_get(&cu);

	if (rc) {
		snprintf(why, len, "not available: %s", sseg_last_error());
		return rc;
	}
	if (!cu->vmm) {
		snprintf(why, len, "not available: driver %d lacks the VMM entry points",
			 cu->version);
		return -EOPNOTSUPP;
	}
	return usable_device(cu, why, len);
}

int sseg_cuda_placement(const struct sseg_cuda *cu, struct sseg *seg, CUdevice dev, int *node)
{
	uint64_t nodes = 0;
	int id = -1, rc;

	switch (seg->opts.numa) {
	case SSEG_NUMA_NODE:
		/* Only the node asked for is checked: another GPU's or node's
		 * trouble does not concern this allocation. */
		os_numa_nodes(&nodes);
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

static pthread_mutex_t fabric_lock = PTHREAD_MUTEX_INITIALIZER;
static signed char fabric_cache[64]; /* 0 unknown, 1 works, -1 does not */

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

int sseg_cuda_fabric_works(const struct sseg_cuda *cu, CUdevice dev, int node)
{
	int attr = 0, slot = dev & 63;
	bool works;

	pthread_mutex_lock(&fabric_lock);
	if (!fabric_cache[slot]) {
		attribute(cu, dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, &attr);
		works = attr && try_fabric(cu, node);
		fabric_cache[slot] = works ? 1 : -1;
		if (attr && !works)
			sseg_log(SSEG_LOG_INFO,
				 "device %d claims fabric handles but creating one failed (no IMEX "
				 "channel?): peers get POSIX fds",
				 dev);
	}
	works = fabric_cache[slot] > 0;
	pthread_mutex_unlock(&fabric_lock);
	return works;
}

size_t sseg_cuda_access_list(const struct sseg_cuda *cu, int node, bool readonly,
			     CUmemAccessDesc *desc, size_t max)
{
	CUmemAccess_flags flags = readonly ? CU_MEM_ACCESS_FLAGS_PROT_READ
					   : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	int count = 0;
	size_t n = 0;

	/* CPU access to a HOST_NUMA allocation is granted on a HOST_NUMA
	 * location (the driver ignores its id); until then CPU loads fault. */
	desc[n].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	desc[n].location.id = node;
	desc[n++].flags = flags;
	cu->cuDeviceGetCount(&count);
	for (int d = 0; d < count && n < max; d++) {
		CUdevice dev;
		int vmm = 0;

		if (cu->cuDeviceGet(&dev, d) || attribute(cu, dev,
			CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, &vmm) || !vmm)
			continue;
		desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		desc[n].location.id = dev;
		desc[n++].flags = flags;
	}
	return n;
}

void sseg_cuda_probe_devices(struct sseg_probe *p)
{
	const struct sseg_cuda *cu;
	int count = 0;

	if (sseg_cuda_get(&cu))
		return;
	p->cuda_driver_version = cu->version;
	if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS)
		return;
	p->cuda_ndevices = count < SSEG_PROBE_MAX_GPUS ? count : SSEG_PROBE_MAX_GPUS;
	for (int d = 0; d < p->cuda_ndevices; d++) {
		struct sseg_probe_gpu *g = &p->cuda[d];
		CUdevice dev;

		if (cu->cuDeviceGet(&dev, d) != CUDA_SUCCESS)
			continue;
		attribute(cu, dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, &g->vmm);
		attribute(cu, dev, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
			  &g->host_numa_vmm);
		attribute(cu, dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, &g->fabric_attr);
		attribute(cu, dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
			  &g->posix_fd);
		if (attribute(cu, dev, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, &g->host_numa_id))
			g->host_numa_id = -1;
		g->fabric_works = cu->vmm && g->vmm &&
				  sseg_cuda_fabric_works(cu, dev, g->host_numa_id < 0 ? 0
										  : g->host_numa_id);
	}
}
