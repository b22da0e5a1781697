/* SPDX-License-Identifier: Apache-2.0 */
/* The ascend backend: the segment is ACL VMM host memory (aclrtMallocPhysical
 * on a HOST_NUMA location, reserved, mapped and granted), pinned for the
 * NPU's DMA by construction. Peers import it by a fabric handle in the
 * owner's blob where the runtime can make one (A3), else by the in-server
 * handle, which the owner puts each local peer's pid on the trust list of
 * before the fd channel lets that peer import. The reference does not
 * support export and import in one process: ranks are processes. The steps
 * and stages are the VMM skeleton's (vmm.c); here are the runtime's calls. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend/ascend/ascend_device.h"
#include "backend/ascend/ascend_probe.h"
#include "backend/vmm.h"
#include "os/host.h"

struct ascend_state {
	struct sseg_vmm vmm;        /* first: the skeleton's part */
	const struct sseg_acl *acl;
	int device;
	aclrtDrvMemHandle handle;
	uint64_t shareable;         /* owner: the in-server handle */
	aclrtMemFabricHandle fabric_handle; /* owner: the fabric handle */
	int32_t bare_tgid;          /* owner: its pid as the runtime names it */
	bool huge1g;                /* owner: this attempt is on 1 GiB pages */
	bool huge1g_failed;         /* owner: an attempt on them failed: 2 MiB now */
};

_Static_assert(sizeof(aclrtMemFabricHandle) == SSEG_HANDLE_DATA_LEN,
	       "the fabric handle fills the blob's handle data");

static struct ascend_state *state(const struct sseg *seg)
{
	return seg->backend_state;
}

static struct ascend_state *ascend(struct sseg_vmm *v)
{
	return (struct ascend_state *)v;
}

static int ascend_probe(struct sseg_probe_backend *facts)
{
	const struct sseg_acl *acl;
	char why[64];
	int rc = sseg_ascend_usable(facts->reason, sizeof(facts->reason), &facts->ndevices);

	facts->host_register = 0;
	if (sseg_acl_get(&acl)) {
		sseg_err_clear();
		return rc;
	}
	snprintf(facts->driver, sizeof(facts->driver), "%s", acl->path);
	facts->driver_version = acl->version;
	facts->host_register = !sseg_ascend_hostreg_usable(why, sizeof(why));
	return rc;
}

/* The runtime's own page kinds: huge (ACL_DDR_MEM_HUGE) for auto, normal
 * (ACL_DDR_MEM_NORMAL) for base, which the driver backs with 2 MiB pages
 * all the same (devmm_vmm_mem_create). THP and the HugeTLB pool are the
 * kernel's mechanisms, which the runtime does not let a caller pick. */
static int ascend_choose_pages(enum sseg_pages req, uint64_t size, struct sseg_page_choice *c)
{
	memset(c, 0, sizeof(*c));
	if (req != SSEG_PAGES_AUTO && req != SSEG_PAGES_BASE)
		return sseg_err(-EOPNOTSUPP,
				"pages=%s: the ascend backend allocates ACL physical host memory, "
				"huge (pages=auto) or normal (pages=base), at the runtime's "
				"granularity; the kernel's THP and HugeTLB pool cannot be asked for",
				sseg_pages_name(req));
	c->pages = req;
	snprintf(c->reason, sizeof(c->reason), "ACL VMM pinned host memory, %s",
		 req == SSEG_PAGES_AUTO ? "huge pages"
					: "normal pages asked, which the driver backs with 2 MiB "
					  "pages all the same");
	(void)size;
	return 0;
}

static int ascend_check_opts(const struct sseg_opts *o)
{
	struct sseg_page_choice c;
	int rc = ascend_choose_pages(o->pages, 0, &c);

	if (rc)
		return rc;
	if (o->flags & SSEG_F_READONLY_PEERS)
		return sseg_err(-EOPNOTSUPP,
				"SSEG_F_READONLY_PEERS: ACL grants access to VMM memory read-write "
				"only (aclrtMemAccessDesc: READWRITE is the one flag supported)");
	if (o->numa == SSEG_NUMA_INTERLEAVE || o->numa == SSEG_NUMA_DEVICE_LOCAL)
		return sseg_err(-EOPNOTSUPP,
				"numa=%s is not available with the ascend backend: one allocation "
				"lives on one host node, and the ACL runtime documents no query of "
				"a device's host node; give the node",
				sseg_numa_name(o->numa));
	return 0;
}

/* A reference on this rank's device, and its default context. */
static int open_device(struct sseg *seg, struct sseg_vmm *v)
{
	struct ascend_state *st = ascend(v);
	int rc;

	st->device = seg->opts.device;
	rc = sseg_acl_get(&st->acl);
	if (!rc)
		rc = sseg_ascend_device_open(st->acl, st->device, &v->ctx);
	return rc;
}

static int enter(struct sseg_vmm *v, void **saved)
{
	return sseg_acl_enter(ascend(v)->acl, v->ctx, saved);
}

static void leave(struct sseg_vmm *v, void *saved)
{
	sseg_acl_leave(ascend(v)->acl, saved);
}

/* What allocate obtained, in the segment's terms. */
static void record_memory(struct sseg *seg, const struct sseg_ascend_memory *mem)
{
	char node[48];

	seg->mapped_size = mem->size;
	seg->page_size = mem->granularity;
	/* pages=base where the runtime gave huge pages: what was obtained. */
	seg->pages = mem->granularity == sseg_os_base_page_size() ? seg->opts.pages
								  : SSEG_PAGES_AUTO;
	if (seg->opts.numa == SSEG_NUMA_NONE)
		seg->opts.numa_node = mem->node;
	if (mem->node >= 0)
		snprintf(node, sizeof(node), "on node %d", mem->node);
	else
		snprintf(node, sizeof(node), "where the driver placed it (HOST_NUMA refused)");
	snprintf(seg->pages_reason, sizeof(seg->pages_reason),
		 "ACL VMM pinned host memory %s, %s, granularity %zu", node,
		 sseg_ascend_attr_name(mem->attr), mem->granularity);
}

/* The mapping covers the whole physical allocation (the reference:
 * aclrtMapMem's size is aclrtMallocPhysical's, its offset 0); the CPU has
 * it from aclrtMapMem (host memory). */
static int reserve(struct sseg *seg, struct sseg_vmm *v)
{
	void *ptr = NULL;
	int rc = sseg_acl_result(ascend(v)->acl->aclrtReserveMemAddress(&ptr, seg->mapped_size, 0,
									NULL, 0),
				 "aclrtReserveMemAddress");

	if (!rc)
		v->addr = (uint64_t)(uintptr_t)ptr;
	return rc;
}

static void *addr(const struct sseg_vmm *v)
{
	return (void *)(uintptr_t)v->addr;
}

static int map(struct sseg *seg, struct sseg_vmm *v)
{
	struct ascend_state *st = ascend(v);

	return sseg_acl_result(st->acl->aclrtMapMem(addr(v), seg->mapped_size, 0, st->handle, 0),
			       "aclrtMapMem");
}

static int grant(struct sseg *seg, struct sseg_vmm *v)
{
	return sseg_ascend_grant(ascend(v)->acl, addr(v), seg->mapped_size, ascend(v)->device);
}

/* One export per handle (the reference refuses a second). A fabric handle
 * goes to ranks on other hosts whose runtime pids the owner cannot learn,
 * so it is exported without pid validation: its 128 bytes are the
 * capability, as a CUDA fabric handle's are. */
static int export_owner(struct sseg *seg, struct sseg_vmm *v, int *fd)
{
	struct ascend_state *st = ascend(v);
	const struct sseg_acl *acl = st->acl;
	int rc;

	if (v->fabric)
		return sseg_acl_result(acl->aclrtMemExportToShareableHandleV2(
					       st->handle, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
					       ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &st->fabric_handle),
				       "aclrtMemExportToShareableHandleV2(fabric)");
	rc = sseg_acl_result(acl->aclrtDeviceGetBareTgid(&st->bare_tgid), "aclrtDeviceGetBareTgid");
	if (!rc)
		rc = sseg_acl_result(acl->aclrtMemExportToShareableHandle(
					     st->handle, ACL_MEM_HANDLE_TYPE_NONE,
					     ACL_RT_VMM_EXPORT_FLAG_DEFAULT, &st->shareable),
				     "aclrtMemExportToShareableHandle");
	return rc;
}

/* 1 GiB pages for a fabric segment of a whole number of GiB, as public
 * users allocate fabric memory, where the probe of them (a GiB allocated,
 * mapped, granted and exported) passed, and no attempt of this segment's
 * on them failed. */
static bool on_1g_pages(struct sseg *seg, struct ascend_state *st, int node)
{
	if (!st->vmm.fabric || st->huge1g_failed || seg->size < SSEG_1G || seg->size % SSEG_1G)
		return false;
	return sseg_ascend_huge1g_works(st->acl, st->device, node);
}

/* A fabric segment is P2P memory on the device's fabric node unless the
 * caller chose a node; the probe tries what the segment will do. */
static int allocate(struct sseg *seg, struct sseg_vmm *v)
{
	struct ascend_state *st = ascend(v);
	struct sseg_ascend_want want = { .huge = seg->opts.pages == SSEG_PAGES_AUTO,
					 .node_fixed = seg->opts.numa == SSEG_NUMA_NODE };
	struct sseg_ascend_memory mem;
	int node, fabric_node, rc;

	rc = sseg_ascend_placement(seg, &node);
	if (rc)
		return rc;
	fabric_node = want.node_fixed ? node : sseg_ascend_fabric_node(st->acl, st->device);
	v->fabric = sseg_ascend_fabric_works(st->acl, st->device, fabric_node);
	want.fabric = v->fabric;
	want.node = v->fabric ? fabric_node : node;
	want.huge1g = st->huge1g = on_1g_pages(seg, st, want.node);
	rc = sseg_ascend_allocate(st->acl, &want, seg->size, &mem, &st->handle);
	if (!rc)
		record_memory(seg, &mem);
	return rc;
}

/* A step on 1 GiB pages failed where their probe passed (the pool ran
 * short since, a step the probe's GiB did not meet): once more on 2 MiB
 * pages, as public users fall back. */
static bool allocate_again(struct sseg *seg, struct sseg_vmm *v)
{
	struct ascend_state *st = ascend(v);

	if (!st->huge1g)
		return false;
	st->huge1g = false;
	st->huge1g_failed = true;
	sseg_log(SSEG_LOG_WARN, "segment '%s': 1 GiB pages (ACL_MEM_P2P_HUGE1G) failed: %s; "
		 "trying again on 2 MiB pages (ACL_MEM_P2P_HUGE)", seg->name, sseg_last_error());
	return true;
}

/* "TGID" and the peer's runtime pid, in its blob's handle data: the name
 * the owner must put on the in-server handle's trust list. */
#define TGID_MAGIC 0x44494754u

/* Every peer says its runtime pid (aclrtDeviceGetBareTgid: the host's pid
 * inside a container), which the owner's PID namespace may not show. */
static int ascend_peer_handle(struct sseg *seg, struct sseg_blob_handle *h)
{
	struct ascend_state *st = state(seg);
	void *saved;
	int32_t tgid = 0;
	int rc = sseg_vmm_enter(&st->vmm, &saved);

	if (rc)
		return rc;
	rc = sseg_acl_result(st->acl->aclrtDeviceGetBareTgid(&tgid), "aclrtDeviceGetBareTgid");
	sseg_vmm_leave(&st->vmm, saved);
	if (rc)
		return rc;
	sseg_put32(h->data, TGID_MAGIC);
	sseg_put32(h->data + 4, (uint32_t)tgid);
	return 0;
}

/* The runtime pid a peer's blob carries; 0 when it carries none. */
static int32_t peer_tgid(const struct sseg_blob *peer)
{
	if (sseg_get32(peer->handle.data) != TGID_MAGIC)
		return 0;
	return (int32_t)sseg_get32(peer->handle.data + 4);
}

static int describe_handle(struct sseg *seg, struct sseg_vmm *v, struct sseg_blob_handle *h)
{
	struct ascend_state *st = ascend(v);

	if (!v->fabric) {
		sseg_put64(h->data, st->shareable);
		return 0;
	}
	h->kind = SSEG_HANDLE_FABRIC;
	memcpy(h->data, &st->fabric_handle, sizeof(st->fabric_handle));
	return 0;
}

/* Who may import is the pid the runtime names a process by
 * (aclrtDeviceGetBareTgid: the host's pid inside a container). Each peer's
 * blob carries its own (peer_handle); only a blob without it (a peer of an
 * older build) falls back to the pid the owner sees (SO_PEERCRED), which
 * is the runtime's only when the owner runs where the runtime's pids are
 * its own: otherwise the owner refuses instead of trusting a wrong pid. */
static int check_nameable(const struct sseg *seg, const struct sseg_blob *peer, pid_t pid)
{
	const struct ascend_state *st = state(seg);

	if (peer_tgid(peer) > 0)
		return 0;
	if (st->bare_tgid != (int32_t)getpid())
		return sseg_err(-EOPNOTSUPP,
				"rank %u cannot be put on the trust list of the in-server handle: "
				"the ACL runtime names this owner pid %d (aclrtDeviceGetBareTgid) "
				"where it sees itself as pid %d (a container's PID namespace), and "
				"the peers' runtime pids do not reach the owner; a fabric handle "
				"(A3) needs no trust list",
				peer->rank, st->bare_tgid, (int)getpid());
	if (pid <= 0)
		return sseg_err(-EPERM, "rank %u (pid %u) runs outside the owner's PID namespace: "
				"its pid cannot be put on the trust list", peer->rank, peer->pid);
	return 0;
}

/* The kernel adds each pid given to the trust list (devmm_set_pids; one
 * already there gets a new time), so each peer is admitted on its own. An
 * entry set before its process started is refused at import: the peer
 * says its pid only once it runs. */
static int admit_peer(struct sseg *seg, const struct sseg_blob *peer, pid_t pid)
{
	struct ascend_state *st = state(seg);
	void *saved;
	int32_t trusted;
	int rc = check_nameable(seg, peer, pid);

	if (rc)
		return rc;
	trusted = peer_tgid(peer) > 0 ? peer_tgid(peer) : (int32_t)pid;
	rc = sseg_vmm_enter(&st->vmm, &saved);
	if (rc)
		return rc;
	rc = sseg_acl_result(st->acl->aclrtMemSetPidToShareableHandle(st->shareable, &trusted, 1),
			     "aclrtMemSetPidToShareableHandle");
	sseg_vmm_leave(&st->vmm, saved);
	return rc;
}

/* The V1 import enables P2P with the exporter's physical device, which for
 * host memory is the host's id (ApiImpl::ImportFromShareableHandle); V2
 * with the default type skips that for the host's memory
 * (ApiImpl::ImportFromShareableHandleV2), and imports on the current
 * device. V1 stays for runtimes without V2. */
static int import_in_server(struct ascend_state *st, uint64_t shareable)
{
	if (st->acl->fabric)
		return sseg_acl_result(st->acl->aclrtMemImportFromShareableHandleV2(
					       &shareable, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, 0,
					       &st->handle),
				       "aclrtMemImportFromShareableHandleV2(default)");
	return sseg_acl_result(st->acl->aclrtMemImportFromShareableHandle(shareable, st->device,
									  &st->handle),
			       "aclrtMemImportFromShareableHandle");
}

static int import(struct sseg *seg, struct sseg_vmm *v, const struct sseg_blob *owner, int fd)
{
	struct ascend_state *st = ascend(v);
	aclrtMemFabricHandle fabric;

	v->fabric = owner->handle.kind == SSEG_HANDLE_FABRIC;
	if (!v->fabric)
		return import_in_server(st, sseg_get64(owner->handle.data));
	if (!st->acl->fabric)
		return sseg_err(-EOPNOTSUPP, "owner rank %u exported a fabric handle, and this "
				"ACL runtime has no aclrtMemImportFromShareableHandleV2",
				owner->rank);
	memcpy(&fabric, owner->handle.data, sizeof(fabric));
	return sseg_acl_result(st->acl->aclrtMemImportFromShareableHandleV2(
				       &fabric, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 0, &st->handle),
			       "aclrtMemImportFromShareableHandleV2(fabric)");
}

static int unmap(struct sseg_vmm *v)
{
	return sseg_acl_result(ascend(v)->acl->aclrtUnmapMem(addr(v)), "aclrtUnmapMem");
}

static int free_address(struct sseg_vmm *v)
{
	return sseg_acl_result(ascend(v)->acl->aclrtReleaseMemAddress(addr(v)),
			       "aclrtReleaseMemAddress");
}

static int free_handle(struct sseg_vmm *v)
{
	return sseg_acl_result(ascend(v)->acl->aclrtFreePhysical(ascend(v)->handle),
			       "aclrtFreePhysical");
}

static int close_device(struct sseg *seg, struct sseg_vmm *v)
{
	return sseg_acl_result(ascend(v)->acl->aclrtResetDevice(ascend(v)->device),
			       "aclrtResetDevice");
}

/* The reference's release order: unmap, free the physical memory, release
 * the address range. */
static const struct sseg_vmm_driver ascend_vmm = {
	.state_size = sizeof(struct ascend_state),
	.local_type = "acl-trustlist",
	.fabric_type = "acl-fabric",
	.handle_noun = "the physical memory handle",
	.handle_before_address = true,
	.open = open_device,
	.enter = enter,
	.leave = leave,
	.allocate = allocate,
	.export_owner = export_owner,
	.allocate_again = allocate_again,
	.describe_handle = describe_handle,
	.import = import,
	.admit = admit_peer,
	.reserve = reserve,
	.map = map,
	.grant = grant,
	.unmap = unmap,
	.free_address = free_address,
	.release_handle = free_handle,
	.close = close_device,
};

/* What this backend reads that releases up to 0.2 spelled SSEG_...:
 * SHAREDSEG_ACL_LIBRARY (src/driver/acl.c) and SHAREDSEG_ASCEND_FABRIC
 * (ascend_probe.c). */
static const char *const renamed_env[] = { "ACL_LIBRARY", "ASCEND_FABRIC", NULL };

const struct sseg_backend_ops sseg_ascend_ops = {
	.kind = SSEG_BACKEND_ASCEND,
	.name = "ascend",
	.renamed_env = renamed_env,
	.caps = SSEG_CAP_PINNED | SSEG_CAP_DEVICES | SSEG_CAP_FABRIC,
	.hostreg = &sseg_ascend_hostreg_ops,
	.vmm = &ascend_vmm,
	.probe = ascend_probe,
	.probe_device = sseg_ascend_probe_device,
	.choose_pages = ascend_choose_pages,
	.check_opts = ascend_check_opts,
	SSEG_VMM_OPS,
	.peer_handle = ascend_peer_handle,
};
