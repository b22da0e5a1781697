/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg: one host-memory segment, allocated once, mapped by every rank
 * of a group.
 *
 * Two phases, the exchange belongs to the caller:
 *   1. sseg_create()   every rank; fills a SSEG_BLOB_SIZE-byte blob.
 *   2. the caller all-gathers the blobs (index = rank) over its own group.
 *   3. sseg_complete() every rank; verifies every blob, peers map the
 *      owner's pages.
 * sseg_open() runs all three with a caller-supplied all-gather.
 *
 * Every int-returning function returns 0 (or a count) on success and a
 * negative errno on failure; sseg_last_error() then holds one sentence that
 * says which rank, field, knob or call failed.
 *
 * One meaning per errno, in every backend:
 *   -EINVAL      a bad argument or option; or ranks whose blobs declare
 *                different segments (name, size, layout, pages, backend,
 *                flags, populate, world size, owners)
 *   -EOPNOTSUPP  this machine cannot do it: no driver (libcuda.so.1,
 *                libascendcl.so), a driver too old or without an entry point
 *                the library needs, a device without the capability, a page
 *                kind or placement the kernel or backend does not offer, an
 *                op the backend does not have
 *   -ENODEV      the driver loads but brings up no device (cuInit, aclInit),
 *                or has no device opts.device names
 *   -ENOENT      no such entry, where a caller walks a list: a backend
 *                number (sseg_probe_backend), a device index past the last
 *                (sseg_probe_device), a layout block, a pointer no segment
 *                holds; memory the ACL runtime says is not registered
 *   -EEXIST      memory the ACL runtime says is registered already
 *   -EBADMSG     a blob that is not an intact sharedseg blob: other bytes
 *                (magic), cut (declared size), corrupted (checksum, layout
 *                length); the exchange did not pass what create wrote
 *   -EPROTO      an intact blob, or a peer's message, this build cannot
 *                accept: another blob format version, a fingerprint from
 *                another build, an owner's handle section that does not
 *                describe the declared segment, malformed channel bytes; also
 *                a failure blob whose rank's own errno is unknown
 *   -EPERM       a process this one will not share with (another uid or PID
 *                namespace, another process on the owner's socket), or a
 *                received memfd without its seals
 *   -ETIMEDOUT   a rank did not arrive within timeout_ms (named)
 *   -EINTR       opts.interrupt said stop
 *   -ENOMEM, -EIO  out of memory (the kernel's, or a driver's: CUDA's and
 *                ACL's out-of-memory codes); another driver call failed
 *                (named, with the driver's own code)
 * The rarer ones (-EBUSY, -EALREADY, -EINPROGRESS, -E2BIG, -EOVERFLOW) are
 * told at the function that returns them. */
#ifndef SHAREDSEG_H
#define SHAREDSEG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef SSEG_API
#define SSEG_API __attribute__((visibility("default")))
#endif

#define SSEG_VERSION_MAJOR 0
#define SSEG_VERSION_MINOR 2
#define SSEG_VERSION_PATCH 0

/* The blob every rank contributes to the exchange: the same size for owner
 * and peers, so a plain fixed-size all-gather carries it. */
#define SSEG_BLOB_SIZE 4096u

/* Longest group name, without the terminating NUL. */
#define SSEG_NAME_MAX 63u

typedef struct sseg sseg_t;
struct sseg_layout;

enum sseg_backend {
	SSEG_BACKEND_AUTO = 0,   /* memfd until a GPU backend is asked for */
	SSEG_BACKEND_MEMFD = 1,  /* any Linux host; shares within one host */
	SSEG_BACKEND_CUDA = 2,   /* CUDA VMM pinned host memory (driver API, dlopen'ed) */
	SSEG_BACKEND_ASCEND = 3, /* Ascend ACL VMM host memory */
};

enum sseg_pages {
	SSEG_PAGES_AUTO = 0,       /* HugeTLB if the pool can back it, else THP, else base */
	SSEG_PAGES_BASE = 1,       /* 4 KiB pages */
	SSEG_PAGES_THP = 2,        /* transparent 2 MiB pages on shmem */
	SSEG_PAGES_HUGETLB_2M = 3, /* HugeTLB pool, 2 MiB pages */
	SSEG_PAGES_HUGETLB_1G = 4, /* HugeTLB pool, 1 GiB pages */
};

enum sseg_numa {
	SSEG_NUMA_NONE = 0,         /* the kernel's default policy */
	SSEG_NUMA_NODE = 1,         /* bind to opts.numa_node */
	SSEG_NUMA_INTERLEAVE = 2,   /* interleave over every node with memory */
	SSEG_NUMA_DEVICE_LOCAL = 3, /* the host node nearest the rank's GPU (GPU backends) */
};

enum sseg_populate {
	SSEG_POPULATE_OWNER = 0,  /* the owner faults every page in create, with threads */
	SSEG_POPULATE_SPREAD = 1, /* each rank faults its 1/world_size slice in complete */
	SSEG_POPULATE_LAZY = 2,   /* first touch faults */
	/* added in 0.3: complete returns once every rank has mapped; the
	 * owner's threads then populate in the background (see
	 * sseg_populate_wait) */
	SSEG_POPULATE_BACKGROUND = 3,
};

/* Peers map the segment read-only; only the owner writes. */
#define SSEG_F_READONLY_PEERS (1u << 0)
/* Pin each rank's mapping of a memfd segment for device DMA with the
 * driver of opts.device_backend (cuMemHostRegister portable + device-mapped,
 * or aclrtHostRegister), in chunks of at most register_chunk bytes cut
 * between layout entries, on opts.device. */
#define SSEG_F_HOST_REGISTER (1u << 1)

/* Polled while sseg_complete waits (about every 50 ms, and when a signal
 * interrupts the wait) and between 256 MiB steps of population (the
 * owner's in create, spread in complete): non-zero makes the call return
 * -EINTR, leaving the segment for sseg_destroy (or nothing, in create).
 * How a Python binding lets Ctrl-C through. */
typedef int (*sseg_interrupt_fn)(void *ctx);

struct sseg_opts {
	size_t sz;                    /* sizeof(struct sseg_opts); SSEG_OPTS sets it */
	const char *name;             /* group name, 1..SSEG_NAME_MAX bytes */
	uint64_t size;                /* bytes; 0 takes the layout's size */
	int world_size;               /* ranks in the group */
	int rank;                     /* this rank, 0..world_size-1 */
	int owner_rank;               /* the rank that allocates on this rank's host */
	enum sseg_backend backend;
	enum sseg_pages pages;
	enum sseg_numa numa;
	int numa_node;                /* with SSEG_NUMA_NODE */
	enum sseg_populate populate;
	int populate_threads;         /* owner population threads; 0: up to 4 */
	uint32_t flags;               /* SSEG_F_* */
	int timeout_ms;               /* complete's bound on waiting; 0: 30000 */
	const struct sseg_layout *layout; /* optional; hashed into the fingerprint */
	int device;                   /* this rank's GPU ordinal (GPU backends, host registration) */
	uint64_t register_chunk;      /* SSEG_F_HOST_REGISTER chunk bound; 0: 64 GiB */
	/* added in 0.2 */
	enum sseg_backend device_backend; /* whose driver serves SSEG_F_HOST_REGISTER:
					   * AUTO: the first of cuda, ascend whose
					   * driver is present */
	sseg_interrupt_fn interrupt;  /* optional: see sseg_interrupt_fn */
	void *interrupt_ctx;
	/* added in 0.3 */
	const char *keeper;           /* optional: a keeper's name (sseg_keeper_run);
				       * see "Keepers" below */
};

/* Declares and zero-fills options: SSEG_OPTS(o, .name = "kv", .size = n); */
#define SSEG_OPTS(NAME, ...) \
	struct sseg_opts NAME = { .sz = sizeof(struct sseg_opts), __VA_ARGS__ }

/* Phase 1. On success *seg is the new segment and blob holds this rank's
 * SSEG_BLOB_SIZE bytes. On failure blob (when not NULL) still holds a
 * failure blob carrying this rank's error: pass it on in the exchange and
 * every other rank's sseg_complete fails with this rank's message instead
 * of waiting for it. */
SSEG_API int sseg_create(const struct sseg_opts *opts, sseg_t **seg, void *blob);

/* Phase 3. blobs: world_size blobs, contiguous, index = rank. Verifies them
 * all before mapping anything. The owner returns once every peer on its host
 * has mapped (bounded by timeout_ms). On failure the segment stays valid for
 * sseg_destroy. */
SSEG_API int sseg_complete(sseg_t *seg, const void *blobs);

/* An all-gather: write every rank's len bytes to all (world_size * len
 * bytes, index = rank). Returns 0 or a negative errno. */
typedef int (*sseg_allgather_fn)(const void *mine, void *all, size_t len, void *ctx);

/* create + allgather + complete + an all-gather of each rank's status, so
 * that one rank's failure fails every rank (naming it) instead of hanging. */
SSEG_API int sseg_open(const struct sseg_opts *opts, sseg_allgather_fn allgather,
		       void *ctx, sseg_t **seg);

/* Releases what the segment holds, stage by stage in reverse order. A stage
 * is marked done only after it succeeded: on failure the error is returned
 * and the segment stays valid, so destroy can be called again and never
 * repeats a completed stage. A driver handle whose release call failed is
 * not released again (its state is unknown): that destroy returns the
 * error, sseg_abandoned_handles() counts it, and the next destroy goes on
 * with the stages after it. After the third consecutive failure the library
 * takes the segment over (see sseg_pending_count), the handle is gone and
 * -EINPROGRESS is returned. -EBUSY while pinned. NULL is a no-op. */
SSEG_API int sseg_destroy(sseg_t *seg);

SSEG_API void *sseg_base(const sseg_t *seg);
SSEG_API uint64_t sseg_size(const sseg_t *seg);

struct sseg_info {
	size_t sz;                 /* set by the caller: sizeof(struct sseg_info) */
	enum sseg_backend backend;
	enum sseg_pages pages;     /* page kind obtained */
	uint64_t page_size;        /* page size obtained */
	int pages_verified;        /* 1: checked (hugetlbfs, smaps); 0: nothing faulted yet */
	uint64_t huge_bytes;       /* bytes found on huge pages when last checked */
	void *base;
	uint64_t size;             /* declared */
	uint64_t mapped_size;      /* size rounded up to page_size */
	int rank;
	int world_size;
	int owner_rank;
	int is_owner;
	int readonly;              /* this rank's mapping is read-only */
	enum sseg_numa numa;       /* placement requested */
	int numa_node;             /* with SSEG_NUMA_NODE */
	uint64_t numa_nodes;       /* bit n: sampled pages found on node n; 0: unknown */
	double create_s;
	double complete_s;
	double populate_s;         /* this rank's share of population (background:
				    * the owner's work so far, or all of it) */
	char pages_reason[320];    /* why these pages (auto's choice, a knob in the way) */
	uint64_t device_addr;      /* base's device address (registration, CUDA VMM); 0: none */
	int registered_chunks;     /* host registration chunks held */
	char handle_type[16];      /* how peers got the pages: "fd", "cuda-fabric", "cuda-fd",
				    * "acl-fabric", "acl-trustlist", "" */
	int device;                /* device ordinal used (GPU backends, registration); -1: none */
	/* added in 0.2 */
	int pinned;                /* pinned for device DMA (VMM backends, host registration) */
	char memfd_name[80];       /* what /proc/PID/maps shows ("/memfd:sseg:NAME"); "" for none */
	/* added in 0.3 */
	int kept;                  /* the owner took its memory from opts.keeper: the
				    * bytes are what the last group wrote */
};

SSEG_API int sseg_info(const sseg_t *seg, struct sseg_info *info);

/* ---- population in the background (added in 0.3) ---- */

/* Bytes of the segment's pages that are resident now (*resident; whoever
 * faulted them: the owner's population, any rank's first touch) out of
 * mapped_size (*total). Counts pages, not this rank's page tables: a rank
 * maps a resident page at its own first touch, without allocating. (One
 * exception: a HugeTLB segment outside populate=background counts what
 * this rank has mapped, as mincore() reports HugeTLB pages.) A
 * device backend's pages are resident from create. Any completed segment,
 * any populate mode; either pointer may be NULL. */
SSEG_API int sseg_populate_progress(const sseg_t *seg, uint64_t *resident, uint64_t *total);

/* With populate=background: waits until the segment is resident, at most
 * timeout_ms (0: just ask; negative: no bound), asking opts.interrupt about
 * every 20 ms (-EINTR when it says stop). On the owner, the rank that does
 * the work, it returns the work's result: 0, or the error that stopped it
 * (-ENOMEM where memory ran out), which the log callback reported when it
 * happened; pages not populated then are faulted at first touch. On a
 * peer it returns 0 once every page is resident, and otherwise ends with
 * the owner's end: the owner's error (its sentence), -ECANCELED when the
 * owner destroyed the segment first, -EOWNERDEAD when the owner exited or
 * was killed; a wait never outlives the work that could end it. Memory:
 * create refuses what cannot fit as for populate=owner (the HugeTLB pool,
 * which mmap reserves, MemAvailable, the memory cgroup's room), each peer
 * refuses in create when its own cgroup could not hold the segment (a
 * page is charged to the first rank that touches it), and the work checks
 * MemAvailable and the cgroup again before each 64 MiB step, stopping with
 * -ENOMEM; memory another process takes between a check and its step
 * meets the kernel's OOM killer as any allocation does. Any other populate
 * mode: 0 at once. sseg_destroy stops the work first. */
SSEG_API int sseg_populate_wait(sseg_t *seg, int timeout_ms);

/* ---- keepers (added in 0.3) ---- */

/* A keeper holds segments between groups, so that a group started later
 * (an engine restarted) maps the memory its predecessor wrote instead of
 * allocating anew. An owner whose opts.keeper names a running keeper of
 * the same user first asks it for a segment of its name: one declared the
 * same in every field (size, layout, pages asked, backend, flags,
 * world_size, owner_rank, numa, this library's version) is mapped as it is
 * (sseg_info's kept is 1; nothing is allocated or cleared); one declared
 * otherwise is freed by the keeper, which says why, and the owner allocates
 * anew and leaves its segment with the keeper, which holds it until it
 * stops or is killed, or a later owner of the name declares otherwise.
 * A kept segment is lent to one live group at a time: while a group maps it
 * (on the kernel's word: a lock on the group's open file description, which
 * lasts until its last mapping goes), another owner of the name gets new
 * memory that no one keeps, and the kept one is neither given nor freed.
 * A keeper never lets a kept segment go for another of the same name
 * unless the owner it gave it to found it unusable. Owner and keeper talk
 * through a socket in this user's runtime directory ($SHAREDSEG_RUNTIME_DIR,
 * else /tmp/sharedseg-UID, mode 0700), which no other user can take or
 * reach; the owner waits for the keeper at most half of timeout_ms (and at
 * most 10 s). A keeper that does not run, is slow, refuses, or gives memory
 * that cannot be mapped writable costs a warning that says so, never the
 * segment. memfd backend only; not with SSEG_F_READONLY_PEERS (its seal
 * forbids the next owner's writable map). What the bytes mean (which block
 * is complete) is the caller's to record in them. */


/* The memfd of the segment named name that keeper holds, in *fd (the
 * caller's to close), and its mapped size in *size: for a process of the
 * same user that is no rank of the segment's group but reads or writes
 * what it holds (an engine's scheduler recording which blocks are
 * complete), with mmap(MAP_SHARED) at offset 0 (the segment's byte 0).
 * -ENOENT when the keeper holds none of that name, -ECONNREFUSED when no
 * keeper of that name runs for this user, -EPERM when it runs as another
 * user. */
SSEG_API int sseg_keeper_lend(const char *keeper, const char *name, int *fd, uint64_t *size);

/* 1 when a live group maps the kept segment whose memfd is fd (one
 * sseg_keeper_lend gave): its owner's claim on the memory stands until the
 * group's last mapping goes, however its processes ended; 0 when no group
 * maps it (the keeper alone holds it); a negative errno when the kernel
 * cannot tell (no open file description locks). */
SSEG_API int sseg_keeper_in_use(int fd);

/* ---- the host pool: one keyed store for every engine on the host (added in 0.3) ---- */

/* A pool is a store of fixed-size chunks, each holding the bytes of one
 * key, in one memfd that every process of this user on the host that
 * opens the pool's name maps: the engines' schedulers look up, pin, store
 * and publish chunks, their workers copy bytes straight to and from the
 * chunks. No server is in the path; every operation is a few atomic
 * instructions on the pool's own memory.
 *
 * Promises:
 *  - One pool, one meaning. opts.meaning says what a key and its bytes
 *    mean ("model=...;dtype=...;block=16;tp=2;seed=0": fields separated by
 *    ';'), and with chunk_size and chunks it is the pool's declaration: a
 *    process that declares a pool of the same name otherwise is refused
 *    (-EINVAL) with the first field that differs named.
 *  - A chunk is seen by a lookup only once published, whole: a store in
 *    progress, or abandoned by a process that died at any instruction, is
 *    never served, and a hit's bytes are its key's.
 *  - Pins and stores of a process that died are reclaimed on the kernel's
 *    word (a lock on an open file description of the pool's memfd, which
 *    goes with the process's last mapping), not on a timeout: at the next
 *    open, or when an allocation finds no chunk to evict.
 *  - A record found broken (written by something other than this library)
 *    resets the pool: every chunk not pinned is forgotten, the operation
 *    that found it returns -EBADMSG and the sentence says so; nothing is
 *    served from the broken record.
 *  - Another user can neither map nor find the pool: the memfd is reached
 *    only through this user's runtime directory (see the keepers).
 *  - With opts.keeper, the keeper holds the pool while no process has it
 *    open, so an engine started later finds what earlier ones stored.
 *
 * Keys are SSEG_POOL_KEY_SIZE bytes (a longer name is hashed to 32 bytes
 * by the caller). A chunk is named by its number, 0..chunks-1; its bytes
 * are at sseg_pool_chunk(). Calls that take n keys or chunks do them as one
 * batch; a handle may be used by several threads at once. */

#define SSEG_POOL_KEY_SIZE 32u
#define SSEG_POOL_MEANING_MAX 1023u
#define SSEG_POOL_WHY_MAX 256u
/* Processes that can pin or store in one pool at once. */
#define SSEG_POOL_SLOTS 32u
/* No chunk for this key (sseg_pool_get, sseg_pool_reserve). */
#define SSEG_POOL_NONE UINT32_MAX

typedef struct sseg_pool sseg_pool_t;

/* Open a pool without taking a slot: for a process that only copies bytes
 * of chunks another process pins or reserves (an engine's worker). Such a
 * handle can call sseg_pool_chunk, sseg_pool_info and sseg_pool_close. */
#define SSEG_POOL_MAP_ONLY (1u << 0)
/* Attach to a pool that exists; -ENOENT rather than make one. */
#define SSEG_POOL_EXISTING (1u << 1)
/* Look only (`sharedseg ls`): map-only and existing, and the handle is
 * neither listed in the name's record (no open finds the pool through
 * it) nor leaves the pool with opts.keeper. */
#define SSEG_POOL_OBSERVE (1u << 2)

struct sseg_pool_opts {
	size_t sz;              /* sizeof(struct sseg_pool_opts); SSEG_POOL_OPTS sets it */
	const char *name;       /* 1..SSEG_NAME_MAX bytes of [A-Za-z0-9._-] */
	const char *meaning;    /* what keys and bytes mean: ';'-separated fields, at
				 * most SSEG_POOL_MEANING_MAX bytes; NULL: whatever
				 * the pool's is (a new pool's: "") */
	uint64_t chunk_size;    /* bytes a chunk (a multiple of 64); 0 when attaching:
				 * the pool's */
	uint64_t chunks;        /* chunks (1..2^31); 0 when attaching: the pool's */
	enum sseg_pages pages;  /* for a new pool: auto, base, thp, hugetlb-2M */
	uint32_t flags;         /* SSEG_POOL_* */
	int timeout_ms;         /* bound on waiting for another process's open; 0: 30000.
				 * The keeper is asked within half of it (at most
				 * 10 s); one that does not answer is not used */
	const char *keeper;     /* optional: a keeper that holds the pool between engines */
};

#define SSEG_POOL_OPTS(NAME, ...) \
	struct sseg_pool_opts NAME = { .sz = sizeof(struct sseg_pool_opts), __VA_ARGS__ }

/* Maps the pool of opts->name: the one a live process of this user has
 * open, else the one opts->keeper holds, else a new one (made, cleared and
 * left with the keeper). -EINVAL for another declaration (named), -EUSERS
 * when SSEG_POOL_SLOTS processes hold slots already, -ENOENT with
 * SSEG_POOL_EXISTING when none exists. */
SSEG_API int sseg_pool_open(const struct sseg_pool_opts *opts, sseg_pool_t **pool);
/* Unpins what this handle pins, gives back what it reserved, and unmaps.
 * NULL is a no-op. */
SSEG_API void sseg_pool_close(sseg_pool_t *pool);

/* The bytes of chunk (chunk_size of them), or NULL for a number past the last. */
SSEG_API void *sseg_pool_chunk(const sseg_pool_t *pool, uint32_t chunk);

/* Only the leading run of hits: the first miss ends the lookup. */
#define SSEG_POOL_PREFIX (1u << 0)

/* Looks up n keys (n * SSEG_POOL_KEY_SIZE bytes) and pins every hit for
 * reading: chunks[i] is key i's chunk, or SSEG_POOL_NONE. Returns the
 * number of hits (with SSEG_POOL_PREFIX: of the leading run, the rest
 * SSEG_POOL_NONE). A pinned chunk keeps its key and bytes until unpinned. */
SSEG_API int sseg_pool_get(sseg_pool_t *pool, const void *keys, int n, uint32_t flags,
			   uint32_t *chunks);
/* How many of the n keys are in the pool (published), without pinning;
 * with SSEG_POOL_PREFIX, the length of the leading run. */
SSEG_API int sseg_pool_contains(sseg_pool_t *pool, const void *keys, int n, uint32_t flags);
/* Lets go of pins taken by sseg_pool_get (one each). */
SSEG_API int sseg_pool_unpin(sseg_pool_t *pool, const uint32_t *chunks, int n);

/* Takes a chunk to fill for each key not in the pool yet, evicting chunks
 * nobody pins (least recently used first, by the clock): chunks[i] is
 * key i's, or SSEG_POOL_NONE where the key is published or being stored
 * already. Returns the number taken; -ENOSPC (with nothing taken) when
 * every chunk is pinned or being filled. A taken chunk is invisible until
 * published. */
SSEG_API int sseg_pool_reserve(sseg_pool_t *pool, const void *keys, int n, uint32_t *chunks);
/* Makes reserved chunks visible, their bytes written whole. SSEG_POOL_NONE
 * entries are skipped. Returns how many were published: a chunk whose key
 * another process published meanwhile is given back, not counted. */
SSEG_API int sseg_pool_publish(sseg_pool_t *pool, const uint32_t *chunks, int n);
/* Gives back reserved chunks unpublished (a store that failed). */
SSEG_API int sseg_pool_abandon(sseg_pool_t *pool, const uint32_t *chunks, int n);
/* Forgets the n keys; returns how many were dropped (a pinned one is not). */
SSEG_API int sseg_pool_drop(sseg_pool_t *pool, const void *keys, int n);

struct sseg_pool_info {
	size_t sz;               /* set by the caller */
	char name[SSEG_NAME_MAX + 1];
	char meaning[SSEG_POOL_MEANING_MAX + 1];
	uint64_t chunk_size, chunks;
	uint64_t size;           /* bytes of the memfd */
	uint64_t inode;          /* the memfd's inode (what /proc/PID/fd shows) */
	enum sseg_pages pages;   /* page kind obtained */
	uint64_t page_size;
	void *base;              /* this process's mapping */
	int slot;                /* this handle's slot; -1 with SSEG_POOL_MAP_ONLY */
	int created;             /* this open made the pool */
	int kept;                /* opts.keeper holds it: this open took it from the
				  * keeper, or made it and left it there */
	/* a count of the chunks now (a snapshot: others change it meanwhile) */
	uint64_t used, filling, free, pinned;
	int attached;            /* slots held by live processes */
	uint64_t hits, misses, stores, evictions, reclaims, duplicates, resets;
	char last_reset[SSEG_POOL_WHY_MAX]; /* why the last reset; "" none */
};
SSEG_API int sseg_pool_info(sseg_pool_t *pool, struct sseg_pool_info *info);
/* Which slots live processes hold: pids[s] is slot s's process, or 0
 * (SSEG_POOL_SLOTS entries). */
SSEG_API int sseg_pool_attached(sseg_pool_t *pool, int *pids);
/* Checks every record of the pool; a broken one resets it (-EBADMSG with
 * the sentence). Frees what dead processes held. 0 when sound. */
SSEG_API int sseg_pool_check(sseg_pool_t *pool);

/* The thread-local sentence that explains this thread's last failure. */
SSEG_API const char *sseg_last_error(void);

/* Checks that this system can create segments with this backend and page
 * kind (AUTO: any): 0 when it can, else a negative errno with
 * sseg_last_error() saying why (-EOPNOTSUPP: this machine cannot; -ENODEV:
 * its driver has no device; -EINVAL: not a backend or page kind). Like every
 * int call here, 0 is the success: `if (sseg_check_support(b, p))` is the
 * branch where segments cannot be made. */
SSEG_API int sseg_check_support(enum sseg_backend backend, enum sseg_pages pages);
/* The same for a segment of size bytes (0: the smallest): the decision the
 * owner's create makes, so a HugeTLB pool too small for size is refused
 * with the pages it has and the pages size needs. */
SSEG_API int sseg_check_support_size(enum sseg_backend backend, enum sseg_pages pages,
				     uint64_t size);
/* The name sseg_check_support had up to 0.2 (the same answer: 0 when
 * supported, which the name reads the other way round). */
SSEG_API int sseg_supported(enum sseg_backend backend, enum sseg_pages pages);

/* ---- groups spanning hosts ---- */

#define SSEG_HOST_ID_SIZE 32u

/* Writes SSEG_HOST_ID_SIZE bytes naming this process's sharing domain: ranks
 * with equal ids can share one segment (same boot of the same host, same
 * network namespace, same user). All-gather them to pick owners. */
SSEG_API int sseg_host_identity(void *id);
/* The owner for rank: the lowest rank whose id equals rank's (ids: world_size
 * ids of SSEG_HOST_ID_SIZE bytes, index = rank). */
SSEG_API int sseg_host_owner(const void *ids, int world_size, int rank);

/* ---- host facts (`sharedseg probe`) ---- */

struct sseg_hugetlb_pool {
	uint64_t page_size;
	uint64_t total;
	uint64_t free;
	uint64_t reserved;
};

#define SSEG_PROBE_MAX_POOLS 4

/* What the host offers any backend. Backends and their devices are
 * described one by one (sseg_probe_backend, sseg_probe_device), so that a
 * new backend or a ninth device is not an ABI change. */
struct sseg_probe {
	size_t sz;                 /* set by the caller: sizeof(struct sseg_probe) */
	char kernel[64];
	int memfd_ok;
	int sealing_ok;
	int memfd_hugetlb_ok;
	char thp_shmem_enabled[16];    /* global shmem_enabled knob */
	char thp_shmem_2m_enabled[16]; /* per-size knob; "" where the kernel has none */
	int thp_shmem_usable;          /* madvise gets 2 MiB THP on a memfd */
	int npools;
	struct sseg_hugetlb_pool pools[SSEG_PROBE_MAX_POOLS];
	int nnodes;                    /* NUMA nodes with memory */
	uint64_t node_mask;
	uint64_t auto_size;            /* the size auto_pages was decided for */
	enum sseg_pages auto_pages;
	char auto_reason[320];
	char advice[512];              /* knobs to change, one per line; "" when none */
	uint64_t mem_available;        /* MemAvailable of /proc/meminfo */
	uint64_t cgroup_limit;         /* this process's memory cgroup limit; 0: none */
	uint64_t cgroup_usage;         /* what that cgroup uses now */
};

/* size: the segment size pages=auto should be decided for (0: 1 GiB). */
SSEG_API int sseg_probe(uint64_t size, struct sseg_probe *probe);

/* One backend. Ints that a driver may not answer are 1 yes, 0 no, -1 unknown. */
struct sseg_probe_backend {
	size_t sz;                 /* set by the caller */
	enum sseg_backend backend;
	char name[16];
	int available;             /* a segment can be created with it here */
	char reason[192];          /* why (not) */
	char driver[160];          /* the driver library loaded; "" for none */
	int driver_version;        /* the driver's own number; 0: none */
	int ndevices;              /* devices the driver sees: sseg_probe_device 0..n-1 */
	int pinned;                /* its memory is pinned for device DMA */
	int crosses_hosts;         /* one owner can serve ranks on other hosts here */
	int host_register;         /* its driver can pin memfd segments (SSEG_F_HOST_REGISTER) */
};

/* 0 with facts filled (available or not); -ENOENT for a number that is no
 * backend, so `for (b = SSEG_BACKEND_MEMFD; !sseg_probe_backend(b, &f); b++)`
 * lists them all. */
SSEG_API int sseg_probe_backend(enum sseg_backend backend, struct sseg_probe_backend *facts);

/* One device of a backend's driver. */
struct sseg_probe_device {
	size_t sz;                 /* set by the caller */
	int ordinal;
	char uuid[48];             /* the driver's device UUID ("GPU-..."); "" unknown */
	int vmm;                   /* virtual memory management */
	int host_vmm;              /* VMM host memory (CUDA: HOST_NUMA locations), as claimed */
	int host_vmm_works;        /* a real minimum-size create + release passed */
	int ipc_fd;                /* shareable POSIX fd handles */
	int fabric_claimed;        /* fabric (cross-host) handles, as claimed */
	int fabric_works;          /* a real create, export and import of one passed */
	int host_register;         /* host registration supported */
	int host_register_readonly; /* read-only host registration supported */
	int host_numa_id;          /* the nearest host NUMA node; -1: none or unknown */
};

/* 0 with facts filled; -ENOENT past the last device; -EOPNOTSUPP for a
 * backend without devices, or without its driver here. */
SSEG_API int sseg_probe_device(enum sseg_backend backend, int index,
			       struct sseg_probe_device *facts);


/* ---- layout: named blocks of fixed-size entries ---- */

enum sseg_layout_order {
	SSEG_LAYOUT_INTERLEAVED = 0, /* index 0 of every block, then index 1, ... */
	SSEG_LAYOUT_GROUPED = 1,     /* every entry of block 0, then block 1, ... */
};

struct sseg_block_desc {
	const char *name;     /* unique, non-empty, no ';' ':' or ',' */
	uint64_t count;       /* entries */
	uint64_t bytes;       /* bytes per entry */
	uint64_t align;       /* entry alignment (power of two); 0: none beyond the layout's */
	const char *shape;    /* optional text for the description, e.g. "bfloat16[4096,576]" */
};

/* align: the alignment of every entry (power of two; 0: 4096). */
SSEG_API int sseg_layout_create(const struct sseg_block_desc *blocks, int nblocks,
				enum sseg_layout_order order, uint64_t align,
				struct sseg_layout **layout);
SSEG_API void sseg_layout_destroy(struct sseg_layout *layout);
SSEG_API uint64_t sseg_layout_size(const struct sseg_layout *layout);
SSEG_API int sseg_layout_nblocks(const struct sseg_layout *layout);
/* Block index by name, or -ENOENT. */
SSEG_API int sseg_layout_find(const struct sseg_layout *layout, const char *name);
SSEG_API int sseg_layout_block(const struct sseg_layout *layout, int block,
			       struct sseg_block_desc *desc);
SSEG_API int sseg_layout_offset(const struct sseg_layout *layout, int block,
				uint64_t index, uint64_t *offset);
/* The canonical description (names, counts, sizes, shapes, offsets). */
SSEG_API const char *sseg_layout_describe(const struct sseg_layout *layout);
SSEG_API uint64_t sseg_layout_hash(const struct sseg_layout *layout);

/* ---- registry of live segments ---- */

struct sseg_lookup_result {
	sseg_t *seg;
	int block;      /* -1 when [addr, len) is the whole segment */
	uint64_t index; /* entry index within block */
};

/* 0 when [addr, addr+len) is exactly a live segment or exactly one entry of
 * one segment's layout; -ENOENT otherwise. */
SSEG_API int sseg_lookup(const void *addr, size_t len, struct sseg_lookup_result *res);
SSEG_API int sseg_pin(sseg_t *seg);
SSEG_API int sseg_unpin(sseg_t *seg);
/* How many segments the library holds whose teardown kept failing (it
 * retries them at each create); it only counts, never cleans up. */
SSEG_API int sseg_pending_count(void);
/* The name sseg_pending_count had up to 0.2; the same count. */
SSEG_API int sseg_cleanup_pending(void);
/* Driver handles whose release call failed and that the library will not
 * release again (their state is unknown), since the process started. */
SSEG_API uint64_t sseg_abandoned_handles(void);

/* ---- messages ---- */

enum sseg_log_level {
	SSEG_LOG_OFF = -1,
	SSEG_LOG_ERROR = 0,
	SSEG_LOG_WARN = 1,
	SSEG_LOG_INFO = 2,
	SSEG_LOG_DEBUG = 3,
};

/* Receives each message (one line, no newline) of level <= the current
 * level. Called on whatever thread logs, possibly with a library lock
 * held: it must not block and must not call into the library. */
typedef void (*sseg_log_fn)(enum sseg_log_level level, const char *message, void *ctx);

/* Routes the library's messages to fn (NULL: the default, which writes
 * "sharedseg[PID]: LEVEL: message" to stderr and drops a line rather than
 * block on a full pipe). Messages a stranger can cause (refused
 * connections) are rate-limited whichever receives them. */
SSEG_API void sseg_set_log(sseg_log_fn fn, void *ctx);
/* The most verbose level delivered (SSEG_LOG_OFF: none). The default comes
 * from the environment: SHAREDSEG_LOG=off|error|warn|info|debug, else warn.
 *
 * Every environment variable the library reads is spelled SHAREDSEG_...:
 * SHAREDSEG_LOG, SHAREDSEG_CUDA_LIBRARY and SHAREDSEG_ACL_LIBRARY (another
 * driver library to load, honoured only when the real and effective ids
 * agree), SHAREDSEG_CUDA_HOST_NUMA_MIN_DRIVER, SHAREDSEG_ASCEND_FABRIC.
 * Up to 0.2 these were spelled SSEG_...; the old spelling is still read
 * where the new one is unset, and logged once (warn) as deprecated. */
SSEG_API void sseg_set_log_level(enum sseg_log_level level);
SSEG_API enum sseg_log_level sseg_log_level(void);

/* ---- the built-in single-host exchange ---- */

struct sseg_local_group;

/* Rendezvous world_size processes of this host by group name over a unix
 * socket in this user's runtime directory (see the keepers' paragraph), so
 * that another user can neither take the name nor reach it; rank 0 is the
 * hub. Bounded by timeout_ms (0: 30000): a missing rank is an error naming
 * it, never a hang. */
SSEG_API int sseg_local_group_open(const char *name, int rank, int world_size,
				   int timeout_ms, struct sseg_local_group **group);
/* An sseg_allgather_fn; ctx is the struct sseg_local_group. May be called
 * any number of times (a barrier is an all-gather of one byte). */
SSEG_API int sseg_local_allgather(const void *mine, void *all, size_t len, void *ctx);
SSEG_API void sseg_local_group_close(struct sseg_local_group *group);

/* ---- names and parsing shared by the CLI and the Python package ---- */

SSEG_API const char *sseg_backend_name(enum sseg_backend backend);
SSEG_API const char *sseg_pages_name(enum sseg_pages pages);
SSEG_API const char *sseg_numa_name(enum sseg_numa numa);
SSEG_API const char *sseg_populate_name(enum sseg_populate populate);
SSEG_API int sseg_parse_backend(const char *text, enum sseg_backend *backend);
/* "auto", "base", "thp", "hugetlb" (2 MiB), "hugetlb-2M", "hugetlb-1G". */
SSEG_API int sseg_parse_pages(const char *text, enum sseg_pages *pages);
SSEG_API int sseg_parse_populate(const char *text, enum sseg_populate *populate);
/* "none", "interleave", "device-local", or a node number. */
SSEG_API int sseg_parse_numa(const char *text, enum sseg_numa *numa, int *node);
/* "4096", "256MiB", "256M", "4G", "1.5GiB", "256.0 MiB": binary units;
 * blanks around the number and the unit are ignored. */
SSEG_API int sseg_parse_size(const char *text, uint64_t *bytes);

/* ---- what a caller leaves to the operator (added in 0.3) ---- */

/* The operator's default for a setting the caller does not choose:
 * "pages", "numa" or "populate" give $SHAREDSEG_PAGES, $SHAREDSEG_NUMA or
 * $SHAREDSEG_POPULATE where set and not blank (trimmed), else the library's
 * own ("auto", "none", "owner"), as text for the sseg_parse_* functions,
 * in buf (len bytes); *source is the variable's name or "default". -EINVAL
 * for another setting. The C tool and the Python package resolve their
 * defaults here; a C caller that takes operators' defaults does the same. */
SSEG_API int sseg_setting_default(const char *setting, char *buf, size_t len,
				  const char **source);
/* Milliseconds the owner's population of size bytes may take: what the
 * C tool and the Python package add to timeout_ms, so that the first touch
 * of a large segment does not count against the peers' wait. 2 s a GiB on
 * base pages (and auto), 1 s on THP and HugeTLB; 0 for lazy and background
 * population. */
SSEG_API uint64_t sseg_population_allowance_ms(uint64_t size, enum sseg_pages pages,
					       enum sseg_populate populate);

#ifdef __cplusplus
}
#endif

#endif /* SHAREDSEG_H */
