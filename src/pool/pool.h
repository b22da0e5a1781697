/* SPDX-License-Identifier: Apache-2.0 */
/* The host pool as one process holds it (the pool/ files): its mapping, its own
 * copy of the geometry, its slot, and what it pins and reserves. The
 * pieces: open.c (open, close, info), find.c (finding the memfd another
 * process has open, or the keeper holds), slots.c (liveness, reclaim),
 * index.c (the buckets), ops.c (get, reserve, publish, ...), check.c
 * (broken records and the reset). */
#ifndef SSEG_POOL_H
#define SSEG_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "internal.h"
#include "pool/format.h"

/* The open's flags as they act: SSEG_POOL_OBSERVE is map-only and existing. */
#define POOL_MAP_ONLY(o) ((o)->flags & (SSEG_POOL_MAP_ONLY | SSEG_POOL_OBSERVE))
#define POOL_EXISTING(o) ((o)->flags & (SSEG_POOL_EXISTING | SSEG_POOL_OBSERVE))

struct sseg_pool {
	int fd; /* this process's own description of the memfd: slot locks live on it */
	void *base;
	struct pool_geometry g; /* checked once; never read again from the pool */
	struct pool_header *h;
	struct pool_slot *slots;
	struct pool_chunk *chunks;
	_Atomic uint64_t *index;
	uint8_t *data;
	uint64_t id64;   /* the pool id's first 8 bytes, in every seal */
	int slot;        /* -1: map only */
	uint32_t bit;    /* 1u << slot */
	int created, kept;
	pthread_mutex_t lock; /* this handle's pins and reservations */
	uint32_t *pins;       /* this handle's pins a chunk */
	uint8_t *reserved;    /* 1: this handle fills the chunk */
};

/* A key as the pool keeps it. */
struct pool_key {
	uint64_t w[SSEG_POOL_KEY_SIZE / 8];
};

SSEG_HIDDEN struct pool_key pool_key_of(const void *keys, int i);
SSEG_HIDDEN uint64_t pool_key_hash(const struct pool_key *k);
SSEG_HIDDEN uint64_t pool_seal(const struct sseg_pool *p, const struct pool_key *k, uint32_t chunk,
			       uint64_t gen);
SSEG_HIDDEN struct pool_key pool_chunk_key(const struct pool_chunk *c);
SSEG_HIDDEN bool pool_key_eq(const struct pool_key *a, const struct pool_key *b);

/* index.c. Buckets are hints: a lookup checks the chunk's own record. */
SSEG_HIDDEN int pool_index_insert(struct sseg_pool *p, uint64_t hash, uint32_t chunk);
SSEG_HIDDEN void pool_index_remove(struct sseg_pool *p, uint64_t hash, uint32_t chunk);
SSEG_HIDDEN void pool_index_clear(struct sseg_pool *p);
/* The chunk holding key in state want (POOL_READY, or POOL_FILLING too
 * with any_state): 1 with *chunk and its control word *ctl, 0 when none,
 * -EBADMSG when a broken record was found (the pool is reset). */
SSEG_HIDDEN int pool_index_find(struct sseg_pool *p, const struct pool_key *k, uint64_t hash,
				bool any_state, uint32_t *chunk, uint64_t *ctl);

/* slots.c */
SSEG_HIDDEN int pool_slot_take(struct sseg_pool *p);
SSEG_HIDDEN void pool_slot_leave(struct sseg_pool *p);
/* Frees what processes that died held: of the slots that name a process,
 * or of every slot nobody holds (a pin bit written by something other
 * than sharedseg goes too); the number of slots that held anything. */
SSEG_HIDDEN int pool_reclaim_dead(struct sseg_pool *p, bool every);
/* 1 when a live process holds slot s, 0 when none, negative on error. */
SSEG_HIDDEN int pool_slot_live(const struct sseg_pool *p, int s);

/* check.c */
/* A control word this library could have written. */
SSEG_HIDDEN bool pool_ctl_sound(const struct sseg_pool *p, uint64_t ctl);
/* Resets the pool for why (a sentence), returns -EBADMSG with it. */
SSEG_HIDDEN int pool_broken(struct sseg_pool *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
SSEG_HIDDEN uint64_t pool_geometry_sum(const struct pool_geometry *g);
/* 0 when a pool's geometry (read from its memfd of size bytes) is one this
 * library made; -EBADMSG or -EPROTO with the sentence. */
SSEG_HIDDEN int pool_geometry_check(const struct pool_geometry *g, uint64_t sum, uint64_t size);
/* 0 when opts declares the pool g is; -EINVAL naming what differs. */
SSEG_HIDDEN int pool_declaration_check(const struct pool_geometry *g,
				       const struct sseg_pool_opts *o);

/* find.c: the pool's memfd, as this process finds or makes it. */
struct pool_found {
	int fd;           /* a description of its own, read-write */
	uint64_t size;
	int created;
	int kept;         /* opts.keeper holds it: 1; holds none of its name: 0;
			   * holds another of its name: -1 */
	int who_fd;       /* the name's record file, locked until pool_found_done */
	double keeper_deadline; /* every question to opts.keeper: a share of the timeout */
	int keeper_silent; /* opts.keeper was asked and did not answer: not asked again */
};
SSEG_HIDDEN int pool_find(const struct sseg_pool_opts *o, struct pool_found *f);
/* At close: the name's record file goes when no other process has the
 * pool open and no keeper was involved (a kept pool stays listed). */
SSEG_HIDDEN void pool_forget(const struct sseg_pool *p);
/* The record file of a name no live process has open and no keeper holds
 * (the caller asked every keeper, each answering): removed, under the
 * name's lock, unless a process has opened the pool meanwhile. What a
 * listing does with the record of a kept pool whose keeper is gone. */
SSEG_HIDDEN void pool_forget_stale(const char *name);
/* Leaves the pool with o->keeper (a new one, or one the keeper lost): 0
 * held; a refusal is a warning. */
SSEG_HIDDEN int pool_keep(const struct sseg_pool_opts *o, const struct sseg_pool *p,
			  double deadline);
/* Writes this process's record (the slot it holds) and lets the name go. */
SSEG_HIDDEN void pool_found_done(struct pool_found *f, const struct sseg_pool *p);

/* open.c: a new pool's memfd, cleared, with its geometry. */
SSEG_HIDDEN int pool_make(const struct sseg_pool_opts *o, int *fd, uint64_t *size);

#endif
