/* SPDX-License-Identifier: Apache-2.0 */
/* Devices, placement, allocation and access of the ascend backend; the
 * real probes over them are ascend_probe.c. */
#define _GNU_SOURCE /* syscall */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/ascend/ascend_device.h"
#include "os/numa.h"
#include "pages.h"
#include "segment_types.h"

int sseg_ascend_device_count(const struct sseg_acl *acl, uint32_t *count)
{
	*count = 0;
	return sseg_acl_result(acl->aclrtGetDeviceCount(count), "aclrtGetDeviceCount");
}

int sseg_ascend_device_open(const struct sseg_acl *acl, int ordinal, aclrtContext *ctx)
{
	aclrtContext saved = NULL;
	uint32_t count;
	int rc = sseg_ascend_device_count(acl, &count);

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

int sseg_ascend_current_node(void)
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
		*node = sseg_ascend_current_node();
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

/* ---- devices as the driver names them ---- */

/* ASCEND_RT_VISIBLE_DEVICES read as the runtime reads it, for runtimes
 * without aclrtGetLogicDevIdByUserDevId: the user's ordinal indexes the
 * list of logical ids. */
static int logic_from_env(int device, int32_t *logic)
{
	const char *env = getenv("ASCEND_RT_VISIBLE_DEVICES");
	char *end;
	long id = device;

	for (int i = 0; env && *env && i <= device; i++) {
		id = strtol(env, &end, 10);
		if (end == env || id < 0 || (*end && *end != ','))
			return sseg_err(-EINVAL, "ASCEND_RT_VISIBLE_DEVICES=\"%s\" is not a list of "
					"device ids", getenv("ASCEND_RT_VISIBLE_DEVICES"));
		if (i < device && !*end)
			return sseg_err(-ENODEV, "device=%d, but ASCEND_RT_VISIBLE_DEVICES lists "
					"%d device(s)", device, i + 1);
		env = *end ? end + 1 : end;
	}
	*logic = (int32_t)id;
	return 0;
}

int sseg_ascend_logic_device(const struct sseg_acl *acl, int device, int32_t *logic)
{
	if (!acl->aclrtGetLogicDevIdByUserDevId)
		return logic_from_env(device, logic);
	return sseg_acl_result(acl->aclrtGetLogicDevIdByUserDevId(device, logic),
			       "aclrtGetLogicDevIdByUserDevId");
}

/* One descriptor a call, for the device only (the reading of
 * devmm_svm.c's halMemSetAccess): the runtime hands aclrtMemAccessDesc
 * (24 bytes) to the driver, whose drv_mem_access_desc is 20, unconverted,
 * so a second descriptor is read 4 bytes early and refused; a host entry
 * is skipped on the owner and refused on a peer ("h2h map"), and the CPU
 * has the mapping from aclrtMapMem. */
int sseg_ascend_grant(const struct sseg_acl *acl, void *ptr, size_t size, int device)
{
	aclrtMemAccessDesc desc;
	int32_t logic = device;
	int rc = sseg_ascend_logic_device(acl, device, &logic);

	if (rc)
		return rc;
	memset(&desc, 0, sizeof(desc));
	desc.flags = ACL_RT_MEM_ACCESS_FLAGS_READWRITE;
	desc.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
	desc.location.id = (uint32_t)logic;
	rc = sseg_acl_result(acl->aclrtMemSetAccess(ptr, size, &desc, 1), "aclrtMemSetAccess");
	if (rc == -EOPNOTSUPP)
		return sseg_err_wrap(rc, "device %d (the driver's %d) cannot map ACL VMM host memory: "
				     "the driver maps it over HCCS only, not PCIe; backend=memfd "
				     "with SSEG_F_HOST_REGISTER serves such a device", device,
				     (int)logic);
	return rc;
}

/* ---- allocation ---- */

/* One way to allocate host memory: attribute and location. */
struct way {
	aclrtMemAttr attr;
	aclrtMemLocationType type;
	uint32_t id;
};

static void prop_of(const struct way *w, aclrtPhysicalMemProp *prop)
{
	memset(prop, 0, sizeof(*prop));
	prop->handleType = ACL_MEM_HANDLE_TYPE_NONE;
	prop->allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
	prop->memAttr = w->attr;
	prop->location.type = w->type;
	prop->location.id = w->id;
}

/* What public users of fabric-exported host memory try (hixl's
 * FabricMemTransferService::AllocatePhysicalMemory, Mooncake): P2P memory,
 * 1 GiB pages first, then 2 MiB; the caller chooses which (1 GiB pages
 * for a whole number of GiB where the probe of them passed, and 2 MiB
 * pages again where a step of theirs fails later). The given node, then
 * HOST with id 0, which the ACL layer accepts where HOST_NUMA is refused
 * (older drivers lack the feature the runtime checks,
 * ApiErrorDecorator::MallocPhysical); 1 GiB pages on the node only. A node
 * the caller chose is kept. */
static int ways_of(const struct sseg_ascend_want *want, struct way ways[2])
{
	aclrtMemAttr attr = want->huge ? ACL_DDR_MEM_HUGE : ACL_DDR_MEM_NORMAL;
	uint32_t node = (uint32_t)want->node;
	int n = 0;

	if (want->fabric)
		attr = want->huge1g ? ACL_MEM_P2P_HUGE1G : ACL_MEM_P2P_HUGE;
	ways[n++] = (struct way){ attr, ACL_MEM_LOCATION_TYPE_HOST_NUMA, node };
	if (!want->node_fixed && attr != ACL_MEM_P2P_HUGE1G)
		ways[n++] = (struct way){ attr, ACL_MEM_LOCATION_TYPE_HOST, 0 };
	return n;
}

/* *refused: the runtime said no (another way may do), not this library. */
static int try_way(const struct sseg_acl *acl, const struct way *w, uint64_t size,
		   struct sseg_ascend_memory *mem, aclrtDrvMemHandle *h, bool *refused)
{
	aclrtPhysicalMemProp prop;
	size_t gran = 0;
	int rc;

	prop_of(w, &prop);
	*refused = true;
	rc = sseg_acl_result(acl->aclrtMemGetAllocationGranularity(
				     &prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran),
			     "aclrtMemGetAllocationGranularity");
	if (rc)
		return rc;
	*refused = false;
	if (!sseg_is_pow2(gran) || gran < 4096 || gran > SSEG_1G)
		return sseg_err(-EINVAL, "the runtime's allocation granularity %zu is not a page size",
				gran);
	if (sseg_round_up(size, gran, &mem->size))
		return sseg_err(-EOVERFLOW, "size %llu overflows when padded to the granularity %zu",
				(unsigned long long)size, gran);
	rc = sseg_memory_fits(mem->size, "the segment (pinned host memory)");
	if (rc)
		return rc;
	mem->granularity = gran;
	mem->attr = w->attr;
	mem->node = w->type == ACL_MEM_LOCATION_TYPE_HOST_NUMA ? (int)w->id : -1;
	*refused = true;
	return sseg_acl_result(acl->aclrtMallocPhysical(h, mem->size, &prop, 0),
			       "aclrtMallocPhysical");
}

int sseg_ascend_allocate(const struct sseg_acl *acl, const struct sseg_ascend_want *want,
			 uint64_t size, struct sseg_ascend_memory *mem, aclrtDrvMemHandle *h)
{
	struct way ways[2];
	int n = ways_of(want, ways);
	bool refused = true;
	int rc = -ENOMEM;

	for (int i = 0; i < n; i++) {
		rc = try_way(acl, &ways[i], size, mem, h, &refused);
		if (!rc || !refused)
			break;
	}
	return rc;
}

const char *sseg_ascend_attr_name(aclrtMemAttr attr)
{
	switch ((int)attr) {
	case ACL_DDR_MEM_HUGE:
		return "ACL_DDR_MEM_HUGE";
	case ACL_DDR_MEM_NORMAL:
		return "ACL_DDR_MEM_NORMAL (the driver backs it with 2 MiB pages all the same)";
	case ACL_MEM_P2P_HUGE:
		return "ACL_MEM_P2P_HUGE";
	case ACL_MEM_P2P_HUGE1G:
		return "ACL_MEM_P2P_HUGE1G";
	default:
		return "an ACL attribute";
	}
}

/* Public users place fabric memory on node (physical device / 4) * 2
 * ("only 0 2 4 6 is available for fabric mem": four devices a node); where
 * the runtime cannot name the physical device, or the node is not this
 * host's, the node the thread runs on. */
int sseg_ascend_fabric_node(const struct sseg_acl *acl, int device)
{
	int32_t logic = device, phys = -1;
	uint64_t nodes = 0;
	int node;

	sseg_os_numa_nodes(&nodes);
	if (!acl->aclrtGetPhyDevIdByLogicDevId || sseg_ascend_logic_device(acl, device, &logic) ||
	    acl->aclrtGetPhyDevIdByLogicDevId(logic, &phys) != ACL_SUCCESS || phys < 0) {
		sseg_err_clear();
		return sseg_ascend_current_node();
	}
	node = phys / 4 * 2;
	return node < 64 && (nodes & (1ull << node)) ? node : sseg_ascend_current_node();
}
