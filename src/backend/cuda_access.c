/* SPDX-License-Identifier: Apache-2.0 */
/* Access to a mapping of HOST_NUMA memory. One cuMemSetAccess for the host
 * and every GPU fails as a whole where one GPU pair has no peer access
 * (CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, 217: NCCL issue 1838 on L4 and T4
 * boxes), and a host entry mixed with device entries is what NCCL keeps
 * apart. So: the host, then the rank's own device, each in its own call;
 * then each other device, one call each, only where cuDeviceCanAccessPeer
 * says it can reach the device the memory belongs to. */
#include <stdio.h>

#include "backend/cuda_device.h"

static CUresult set_access(const struct sseg_cuda *cu, const struct sseg_cuda_grant *g,
			   CUmemLocationType type, int id)
{
	CUmemAccessDesc desc = {
		.location = { .type = type, .id = id },
		.flags = g->readonly ? CU_MEM_ACCESS_FLAGS_PROT_READ
				     : CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};

	return cu->cuMemSetAccess(g->ptr, g->size, &desc, 1);
}

int sseg_cuda_no_peer_access(const struct sseg_cuda *cu, CUresult r, const char *call,
			     CUdevice own, const char *owner_uuid)
{
	char mine[48] = "UUID unknown", hint[384];
	CUuuid uuid;

	if (r == CUDA_SUCCESS)
		return 0;
	if (sseg_cuda_uuid(cu, own, &uuid))
		sseg_cuda_uuid_text(&uuid, mine, sizeof(mine));
	if (r != CUDA_ERROR_PEER_ACCESS_UNSUPPORTED && r != CUDA_ERROR_NOT_SUPPORTED)
		return sseg_cuda_result(r, call);
	snprintf(hint, sizeof(hint),
		 "device %d (%s) cannot map memory that belongs to the owner's GPU %s (no peer "
		 "access between the two); for such topologies use backend=memfd with "
		 "SSEG_F_HOST_REGISTER, where each rank pins the shared pages for its own GPU",
		 own, mine, owner_uuid && *owner_uuid ? owner_uuid : "(UUID unknown)");
	return sseg_cuda_result_hint(r, call, hint);
}

/* A device other than the rank's own: only with a VMM attribute and a
 * peer path to the memory's device (its own device reaches it by
 * definition; a device is not its own peer for cuDeviceCanAccessPeer). */
static bool reaches(const struct sseg_cuda *cu, CUdevice d, CUdevice owner)
{
	int can = 0;

	if (owner < 0 ||
	    sseg_cuda_attribute(cu, d, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) <= 0)
		return false;
	if (d == owner)
		return true;
	return cu->cuDeviceCanAccessPeer(&can, d, owner) == CUDA_SUCCESS && can;
}

static void grant_others(const struct sseg_cuda *cu, const struct sseg_cuda_grant *g)
{
	int count = 0;

	if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS)
		return;
	for (int d = 0; d < count; d++) {
		CUresult r;

		if (d == g->own || !reaches(cu, d, g->owner))
			continue;
		r = set_access(cu, g, CU_MEM_LOCATION_TYPE_DEVICE, d);
		if (r != CUDA_SUCCESS)
			sseg_log(SSEG_LOG_WARN,
				 "device %d may reach device %d's memory (cuDeviceCanAccessPeer), "
				 "but cuMemSetAccess for it failed: %s (%d); it gets no access",
				 d, g->owner, sseg_cuda_error_name(r), r);
	}
}

int sseg_cuda_grant_access(const struct sseg_cuda *cu, const struct sseg_cuda_grant *g)
{
	int rc;

	/* CPU loads fault until the host is granted; the driver ignores the
	 * HOST_NUMA entry's id, which is the memory's node all the same. */
	rc = sseg_cuda_result(set_access(cu, g, CU_MEM_LOCATION_TYPE_HOST_NUMA, g->node),
			      "cuMemSetAccess(host)");
	if (rc)
		return rc;
	rc = sseg_cuda_no_peer_access(cu, set_access(cu, g, CU_MEM_LOCATION_TYPE_DEVICE, g->own),
				      "cuMemSetAccess(own device)", g->own, g->owner_uuid);
	if (rc)
		return rc;
	grant_others(cu, g);
	return 0;
}
