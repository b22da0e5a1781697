/* SPDX-License-Identifier: Apache-2.0 */
/* The host pool's bytes (the pool/ files): what every process that maps a pool
 * reads and writes, in this order in one memfd:
 *
 *   header     what the pool is (geometry, meaning, a checksum over both),
 *              then its counters
 *   slots      one a process that pins or stores (at most SSEG_POOL_SLOTS);
 *              a slot's liveness is an open file description lock on
 *              byte POOL_LOCK_BASE + slot, never a field here
 *   chunks     one record a chunk: its control word and its key
 *   index      open-addressed buckets: key tag and chunk number, hints
 *              that a lookup always checks against the chunk's record
 *   data       the chunks' bytes, from a 2 MiB boundary
 *
 * Whatever a process writes here may be garbage (a buggy process of the
 * same user): every number read from this memory is bounds-checked before
 * it is used; the geometry used is the process's own copy, taken once
 * when its checksum matched. */
#ifndef SSEG_POOL_FORMAT_H
#define SSEG_POOL_FORMAT_H

#include <stdatomic.h>
#include <stdint.h>

#include "sharedseg.h"

#define POOL_MAGIC 0x6c6f6f7067657373ull /* "ssegpool" */
#define POOL_FORMAT 1u
#define POOL_LOCK_BASE 4096 /* slot s's liveness: a lock on byte POOL_LOCK_BASE + s */
#define POOL_MAX_PROBE 64   /* buckets a lookup or insert looks at */

/* A chunk's control word, changed only by compare-and-swap:
 *   bits  0..31  pins: bit s set while slot s pins the chunk (READY), or
 *                the writer's bit (FILLING)
 *   bits 32..33  state
 *   bit  34      referenced since the clock hand last passed
 *   bits 35..63  generation, bumped each time the chunk is taken anew, so
 *                that a pin checks the key it compared is still the key */
enum pool_state {
	POOL_FREE = 0,    /* holds nothing; taken by an allocation */
	POOL_FILLING = 1, /* a writer's (its bit), invisible to lookups */
	POOL_READY = 2,   /* published: its key's bytes, whole */
	POOL_BAD = 3,     /* never written by the library: found, the pool is reset */
};

#define CTL_PINS(c) ((uint32_t)(c))
#define CTL_STATE(c) ((enum pool_state)(((c) >> 32) & 3u))
#define CTL_REF (1ull << 34)
#define CTL_GEN(c) ((c) >> 35)
#define CTL_MAKE(gen, state, pins) \
	(((uint64_t)(gen) << 35) | ((uint64_t)(state) << 32) | (uint64_t)(uint32_t)(pins))
#define CTL_GEN_MASK ((1ull << 29) - 1)

struct pool_chunk {
	_Atomic uint64_t ctl;
	_Atomic uint64_t key[SSEG_POOL_KEY_SIZE / 8];
	/* a hash of key, chunk number and generation, written before the
	 * chunk is published: a record another process scribbled on is found */
	_Atomic uint64_t seal;
	uint64_t spare[2];
};

struct pool_slot {
	_Atomic uint64_t pid;   /* the process holding it; 0: free */
	_Atomic uint64_t since; /* CLOCK_REALTIME seconds it attached */
	_Atomic uint64_t hits, misses, stores;
	uint64_t spare[3];
};

/* The part of the header that never changes once made, under its checksum. */
struct pool_geometry {
	uint64_t magic;
	uint32_t format;
	uint32_t slots;
	uint8_t id[16]; /* random, made with the pool */
	char name[SSEG_NAME_MAX + 1];
	char meaning[SSEG_POOL_MEANING_MAX + 1];
	uint64_t chunk_size, chunks, buckets;
	uint64_t slots_off, chunks_off, index_off, data_off, total;
	uint64_t page_size;
	uint32_t pages; /* enum sseg_pages obtained */
	uint32_t spare;
	uint64_t created; /* CLOCK_REALTIME seconds */
};

struct pool_header {
	struct pool_geometry g;
	uint64_t checksum; /* of g */
	uint64_t spare0[7];
	/* counters, and the clock hand */
	_Atomic uint64_t hand;
	_Atomic uint64_t resets;
	_Atomic uint64_t hits, misses, stores, evictions, reclaims, duplicates;
	char last_reset[SSEG_POOL_WHY_MAX]; /* why the last reset, for ls */
};

#endif
