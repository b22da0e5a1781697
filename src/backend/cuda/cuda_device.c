/* SPDX-License-Identifier: Apache-2.0 */
/* Device capabilities, placement and access for the CUDA backend and its
 * host registration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_device.h"
#include "os/numa.h"
#include "segment_types.h"

int sseg_cuda_attribute(const struct sseg_cuda *cu, CUdevice dev, int attr)
{
	int value = 0;
	CUresult r = cu->cuDeviceGetAttribute(&value, attr, dev);

	if (r == CUDA_ERROR_INVALID_VALUE)
		return -1; /* older than the attribute: unknown, not "no" */
	return r == CUDA_SUCCESS ? value : 0;
}

/* What an attribute the driver does not know (INVALID_VALUE) means. */
enum unknown_attr { UNKNOWN_IS_NO, UNKNOWN_IS_MAYBE };

/* A capability the path needs: a failed query is named as such; an
 * attribute the driver does not know means a driver too old for it, or
 * with UNKNOWN_IS_MAYBE leaves the decision to a real probe. */
static int require(const struct sseg_cuda *cu, CUdevice dev, int ordinal, int attr,
		   const char *missing, enum unknown_attr unknown)
{
	int value = 0;
	CUresult r = cu->cuDeviceGetAttribute(&value, attr, dev);
	char call[64];

	if (r == CUDA_SUCCESS && value)
		return 0;
	if (r == CUDA_SUCCESS)
		return sseg_err(-EOPNOTSUPP, "device %d %s (attribute %d is 0)", ordinal, missing,
				attr);
	if (r == CUDA_ERROR_INVALID_VALUE && unknown == UNKNOWN_IS_MAYBE)
		return 0;
	if (r == CUDA_ERROR_INVALID_VALUE)
		return sseg_err(-EOPNOTSUPP, "device %d %s (the driver does not know attribute "
				"%d: too old)", ordinal, missing, attr);
	snprintf(call, sizeof(call), "cuDeviceGetAttribute(%d) of device %d", attr, ordinal);
	return sseg_cuda_result(r, call);
}

/* HOST_NUMA VMM memory from driver 12.6 on by default, as NCCL enables
 * its cuMem host allocations (src/misc/cudawrap.cc: off below 12.2, on by
 * default from 12.6); SHAREDSEG_CUDA_HOST_NUMA_MIN_DRIVER lowers or raises the
 * bar (12020 is the first driver that has HOST_NUMA locations at all). */
#define HOST_NUMA_MIN_DRIVER 12060

static int host_numa_min_driver(void)
{
	const char *env = sseg_env("SHAREDSEG_CUDA_HOST_NUMA_MIN_DRIVER");
	char *end;
	long v;

	if (!env || !*env)
		return HOST_NUMA_MIN_DRIVER;
	v = strtol(env, &end, 10);
	return *end || v < 0 || v > 1000000 ? HOST_NUMA_MIN_DRIVER : (int)v;
}

/* VMM, a driver new enough, and attribute 141 not saying no. 141 answers
 * INVALID_VALUE on drivers that predate it (12.2 to 12.8): unknown, and
 * the real probe decides. */
static int need_vmm_host(const struct sseg_cuda *cu, CUdevice dev, int ordinal)
{
	int min = host_numa_min_driver(), rc;

	rc = require(cu, dev, ordinal, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
		     "does not support VMM", UNKNOWN_IS_NO);
	if (rc)
		return rc;
	if (cu->version < min)
		return sseg_err(-EOPNOTSUPP,
				"driver %d.%d: VMM host memory (HOST_NUMA) is used from driver "
				"%d.%d on, as NCCL does (SHAREDSEG_CUDA_HOST_NUMA_MIN_DRIVER=%d accepts "
				"this driver)",
				cu->version / 1000, cu->version % 1000 / 10, min / 1000,
				min % 1000 / 10, cu->version);
	return require(cu, dev, ordinal,
		       CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
		       "cannot allocate VMM host memory (HOST_NUMA locations)", UNKNOWN_IS_MAYBE);
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
	if (!rc && (need & SSEG_CUDA_NEED_VMM_HOST))
		rc = need_vmm_host(cu, *dev, ordinal);
	/* Attribute 99; one the driver does not know leaves it to the call. */
	if (!rc && (need & SSEG_CUDA_NEED_REGISTER))
		rc = require(cu, *dev, ordinal, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED,
			     "cannot register host memory", UNKNOWN_IS_MAYBE);
	return rc;
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

void sseg_cuda_host_prop(CUmemAllocationProp *prop, int node, unsigned types)
{
	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->requestedHandleTypes = (CUmemAllocationHandleType)types;
	prop->location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop->location.id = node;
}

/* NCCL's probe says as much ("Docker in particular is known to disable
 * get_mempolicy ... --cap-add SYS_NICE"); NCCL issue 2190 traced refusals
 * to nodes without CPUs. Which CUresult each gives is not documented. */
const char *sseg_cuda_host_numa_hint(void)
{
	return "seccomp refusing get_mempolicy/mbind without CAP_SYS_NICE (docker run "
	       "--cap-add SYS_NICE), or a NUMA node without CPUs; backend=memfd with "
	       "SSEG_F_HOST_REGISTER needs neither";
}

/* ---- UUIDs ---- */

bool sseg_cuda_uuid(const struct sseg_cuda *cu, CUdevice dev, CUuuid *uuid)
{
	return cu->cuDeviceGetUuid && cu->cuDeviceGetUuid(uuid, dev) == CUDA_SUCCESS;
}

void sseg_cuda_uuid_text(const CUuuid *uuid, char *buf, size_t len)
{
	const unsigned char *u = (const unsigned char *)uuid->bytes;

	snprintf(buf, len,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		 u[14], u[15]);
}
