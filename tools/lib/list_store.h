/* SPDX-License-Identifier: Apache-2.0 */
/* A listing's storage (list_store.c): what one scan found (segments by
 * key, their holders, the processes), in grown arrays. */
#ifndef SSEG_LIST_STORE_H
#define SSEG_LIST_STORE_H

#include "internal.h"

/* What one listing holds at most; past that, what is found is left out
 * and the document says "truncated": true. */
#define SSEG_LIST_MAX_SEGMENTS 65536
#define SSEG_LIST_MAX_HOLDERS 262144

/* One process that maps a segment or holds its memfd. */
struct sseg_holder {
	uint64_t mapped;     /* bytes of its mappings of the memfd; 0 for driver
			      * memory, which /proc does not show */
	uint64_t resident;   /* Rss + HugeTLB pages of those mappings */
	uint64_t thp;        /* ShmemPmdMapped */
	uint64_t page_size;  /* KernelPageSize */
	int process;         /* index into the list's processes */
	int rank;            /* from its window's tag; -1 unknown */
	int next;            /* the segment's next holder; -1 */
	bool readonly;
	bool fd;             /* holds the memfd as a descriptor */
};

/* A process that holds something, as /proc showed it when it was scanned. */
struct sseg_listed_process {
	int pid;
	int64_t uid;         /* effective, from its status; -1 unknown */
	char comm[16];
	char keeper[SSEG_NAME_MAX + 1]; /* a keeper's name, from its tag page; "" */
};

/* One memfd, by (device, inode); or one segment of driver memory, by the
 * uid of its ranks and the name, size, group and pages their tags give
 * (dev and ino 0). */
struct sseg_listed {
	char name[SSEG_NAME_MAX + 1];
	char backend[16];    /* "memfd", or a tag's backend= */
	char pages[16];      /* a tag's pages=; "" for a memfd (seen from its mappings) */
	uint64_t page_size;  /* a tag's page= */
	uint64_t dev, ino;
	uint64_t size;       /* from a descriptor's fstat, 0 when none; driver
			      * memory: what its tags declare */
	uint64_t allocated;  /* its allocated blocks */
	uint64_t numa_nodes;
	uint64_t key;        /* its hash in the index */
	int64_t uid;         /* driver memory: its ranks' */
	char group[24];      /* driver memory: the owner's pid and create nonce */
	int world, owner_rank;
	int first, last;     /* its holders, a list through sseg_holder.next; -1 */
};

/* A host pool of this user's, as opening it map-only read it. */
struct sseg_listed_pool {
	struct sseg_pool_info info;
	int pids[SSEG_POOL_SLOTS];          /* slot s's process, or 0 */
	char comms[SSEG_POOL_SLOTS][16];
	char kept_by[SSEG_NAME_MAX + 1];    /* a keeper holding it; "" */
};

struct sseg_list {
	struct sseg_listed_pool *pools;
	int npools, pools_cap;
	struct sseg_listed *segs;
	struct sseg_holder *holders;
	struct sseg_listed_process *procs;
	int n, cap, nholders, holders_cap, nprocs, procs_cap;
	int *index;          /* open addressing: segment + 1, 0 empty */
	size_t index_cap;    /* a power of two, or 0 */
	bool truncated;      /* a cap was reached */
	bool nomem;
};

/* items grown to twice its capacity (64 at first); NULL out of memory,
 * items then unchanged. */
SSEG_HIDDEN void *sseg_list_grown(void *items, int *cap, size_t size);
/* The segment of a memfd by (dev, ino), made on first sight with name;
 * -1 at the cap or out of memory (l->truncated, l->nomem say which). */
SSEG_HIDDEN int sseg_list_memfd_segment(struct sseg_list *l, uint64_t dev, uint64_t ino,
					const char *name);

/* Driver memory, which has no inode: one segment per uid and declaration. */
struct sseg_driver_key {
	int64_t uid;
	const char *name, *backend, *pages, *group;
	uint64_t size, page;
	int world, owner;
};

/* The segment of that key, made on first sight; -1 as above. */
SSEG_HIDDEN int sseg_list_driver_segment(struct sseg_list *l, const struct sseg_driver_key *k);
SSEG_HIDDEN void sseg_list_free(struct sseg_list *l);

#endif
