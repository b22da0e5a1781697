/* SPDX-License-Identifier: Apache-2.0 */
/* Internals of the fake CUDA driver used by the tests: one process-wide
 * state behind the toolkit's lock (tests/fake/kit), the entry points it
 * resolves, and the tables of what the driver holds (handles,
 * reservations, mappings, registrations). */
#ifndef SSEG_FAKE_CUDA_INTERNAL_H
#define SSEG_FAKE_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "driver/cuda_abi.h"
#include "fake/kit/core.h"
#include "fake/kit/table.h"

/* Every entry point: its base name, the first driver version that has it,
 * and whether it answers CUDA_ERROR_NOT_INITIALIZED before cuInit. */
#define FAKE_ENTRIES(X)                             \
	X(cuGetProcAddress, 11030, 0)               \
	X(cuGetErrorName, 6000, 0)                  \
	X(cuInit, 2000, 0)                          \
	X(cuDriverGetVersion, 2020, 0)              \
	X(cuDeviceGetCount, 2000, 1)                \
	X(cuDeviceGet, 2000, 1)                     \
	X(cuDeviceGetAttribute, 2000, 1)            \
	X(cuDeviceCanAccessPeer, 4000, 1)           \
	X(cuDeviceGetUuid, 9020, 1)                 \
	X(cuDevicePrimaryCtxRetain, 7000, 1)        \
	X(cuDevicePrimaryCtxRelease, 7000, 1)       \
	X(cuCtxSetCurrent, 4000, 1)                 \
	X(cuCtxGetCurrent, 4000, 1)                 \
	X(cuCtxSynchronize, 2000, 1)                \
	X(cuMemGetAllocationGranularity, 10020, 1)  \
	X(cuMemCreate, 10020, 1)                    \
	X(cuMemRelease, 10020, 1)                   \
	X(cuMemAddressReserve, 10020, 1)            \
	X(cuMemAddressFree, 10020, 1)               \
	X(cuMemMap, 10020, 1)                       \
	X(cuMemUnmap, 10020, 1)                     \
	X(cuMemSetAccess, 10020, 1)                 \
	X(cuMemExportToShareableHandle, 10020, 1)   \
	X(cuMemImportFromShareableHandle, 10020, 1) \
	X(cuMemHostRegister, 6050, 1)               \
	X(cuMemHostUnregister, 4000, 1)             \
	X(cuMemHostGetDevicePointer, 3020, 1)       \
	X(cuMemAlloc, 3020, 1)                      \
	X(cuMemFree, 3020, 1)                       \
	X(cuMemHostAlloc, 2020, 1)                  \
	X(cuMemFreeHost, 2000, 1)                   \
	X(cuMemcpyHtoD, 3020, 1)                    \
	X(cuMemcpyDtoH, 3020, 1)                    \
	X(cuPointerGetAttribute, 4000, 1)

enum fake_entry {
#define FAKE_ENUM(name, version, init) FE_##name,
	FAKE_ENTRIES(FAKE_ENUM)
#undef FAKE_ENUM
	FE_COUNT
};
_Static_assert(FE_COUNT <= FK_MAX_ENTRIES, "the toolkit counts every entry point");

#define FAKE_MAX_DEVICES 16
#define FAKE_MAX_NUMA 16
#define FAKE_MAX_HANDLES 1024
#define FAKE_MAX_RESERVATIONS 1024
#define FAKE_MAX_MAPPINGS 4096
#define FAKE_MAX_REGISTRATIONS 4096
#define FAKE_MAX_ALLOCATIONS 256

/* cuDeviceGetUuid answers _v2 from this driver version on. */
#define FAKE_UUID_V2_VERSION 11040

/* What the fake driver models (the SSEG_FAKE_CUDA keys are listed in
 * sseg_fake_cuda.h). Every rule the real driver enforces is on by default. */
struct fake_config {
	int devices;
	int numa[FAKE_MAX_NUMA]; /* host NUMA node of device i % numa_count */
	int numa_count;
	int vmm;
	int fabric;       /* what the attribute claims */
	int imex_channel; /* FABRIC allocations may be created and exported */
	int imex;         /* importers share the exporter's IMEX channel */
	int host_numa_vmm;
	int host_numa_blocked; /* HOST_NUMA creation fails (seccomp get_mempolicy) */
	int posix_fd;
	int need_ctx; /* the calls documented to need a context need one */
	int vmm_ctx;  /* VMM calls need a current context */
	uint32_t peer[FAKE_MAX_DEVICES]; /* bit j of peer[i]: i may access j's memory */
	uint32_t no_vmm; /* bit d: device d has no VMM (novmm=; attributes 102, 141 read 0) */
	int host_register;    /* attribute 99 */
	int ro_register;      /* attribute 113: READ_ONLY registration */
	int register_aligned; /* registration needs page-aligned addresses */
	int uva;              /* device pointers without DEVICEMAP */
	int host_pointer;     /* attribute 91: device pointer == host pointer */
	int pageable_host_pt; /* attribute 100: the device reads through host page tables */
	int map_offset;       /* cuMemMap accepts offsets other than 0 */
	int fork_works;       /* a forked child may keep using the driver */
	size_t granularity;
	int driver;
	size_t max_register;
};

/* Who an allocation belongs to: importers need peer access to its device,
 * and so do devices granted access to device memory. */
struct fake_owner {
	int device;   /* the location's device, or the creating context's; -1 none */
	int location; /* CUmemLocationType it was created on */
};

struct fake_handle {
	uintptr_t id; /* the CUmemGenericAllocationHandle; 0: free slot */
	int fd;
	size_t size;
	unsigned types; /* handle types it may be exported as */
	uint64_t nonce; /* also in the memfd's name, so a stale fd is caught */
	struct fake_owner owner;
};

struct fake_range {
	uintptr_t start; /* 0: free slot */
	size_t size;
	int prot;        /* mappings: what the CPU may do */
	unsigned flags;  /* registrations: CU_MEMHOSTREGISTER_* */
	struct fake_owner owner; /* mappings: the allocation's */
	uint32_t granted; /* mappings: bit d, device d may access it */
	int host_node;    /* mappings: the last HOST_NUMA access entry's id; -1 none */
};

FK_SLOT(struct fake_handle, id);
FK_RANGE(struct fake_range);
_Static_assert(sizeof(uintptr_t) == sizeof(CUmemGenericAllocationHandle), "a handle is an id");

struct fake_state {
	struct fake_config cfg;
	int initialized;
	pid_t init_pid; /* the process whose cuInit succeeded */
	int ctx_refs[FAKE_MAX_DEVICES];
	int access[FAKE_MAX_DEVICES];
	uint64_t handle_seq;
	struct fake_handle handles[FAKE_MAX_HANDLES];
	struct fake_range reservations[FAKE_MAX_RESERVATIONS];
	struct fake_range mappings[FAKE_MAX_MAPPINGS];
	struct fake_range registrations[FAKE_MAX_REGISTRATIONS];
	struct fake_range device_memory[FAKE_MAX_ALLOCATIONS]; /* cuMemAlloc */
	struct fake_range host_memory[FAKE_MAX_ALLOCATIONS];   /* cuMemHostAlloc */
};

extern struct fake_state fake;

/* Takes the lock (fk_enter), counts the call and answers a scripted
 * failure or NOT_INITIALIZED. fake_leave drops the lock whatever
 * fake_enter answered and passes rc through. */
CUresult fake_enter(enum fake_entry entry);
CUresult fake_leave(CUresult rc);

int fake_device_valid(int dev);
int fake_numa_valid(int node);
int fake_context_current(void);
/* The device of this thread's current context, or -1. */
int fake_current_device(void);
/* fake_enter, then CUDA_ERROR_INVALID_CONTEXT when no context is current
 * and the rule (a fake.cfg field, read under the lock; NULL: always) is on. */
CUresult fake_enter_ctx(enum fake_entry entry, const int *rule);
/* Whether dev may access memory that belongs to owner (-1: anyone's). */
int fake_peer_access(int dev, int owner);
/* Whether dev has VMM (not listed in novmm=). */
int fake_device_vmm(int dev);
int fake_aligned(uintptr_t value, size_t align);

static inline struct fake_handle *fake_handle_find(CUmemGenericAllocationHandle id)
{
	return fk_slot_at(FK_TABLE(fake.handles), (uintptr_t)id);
}

/* The entry points, as cuGetProcAddress hands them out; fake_cuGetProcAddress
 * is the _v2 one (CUDA 12.0 on), fake_cuGetProcAddress_v1 the older one. */
#define FAKE_FN(pfn, name) __typeof__(*(pfn)0) name
FAKE_FN(PFN_cuGetProcAddress_v1, fake_cuGetProcAddress_v1);
#define FAKE_DECLARE(name, version, init) FAKE_FN(PFN_##name, fake_##name);
#define PFN_cuGetProcAddress PFN_cuGetProcAddress_v2
#define PFN_cuDeviceGetUuid PFN_cuDeviceGetUuid_v2
FAKE_ENTRIES(FAKE_DECLARE)
#undef PFN_cuDeviceGetUuid
#undef PFN_cuGetProcAddress
#undef FAKE_DECLARE
/* The pre-11.4 cuDeviceGetUuid, as cuGetProcAddress hands it out. */
FAKE_FN(PFN_cuDeviceGetUuid_v2, fake_cuDeviceGetUuid_v1);

void *fake_proc_lookup(const char *symbol, int version, int *status);

#endif
