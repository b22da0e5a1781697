/* SPDX-License-Identifier: Apache-2.0 */
/* Access to a mapping of HOST_NUMA memory. One cuMemSetAccess for the host
 * and every GPU fails as a whole where one entry is refused, and a host
 * entry mixed with device entries is what NCCL keeps apart. So: the host,
 * then the rank's own device, each in its own call; then each other device
 * with VMM, one call each. Host memory has no device to be a peer of: the
 * docs tie no peer rule to it (cuMemSetAccess lists INVALID_VALUE,
 * INVALID_DEVICE and NOT_SUPPORTED), and the 217 of NCCL issue 1838 on L4
 * and T4 boxes came from the import. A device left without access is
 * logged with the reason. */
#include <stdio.h>

#include "backend/cuda/cuda_device.h"

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

/* Why a device other than the rank's own cannot map VMM host memory, as
 * its attributes tell (141 unknown before driver 12.9: left to the call);
 * NULL when it can. */
static const char *no_host_vmm(const struct sseg_cuda *cu, CUdevice d)
{
	int vmm = sseg_cuda_attribute(cu, d,
				      CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
	int host = sseg_cuda_attribute(
		cu, d, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);

	if (vmm == 0)
		return "it has no VMM (attribute 102 is 0)";
	if (vmm < 0)
		return "the driver does not know its VMM attribute (102)";
	if (host == 0)
		return "it cannot map VMM host memory (attribute 141 is 0)";
	return NULL;
}

static void grant_other(const struct sseg_cuda *cu, const struct sseg_cuda_grant *g, CUdevice d)
{
	const char *why = no_host_vmm(cu, d);
	CUresult r;

	if (why) {
		sseg_log(SSEG_LOG_INFO, "segment '%s': device %d gets no access to its memory: %s",
			 g->name, d, why);
		return;
	}
	r = set_access(cu, g, CU_MEM_LOCATION_TYPE_DEVICE, d);
	if (r != CUDA_SUCCESS)
		sseg_log(SSEG_LOG_WARN,
			 "segment '%s': device %d gets no access to its memory: cuMemSetAccess "
			 "failed: %s (%d)",
			 g->name, d, sseg_cuda_error_name(r), r);
}

static void grant_others(const struct sseg_cuda *cu, const struct sseg_cuda_grant *g)
{
	int count = 0;
	CUresult r = cu->cuDeviceGetCount(&count);

	if (r != CUDA_SUCCESS) {
		sseg_log(SSEG_LOG_WARN,
			 "segment '%s': only device %d has access to its memory: "
			 "cuDeviceGetCount failed: %s (%d)",
			 g->name, g->own, sseg_cuda_error_name(r), r);
		return;
	}
	for (int d = 0; d < count; d++)
		if (d != g->own)
			grant_other(cu, g, d);
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
