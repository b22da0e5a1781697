/* SPDX-License-Identifier: Apache-2.0 */
/* Physical allocations: each is a memfd whose first page is a header that
 * other processes read (what was exported, as what, and who may import),
 * the data after it. An in-server shareable handle names the exporter's
 * pid and memfd number (and a nonce), a fabric handle the same in 128
 * bytes, so an importer on this host opens /proc/<pid>/fd/<n> while the
 * exporter holds the allocation, and not after it freed it. */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fake_acl.h"
#include "fake/kit/memfd.h"

#define HEADER_MAGIC "SSEGACL1"
#define FABRIC_MAGIC "SSEGACLF"

struct block_header {
	char magic[8];
	uint64_t nonce;
	uint64_t size;
	uint64_t granule;
	uint64_t shareable;  /* the in-server handle it was exported as; 0 */
	uint32_t exporter;   /* the exporting pid; 0: not exported */
	uint32_t share_type; /* aclrtMemSharedHandleType exported as */
	uint32_t validation; /* 1: only pids on the trust list import */
	uint32_t ntrusted;
	int32_t trusted[FAKE_MAX_TRUSTED];
	uint64_t set_ns[FAKE_MAX_TRUSTED]; /* when each pid was (last) set, boot time */
};
_Static_assert(sizeof(struct block_header) <= FAKE_HEADER, "the header fits its page");

struct fabric_blob {
	char magic[8];
	uint32_t pid;
	int32_t fd;
	uint64_t nonce;
};
_Static_assert(sizeof(struct fabric_blob) <= sizeof(aclrtMemFabricHandle), "fits the handle");

/* The in-server handle: fd in bits 0-19, pid in 20-41, nonce above. */
#define FD_BITS 20
#define PID_BITS 22

static int header_read(int fd, struct block_header *h)
{
	return pread(fd, h, sizeof(*h), 0) == (ssize_t)sizeof(*h) &&
	       !memcmp(h->magic, HEADER_MAGIC, sizeof(h->magic)) ? 0 : -1;
}

static int header_write(int fd, const struct block_header *h)
{
	return pwrite(fd, h, sizeof(*h), 0) == (ssize_t)sizeof(*h) ? 0 : -1;
}

static int node_exists(uint32_t id)
{
	char path[64];

	if (access("/sys/devices/system/node", F_OK) != 0)
		return id == 0; /* a kernel without NUMA: node 0 only */
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%u", id);
	return access(path, F_OK) == 0;
}

/* The runtime converts HOST_NUMA only where the driver has the feature
 * (ApiErrorDecorator::MallocPhysical, FEATURE_SVM_VMM_NORMAL_GRANULARITY);
 * HOST takes id 0 only (devmm_mem_create_para_check). */
static aclError check_location(const aclrtMemLocation *loc, int allocating)
{
	switch ((int)loc->type) {
	case ACL_MEM_LOCATION_TYPE_HOST_NUMA:
		if (allocating && !fake.cfg.host_numa)
			return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
					   "driver does not support the alloc mem via numa id "
					   "feature (host_numa=0)");
		return node_exists(loc->id) ? ACL_SUCCESS
					    : fake_refuse(ACL_ERROR_RT_PARAM_INVALID,
							  "host NUMA node %u does not exist", loc->id);
	case ACL_MEM_LOCATION_TYPE_HOST:
		return loc->id == 0 ? ACL_SUCCESS
				    : fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
						  "devid must be 0 in host side");
	case ACL_MEM_LOCATION_TYPE_DEVICE:
		return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
				   "this fake emulates host memory only");
	default:
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID, "location type %d",
				   (int)loc->type);
	}
}

static int is_p2p(aclrtMemAttr attr)
{
	return attr == ACL_DDR_MEM_P2P_HUGE || attr == ACL_DDR_MEM_P2P_NORMAL ||
	       attr == ACL_MEM_P2P_NORMAL || attr == ACL_MEM_P2P_HUGE ||
	       attr == ACL_MEM_P2P_HUGE1G;
}

static int is_huge1g(aclrtMemAttr attr)
{
	return attr == ACL_MEM_HUGE1G || attr == ACL_MEM_P2P_HUGE1G;
}

/* The host attributes of memAttrHandlers (memory.cpp); 1 GiB host pages
 * not with huge1g=0 (the reference: HUGE1G is for devices; public users
 * try it on the host and fall back), and refused at a later step with
 * huge1g=map, access or export. */
static aclError check_attr(aclrtMemAttr attr)
{
	switch ((int)attr) {
	case ACL_DDR_MEM_HUGE:
	case ACL_DDR_MEM_NORMAL:
	case ACL_DDR_MEM_P2P_HUGE:
	case ACL_DDR_MEM_P2P_NORMAL:
	case ACL_MEM_NORMAL:
	case ACL_MEM_HUGE:
	case ACL_MEM_P2P_NORMAL:
	case ACL_MEM_P2P_HUGE:
		return ACL_SUCCESS;
	case ACL_MEM_HUGE1G:
	case ACL_MEM_P2P_HUGE1G:
		return fake.cfg.huge1g ? ACL_SUCCESS
				       : fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
						     "1 GiB host pages are not supported (huge1g=0)");
	default:
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID, "memAttr %d is not emulated",
				   (int)attr);
	}
}

static aclError check_prop(const aclrtPhysicalMemProp *prop, int allocating)
{
	aclError rc;

	if (!prop)
		return fake_refuse(ACL_ERROR_INVALID_PARAM, "prop is NULL");
	if (prop->handleType != ACL_MEM_HANDLE_TYPE_NONE ||
	    prop->allocationType != ACL_MEM_ALLOCATION_TYPE_PINNED || prop->reserve)
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID,
				   "handleType must be NONE, allocationType PINNED, reserve 0");
	rc = check_attr(prop->memAttr);
	return rc == ACL_SUCCESS ? check_location(&prop->location, allocating) : rc;
}

/* Host memory from ACL is 2 MiB pages whatever the page type: the driver
 * answers the page size only for the runtime's own module on the host id
 * (halMemGetAllocationGranularity) and creates huge pages otherwise
 * (devmm_vmm_mem_create). */
static size_t granule_of(const aclrtPhysicalMemProp *prop)
{
	return is_huge1g(prop->memAttr) ? (size_t)1 << 30 : fake.cfg.granularity;
}

FK_API aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
						 aclrtMemGranularityOptions option,
						 size_t *granularity)
{
	aclError rc = fake_enter(FE_aclrtMemGetAllocationGranularity);

	if (rc == ACL_SUCCESS && (!granularity || (option != 0 && option != 1)))
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "granularity NULL or option %d",
				 (int)option);
	if (rc == ACL_SUCCESS)
		rc = check_prop(prop, 0);
	if (rc == ACL_SUCCESS)
		*granularity = granule_of(prop);
	return fake_leave(rc);
}

/* Takes ownership of fd, also on failure. */
static aclError add_handle(int fd, const struct block_header *h, enum fake_origin origin,
			   uint64_t shareable, aclrtDrvMemHandle *out)
{
	struct fake_handle *slot = fk_free_slot(FK_TABLE(fake.handles));

	if (!slot) {
		close(fd);
		return fake_refuse(ACL_ERROR_RT_MEMORY_ALLOCATION, "too many handles");
	}
	*slot = (struct fake_handle){ .id = ++fake.handle_seq, .fd = fd, .size = h->size,
				      .granule = h->granule, .origin = origin,
				      .shareable = shareable, .nonce = h->nonce };
	*out = (aclrtDrvMemHandle)slot->id;
	return ACL_SUCCESS;
}

static aclError malloc_physical(aclrtDrvMemHandle *handle, size_t size,
				const aclrtPhysicalMemProp *prop)
{
	struct block_header h = { 0 };
	char name[64];
	aclError rc;
	int fd;

	/* The magic is 8 bytes with no NUL: copied, not a string initializer. */
	memcpy(h.magic, HEADER_MAGIC, sizeof(h.magic));
	h.nonce = fk_nonce();
	h.size = size;
	h.granule = granule_of(prop);
	if (!size || size % h.granule)
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID,
				   "size %zu is not a multiple of the granularity %llu", size,
				   (unsigned long long)h.granule);
	snprintf(name, sizeof(name), "sseg-fake-acl-%016llx", (unsigned long long)h.nonce);
	fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return fake_refuse(ACL_ERROR_RT_MEMORY_ALLOCATION, "memfd_create: %s",
				   strerror(errno));
	if (ftruncate(fd, (off_t)(FAKE_HEADER + size)) || header_write(fd, &h)) {
		close(fd);
		return fake_refuse(ACL_ERROR_RT_MEMORY_ALLOCATION, "cannot size %zu bytes", size);
	}
	rc = add_handle(fd, &h, FAKE_MALLOCED, 0, handle);
	if (rc == ACL_SUCCESS) {
		fake_handle_find((uintptr_t)*handle)->p2p = is_p2p(prop->memAttr);
		fake_handle_find((uintptr_t)*handle)->node = prop->location.id;
	}
	return rc;
}

FK_API aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size,
				    const aclrtPhysicalMemProp *prop, uint64_t flags)
{
	aclError rc = fake_enter_ctx(FE_aclrtMallocPhysical);

	if (rc == ACL_SUCCESS && (!handle || flags))
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "handle NULL or flags not 0");
	if (rc == ACL_SUCCESS)
		rc = check_prop(prop, 1);
	if (rc == ACL_SUCCESS)
		rc = malloc_physical(handle, size, prop);
	return fake_leave(rc);
}

/* The handle goes (an import repeated, one reference of it); mappings
 * keep the memory, as the reference says. */
FK_API aclError aclrtFreePhysical(aclrtDrvMemHandle handle)
{
	aclError rc = fake_enter_ctx(FE_aclrtFreePhysical);
	struct fake_handle *h = NULL;

	if (rc == ACL_SUCCESS && !(h = fake_handle_find((uintptr_t)handle))) {
		fk_bug("aclrtFreePhysical(%p) of an unknown or freed handle", handle);
		rc = fake_refuse(ACL_ERROR_RT_INVALID_HANDLE, "unknown handle %p", handle);
	}
	if (h && h->refs > 1) {
		h->refs--; /* an import repeated: one reference of it */
	} else if (h) {
		close(h->fd);
		memset(h, 0, sizeof(*h));
	}
	return fake_leave(rc);
}

/* ---- export ---- */

/* One export per handle, of memory this process allocated. */
static aclError exportable(aclrtDrvMemHandle handle, uint64_t flags, struct fake_handle **out)
{
	struct fake_handle *h = fake_handle_find((uintptr_t)handle);

	if (!h)
		return fake_refuse(ACL_ERROR_RT_INVALID_HANDLE, "unknown handle %p", handle);
	if (h->origin != FAKE_MALLOCED)
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID,
				   "only memory aclrtMallocPhysical allocated in this process is "
				   "exported");
	if (h->exported)
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID,
				   "exported already: one shareable handle per handle");
	if (flags > ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
		return fake_refuse(ACL_ERROR_INVALID_PARAM, "flags %llu", (unsigned long long)flags);
	*out = h;
	return fake_huge1g_step(h, FAKE_HUGE1G_EXPORT, "export");
}

static aclError mark_exported(struct fake_handle *h, int type, uint64_t flags, uint64_t shareable)
{
	struct block_header hdr;

	if (header_read(h->fd, &hdr))
		return fake_refuse(ACL_ERROR_RT_INTERNAL_ERROR, "header unreadable");
	hdr.exporter = (uint32_t)getpid();
	hdr.share_type = (uint32_t)type;
	hdr.validation = !(flags & ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
	hdr.ntrusted = 0;
	hdr.shareable = shareable;
	if (header_write(h->fd, &hdr))
		return fake_refuse(ACL_ERROR_RT_INTERNAL_ERROR, "header unwritable");
	h->exported = type;
	h->shareable = shareable;
	return ACL_SUCCESS;
}

static aclError export_default(struct fake_handle *h, uint64_t flags, uint64_t *out)
{
	uint64_t pid = (uint64_t)getpid(), shareable;
	aclError rc;

	if ((uint64_t)h->fd >> FD_BITS || pid >> PID_BITS)
		return fake_refuse(ACL_ERROR_RT_INTERNAL_ERROR, "fd or pid too large to encode");
	shareable = h->nonce << (FD_BITS + PID_BITS) | pid << FD_BITS | (uint64_t)h->fd;
	rc = mark_exported(h, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, flags, shareable);
	if (rc == ACL_SUCCESS)
		*out = shareable;
	return rc;
}

static aclError export_fabric(struct fake_handle *h, uint64_t flags, aclrtMemFabricHandle *out)
{
	struct fabric_blob blob = { .pid = (uint32_t)getpid(),
				    .fd = h->fd, .nonce = h->nonce };
	aclError rc;

	memcpy(blob.magic, FABRIC_MAGIC, sizeof(blob.magic));

	if (!fake.cfg.fabric)
		return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
				   "fabric handles: Atlas A3 only (fabric=0)");
	/* Public users allocate it P2P on an even node ("only 0 2 4 6 is
	 * available for fabric mem"); the driver takes P2P host memory from
	 * its fabric pages (svm_master_phy_allocator.c). */
	if (!h->p2p || h->node % 2)
		return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
				   "not fabric memory: host memory is exported as a fabric handle "
				   "when allocated with a P2P attribute on node 0, 2, 4 or 6 "
				   "(node %u, p2p %d)", h->node, h->p2p);
	rc = mark_exported(h, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, flags, 0);
	if (rc == ACL_SUCCESS) {
		memset(out, 0, sizeof(*out));
		memcpy(out->data, &blob, sizeof(blob));
	}
	return rc;
}

FK_API aclError aclrtMemExportToShareableHandle(aclrtDrvMemHandle handle,
						aclrtMemHandleType handleType, uint64_t flags,
						uint64_t *shareableHandle)
{
	aclError rc = fake_enter_ctx(FE_aclrtMemExportToShareableHandle);
	struct fake_handle *h = NULL;

	if (rc == ACL_SUCCESS && (!shareableHandle || handleType != ACL_MEM_HANDLE_TYPE_NONE))
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "shareableHandle NULL or handleType not NONE");
	if (rc == ACL_SUCCESS)
		rc = exportable(handle, flags, &h);
	if (rc == ACL_SUCCESS)
		rc = export_default(h, flags, shareableHandle);
	return fake_leave(rc);
}

FK_API aclError aclrtMemExportToShareableHandleV2(aclrtDrvMemHandle handle, uint64_t flags,
						  aclrtMemSharedHandleType shareType,
						  void *shareableHandle)
{
	aclError rc = fake_enter_ctx(FE_aclrtMemExportToShareableHandleV2);
	struct fake_handle *h = NULL;

	if (rc == ACL_SUCCESS && !shareableHandle)
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "shareableHandle is NULL");
	if (rc == ACL_SUCCESS)
		rc = exportable(handle, flags, &h);
	if (rc == ACL_SUCCESS && shareType == ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT)
		rc = export_default(h, flags, shareableHandle);
	else if (rc == ACL_SUCCESS && shareType == ACL_MEM_SHARE_HANDLE_TYPE_FABRIC)
		rc = export_fabric(h, flags, shareableHandle);
	else if (rc == ACL_SUCCESS)
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "shareType %d", (int)shareType);
	return fake_leave(rc);
}

/* ---- the trust list ---- */

static struct fake_handle *exported_here(uint64_t shareable)
{
	for (int i = 0; shareable && i < FAKE_MAX_HANDLES; i++)
		if (fake.handles[i].id && fake.handles[i].exported == ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT &&
		    fake.handles[i].shareable == shareable)
			return &fake.handles[i];
	return NULL;
}

/* ns since boot: the clock the kernel's task start times run on. */
static uint64_t boot_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* This process's start, rounded down to the clock tick /proc gives it in. */
static uint64_t process_start_ns(void)
{
	char buf[1024], *p;
	unsigned long long ticks = 0;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu", &ticks) != 1)
		return 0;
	return ticks * (1000000000u / (uint64_t)sysconf(_SC_CLK_TCK));
}

/* devmm_set_pids: each pid is added (one already there gets a new time);
 * only the exporter sets pids (-EACCES), and not on a handle exported
 * without pid validation (-EPERM). */
static aclError add_pids(struct block_header *hdr, const int32_t *pid, size_t n)
{
	uint64_t now = boot_ns();
	uint32_t j;

	if (hdr->exporter != (uint32_t)getpid())
		return fake_refuse(ACL_ERROR_RT_NO_PERMISSION,
				   "not the exporting process (pid %u), can not set pid",
				   hdr->exporter);
	if (!hdr->validation)
		return fake_refuse(ACL_ERROR_RT_NO_PERMISSION,
				   "exported without pid validation: no trust list to set");
	for (size_t i = 0; i < n; i++) {
		for (j = 0; j < hdr->ntrusted && hdr->trusted[j] != pid[i]; j++)
			;
		if (j == hdr->ntrusted && hdr->ntrusted == FAKE_MAX_TRUSTED)
			return fake_refuse(ACL_ERROR_INVALID_PARAM, "the trust list is full");
		if (j == hdr->ntrusted)
			hdr->trusted[hdr->ntrusted++] = pid[i];
		hdr->set_ns[j] = now;
	}
	return ACL_SUCCESS;
}

static aclError open_exported(uint32_t pid, int32_t fd, int *out, struct block_header *hdr);

/* The kernel finds a shareable handle by its id, whoever asks
 * (devmm_ioctl_mem_set_pid): here by the exporter's pid and fd in it.
 * *fd is this process's own (*opened 0: not to close) or a new one. */
static aclError shared_by_id(uint64_t shareable, int *fd, int *opened)
{
	struct fake_handle *h = exported_here(shareable);
	struct block_header hdr;
	aclError rc;

	*opened = 0;
	if (h) {
		*fd = h->fd;
		return ACL_SUCCESS;
	}
	rc = open_exported((uint32_t)(shareable >> FD_BITS & ((1u << PID_BITS) - 1)),
			   (int32_t)(shareable & ((1u << FD_BITS) - 1)), fd, &hdr);
	if (rc == ACL_SUCCESS && hdr.shareable != shareable) {
		close(*fd);
		rc = ACL_ERROR_RT_PARAM_INVALID;
	}
	if (rc != ACL_SUCCESS)
		return fake_refuse(ACL_ERROR_RT_PARAM_INVALID, "%#llx is no exported handle",
				   (unsigned long long)shareable);
	*opened = 1;
	return ACL_SUCCESS;
}

FK_API aclError aclrtMemSetPidToShareableHandle(uint64_t shareableHandle, int32_t *pid,
						size_t pidNum)
{
	aclError rc = fake_enter_ctx(FE_aclrtMemSetPidToShareableHandle);
	struct block_header hdr;
	int fd = -1, opened = 0;

	if (rc == ACL_SUCCESS && (!pid || !pidNum || pidNum > FAKE_MAX_TRUSTED))
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "pid NULL or pidNum %zu", pidNum);
	if (rc == ACL_SUCCESS)
		rc = shared_by_id(shareableHandle, &fd, &opened);
	if (rc == ACL_SUCCESS && header_read(fd, &hdr))
		rc = fake_refuse(ACL_ERROR_RT_INTERNAL_ERROR, "header unreadable");
	if (rc == ACL_SUCCESS)
		rc = add_pids(&hdr, pid, pidNum);
	if (rc == ACL_SUCCESS && header_write(fd, &hdr))
		rc = fake_refuse(ACL_ERROR_RT_INTERNAL_ERROR, "header unwritable");
	if (opened)
		close(fd);
	return fake_leave(rc);
}

int fake_trusted_of(uint64_t shareable, int32_t *pids, int max)
{
	struct fake_handle *h = exported_here(shareable);
	struct block_header hdr;

	if (!h || header_read(h->fd, &hdr))
		return -ENOENT;
	for (uint32_t i = 0; i < hdr.ntrusted && (int)i < max; i++)
		pids[i] = hdr.trusted[i];
	return (int)hdr.ntrusted;
}

/* ---- import ---- */

static aclError open_exported(uint32_t pid, int32_t fd, int *out, struct block_header *hdr)
{
	*out = fk_open_exported(pid, fd);
	if (*out < 0)
		return fake_refuse(ACL_ERROR_RT_INVALID_HANDLE,
				   "the exporter (pid %u) no longer holds the memory: %s", pid,
				   strerror(errno));
	if (header_read(*out, hdr) == 0)
		return ACL_SUCCESS;
	close(*out);
	return fake_refuse(ACL_ERROR_RT_INVALID_HANDLE, "not an allocation of this runtime");
}

/* The entry naming this process: set, and set after it started
 * (devmm_pid_set_share_status: "Time check fail" otherwise). */
static aclError trusted_entry(const struct block_header *hdr)
{
	int32_t me = fake_bare_tgid();

	for (uint32_t i = 0; i < hdr->ntrusted && i < FAKE_MAX_TRUSTED; i++)
		if (hdr->trusted[i] == me)
			return hdr->set_ns[i] >= process_start_ns()
				       ? ACL_SUCCESS
				       : fake_refuse(ACL_ERROR_RT_NO_PERMISSION,
						     "pid %d was put on the trust list before this "
						     "process started (time check)", (int)me);
	return fake_refuse(ACL_ERROR_RT_NO_PERMISSION,
			   "pid %d is not on the trust list of the exporter (pid %u)", (int)me,
			   hdr->exporter);
}

/* A repeated import in a process answers the same handle with one more
 * reference (devmm_import_record_create_and_get). */
static struct fake_handle *imported_here(uint64_t nonce)
{
	for (int i = 0; i < FAKE_MAX_HANDLES; i++)
		if (fake.handles[i].id && fake.handles[i].origin == FAKE_IMPORTED &&
		    fake.handles[i].nonce == nonce)
			return &fake.handles[i];
	return NULL;
}

/* The rules of an import, the exporter's header in hand. The kernel
 * refuses the exporting process only for memory of the importing device
 * (devmm_ioctl_mem_import_local_server): never for host memory. */
static aclError importable(const struct block_header *hdr)
{
	if (hdr->validation)
		return trusted_entry(hdr);
	return ACL_SUCCESS;
}

/* Takes ownership of fd: a second import of one allocation is the first's
 * handle. */
static aclError add_import(int fd, const struct block_header *hdr, uint64_t shareable,
			   aclrtDrvMemHandle *out)
{
	struct fake_handle *again = imported_here(hdr->nonce);
	aclError rc;

	if (again) {
		close(fd);
		again->refs++;
		*out = (aclrtDrvMemHandle)again->id;
		return ACL_SUCCESS;
	}
	rc = add_handle(fd, hdr, FAKE_IMPORTED, shareable, out);
	if (rc == ACL_SUCCESS)
		fake_handle_find((uintptr_t)*out)->refs = 1;
	return rc;
}

/* ApiImpl::ImportFromShareableHandle calls EnableP2PWithOtherDevice with
 * the exporter's physical device, which for host memory is the host's id:
 * no device (V2 skips it for the host). Older runtimes go straight to the
 * driver (v1_host_import=1). */
static aclError import_default(uint64_t shareable, int v1, aclrtDrvMemHandle *handle)
{
	uint32_t pid = (uint32_t)(shareable >> FD_BITS & ((1u << PID_BITS) - 1));
	int32_t fd = (int32_t)(shareable & ((1u << FD_BITS) - 1));
	struct block_header hdr;
	int mine;
	aclError rc = open_exported(pid, fd, &mine, &hdr);

	if (rc != ACL_SUCCESS)
		return rc;
	if (!hdr.exporter || hdr.share_type != ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT ||
	    hdr.shareable != shareable)
		rc = fake_refuse(ACL_ERROR_RT_INVALID_HANDLE, "%#llx was not exported (freed?)",
				 (unsigned long long)shareable);
	if (rc == ACL_SUCCESS && v1 && !fake.cfg.v1_host_import)
		rc = fake_refuse(ACL_ERROR_RT_DRV_INTERNAL_ERROR,
				 "EnableP2PWithOtherDevice(host id): the exporter's memory is the "
				 "host's, which is no device (v1_host_import=0)");
	if (rc == ACL_SUCCESS)
		rc = importable(&hdr);
	if (rc != ACL_SUCCESS) {
		close(mine);
		return rc;
	}
	return add_import(mine, &hdr, shareable, handle);
}

static aclError import_fabric(const aclrtMemFabricHandle *in, aclrtDrvMemHandle *handle)
{
	struct block_header hdr;
	struct fabric_blob blob;
	int mine;
	aclError rc;

	memcpy(&blob, in->data, sizeof(blob));
	if (!fake.cfg.fabric)
		return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "fabric handles (fabric=0)");
	if (memcmp(blob.magic, FABRIC_MAGIC, sizeof(blob.magic)))
		return fake_refuse(ACL_ERROR_RT_INVALID_HANDLE, "not a fabric handle");
	rc = open_exported(blob.pid, blob.fd, &mine, &hdr);
	if (rc != ACL_SUCCESS)
		return rc;
	if (hdr.nonce != blob.nonce || hdr.share_type != ACL_MEM_SHARE_HANDLE_TYPE_FABRIC)
		rc = fake_refuse(ACL_ERROR_RT_INVALID_HANDLE, "a stale fabric handle");
	if (rc == ACL_SUCCESS)
		rc = importable(&hdr);
	if (rc != ACL_SUCCESS) {
		close(mine);
		return rc;
	}
	return add_import(mine, &hdr, 0, handle);
}

FK_API aclError aclrtMemImportFromShareableHandle(uint64_t shareableHandle, int32_t deviceId,
						  aclrtDrvMemHandle *handle)
{
	aclError rc = fake_enter_ctx(FE_aclrtMemImportFromShareableHandle);

	if (rc == ACL_SUCCESS && !handle)
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "handle is NULL");
	if (rc == ACL_SUCCESS && !fake_device_valid(deviceId))
		rc = fake_refuse(ACL_ERROR_RT_INVALID_DEVICEID, "no device %d", deviceId);
	if (rc == ACL_SUCCESS)
		rc = import_default(shareableHandle, 1, handle);
	return fake_leave(rc);
}

FK_API aclError aclrtMemImportFromShareableHandleV2(void *shareableHandle,
						    aclrtMemSharedHandleType shareType,
						    uint64_t flags, aclrtDrvMemHandle *handle)
{
	aclError rc = fake_enter_ctx(FE_aclrtMemImportFromShareableHandleV2);

	if (rc == ACL_SUCCESS && (!shareableHandle || !handle || flags))
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "a NULL argument or flags not 0");
	if (rc == ACL_SUCCESS && shareType == ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT)
		rc = import_default(*(const uint64_t *)shareableHandle, 0, handle);
	else if (rc == ACL_SUCCESS && shareType == ACL_MEM_SHARE_HANDLE_TYPE_FABRIC)
		rc = import_fabric(shareableHandle, handle);
	else if (rc == ACL_SUCCESS)
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "shareType %d", (int)shareType);
	return fake_leave(rc);
}
