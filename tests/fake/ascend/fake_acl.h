/* SPDX-License-Identifier: Apache-2.0 */
/* Internals of the fake ACL runtime used by the tests: one process-wide
 * state behind the toolkit's lock (tests/fake/kit), the entry points it
 * exports (under the runtime's own names, found with dlsym), and the
 * tables of what it holds. What must cross processes (an exported
 * allocation and its trust list) lives in the allocation's memfd, in a
 * header page before the data. */
#ifndef SSEG_FAKE_ACL_INTERNAL_H
#define SSEG_FAKE_ACL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "driver/acl_abi.h"
#include "fake/kit/core.h"
#include "fake/kit/table.h"

/* Every counted entry point (aclGetRecentErrMsg only reads this thread's
 * message), and whether it answers before aclInit. */
#define FAKE_ACL_ENTRIES(X)                       \
	X(aclInit, 1)                             \
	X(aclrtGetVersion, 1)                     \
	X(aclrtGetDeviceCount, 0)                 \
	X(aclrtSetDevice, 0)                      \
	X(aclrtResetDevice, 0)                    \
	X(aclrtGetCurrentContext, 0)              \
	X(aclrtSetCurrentContext, 0)              \
	X(aclrtDeviceGetBareTgid, 0)              \
	X(aclrtMemGetAllocationGranularity, 0)    \
	X(aclrtMallocPhysical, 0)                 \
	X(aclrtFreePhysical, 0)                   \
	X(aclrtReserveMemAddress, 0)              \
	X(aclrtReleaseMemAddress, 0)              \
	X(aclrtMapMem, 0)                         \
	X(aclrtUnmapMem, 0)                       \
	X(aclrtMemSetAccess, 0)                   \
	X(aclrtMemExportToShareableHandle, 0)     \
	X(aclrtMemSetPidToShareableHandle, 0)     \
	X(aclrtMemImportFromShareableHandle, 0)   \
	X(aclrtMemExportToShareableHandleV2, 0)   \
	X(aclrtMemImportFromShareableHandleV2, 0) \
	X(aclrtHostRegister, 0)                   \
	X(aclrtHostUnregister, 0)                 \
	X(aclrtGetLogicDevIdByUserDevId, 0)

enum fake_entry {
#define FAKE_ENUM(name, before_init) FE_##name,
	FAKE_ACL_ENTRIES(FAKE_ENUM)
#undef FAKE_ENUM
	FE_COUNT
};
_Static_assert(FE_COUNT <= FK_MAX_ENTRIES, "the toolkit counts every entry point");

#define FAKE_MAX_DEVICES 16
#define FAKE_MAX_HANDLES 512
#define FAKE_MAX_RANGES 1024
#define FAKE_MAX_TRUSTED 256
#define FAKE_HEADER 4096u        /* the memfd's header page */
/* Where aclrtHostRegister says the device sees a registered range: the
 * host address moved by this much (a device address is not a host one). */
#define FAKE_DEVICE_OFFSET (1ull << 56)

struct fake_config {
	int devices;        /* the devices the driver has (logical ids) */
	int version[3];
	size_t granularity; /* of host memory, whatever its page type */
	int fabric;         /* fabric handles can be made (A3) */
	int host_register;  /* aclrtHostRegister is supported (A2, A3) */
	int bare_tgid_offset; /* runtime pid = getpid() + this (a container) */
	int need_ctx;       /* memory calls need a current context */
	int need_init;      /* calls before aclInit fail (older runtimes) */
	int hccs;           /* the devices reach host memory over HCCS, not PCIe */
	int host_numa;      /* the driver allocates on a given host NUMA node */
	int v1_host_import; /* V1 import of host memory works (older runtimes) */
	int huge1g;         /* 1 GiB host pages (ACL_MEM_P2P_HUGE1G): enum fake_huge1g */
	int fork_works;     /* a forked child may call the runtime */
};

/* huge1g=: the step of a segment at which 1 GiB host pages are refused
 * (0: at allocation; 1: none), as a driver may take them and refuse them
 * later. */
enum fake_huge1g {
	FAKE_HUGE1G_MALLOC = 0,
	FAKE_HUGE1G_WORKS = 1,
	FAKE_HUGE1G_MAP,    /* huge1g=map: aclrtMapMem */
	FAKE_HUGE1G_ACCESS, /* huge1g=access: aclrtMemSetAccess */
	FAKE_HUGE1G_EXPORT, /* huge1g=export: the export, in-server or fabric */
};

enum fake_origin { FAKE_MALLOCED = 1, FAKE_IMPORTED = 2 };

/* A physical allocation this process holds: a memfd, header page first. */
struct fake_handle {
	uintptr_t id;      /* the aclrtDrvMemHandle; 0: free slot */
	int fd;
	size_t size;       /* data bytes, without the header */
	size_t granule;
	enum fake_origin origin;
	int exported;      /* aclrtMemSharedHandleType it was exported as; 0 */
	uint64_t shareable; /* exported as or imported from (in-server) */
	uint64_t nonce;
	int refs;          /* imported: imports of it not yet freed */
	int p2p;           /* allocated with a P2P attribute (fabric export) */
	uint32_t node;     /* allocated on this host node (HOST: 0) */
};

/* Reservations, mappings and registrations. */
struct fake_range {
	uintptr_t start; /* 0: free slot */
	size_t size;
	uintptr_t handle;  /* mappings: the handle mapped */
	int origin;        /* reservations: enum fake_origin bound into it; 0 */
	uint32_t devices;  /* mappings: logical devices granted; registrations: the device */
};

FK_SLOT(struct fake_handle, id);
FK_RANGE(struct fake_range);

struct fake_state {
	struct fake_config cfg;
	int initialized;
	const char *init_config; /* the first aclInit's configPath ("" for NULL) */
	pid_t device_pid;        /* the process that set a device first; 0 */
	pid_t pid;               /* the process the tables below are of */
	int visible[FAKE_MAX_DEVICES]; /* user ordinal -> logical id */
	int nvisible;
	int device_refs[FAKE_MAX_DEVICES];
	uintptr_t handle_seq;
	struct fake_handle handles[FAKE_MAX_HANDLES];
	struct fake_range reservations[FAKE_MAX_RANGES];
	struct fake_range mappings[FAKE_MAX_RANGES];
	struct fake_range registrations[FAKE_MAX_RANGES];
};

extern struct fake_state fake;

/* Takes the lock (fk_enter), counts the call and answers a scripted
 * failure or ACL_ERROR_UNINITIALIZE. fake_leave drops the lock whatever
 * fake_enter answered and passes rc through. */
aclError fake_enter(enum fake_entry entry);
aclError fake_leave(aclError rc);
/* A failure with the reason aclGetRecentErrMsg gives on this thread. */
aclError fake_refuse(aclError rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A user ordinal (ASCEND_RT_VISIBLE_DEVICES applied) the runtime sees. */
int fake_device_valid(int32_t dev);
/* A logical device id of the driver (what aclrtMemSetAccess takes). */
int fake_logic_valid(int32_t id);
/* The logical id of user ordinal dev (fake_device_valid). */
int fake_logic_of(int32_t dev);
/* fake_enter, then ACL_ERROR_RT_CONTEXT_NULL unless the thread has a live
 * context (or need_ctx=0). */
aclError fake_enter_ctx(enum fake_entry entry);
/* The device of this thread's current context, or -1. */
int fake_current_device(void);
int32_t fake_bare_tgid(void);

static inline struct fake_handle *fake_handle_find(uintptr_t id)
{
	return fk_slot_at(FK_TABLE(fake.handles), id);
}

/* ACL_SUCCESS, or the refusal of h's 1 GiB pages where huge1g= names
 * this step. */
aclError fake_huge1g_step(const struct fake_handle *h, enum fake_huge1g step, const char *call);

/* What the control API reads of the cross-process header. */
int fake_trusted_of(uint64_t shareable, int32_t *pids, int max);

/* The entry points, declared with the library's own types (acl_abi.h), so
 * a definition that differs from what the backend calls does not compile. */
#define FAKE_DECLARE(name, before_init) FK_API __typeof__(*(PFN_##name)0) name;
FAKE_ACL_ENTRIES(FAKE_DECLARE)
#undef FAKE_DECLARE
FK_API __typeof__(*(PFN_aclGetRecentErrMsg)0) aclGetRecentErrMsg;

#endif
