/* SPDX-License-Identifier: Apache-2.0 */
/* Keys and the index. A bucket is 0 (never used), ~0 (a tombstone), or the
 * key hash's top 32 bits and the chunk's number + 1. Linear probing over
 * at most POOL_MAX_PROBE buckets; a lookup stops at a bucket never used. */
#include <string.h>

#include "pool/pool.h"

#define BUCKET_EMPTY 0ull
#define BUCKET_TOMB (~0ull)

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

struct pool_key pool_key_of(const void *keys, int i)
{
	struct pool_key k;

	memcpy(k.w, (const uint8_t *)keys + (size_t)i * SSEG_POOL_KEY_SIZE, sizeof(k.w));
	return k;
}

uint64_t pool_key_hash(const struct pool_key *k)
{
	uint64_t h = 0x5353454750304f4cull;

	for (size_t i = 0; i < ARRAY_SIZE(k->w); i++)
		h = mix(h ^ k->w[i]);
	return h;
}

uint64_t pool_seal(const struct sseg_pool *p, const struct pool_key *k, uint32_t chunk,
		   uint64_t gen)
{
	return mix(pool_key_hash(k) ^ mix(((uint64_t)chunk << 32 | gen) ^ p->id64));
}

struct pool_key pool_chunk_key(const struct pool_chunk *c)
{
	struct pool_key k;

	for (size_t i = 0; i < ARRAY_SIZE(k.w); i++)
		k.w[i] = atomic_load_explicit(&c->key[i], memory_order_relaxed);
	return k;
}

bool pool_key_eq(const struct pool_key *a, const struct pool_key *b)
{
	return !memcmp(a->w, b->w, sizeof(a->w));
}

static uint64_t bucket_of(uint64_t hash, uint32_t chunk)
{
	return (hash & 0xffffffff00000000ull) | ((uint64_t)chunk + 1);
}

int pool_index_insert(struct sseg_pool *p, uint64_t hash, uint32_t chunk)
{
	uint64_t mask = p->g.buckets - 1, want = bucket_of(hash, chunk);

	for (uint64_t i = 0; i < POOL_MAX_PROBE; i++) {
		_Atomic uint64_t *b = &p->index[(hash + i) & mask];
		uint64_t e = atomic_load_explicit(b, memory_order_relaxed);

		if ((e == BUCKET_EMPTY || e == BUCKET_TOMB) &&
		    atomic_compare_exchange_strong(b, &e, want))
			return 0;
	}
	return -ENOSPC;
}

/* What a bucket that is let go becomes: never used again when the next is
 * (no probe passes through it to a later key), else a tombstone; so that
 * buckets never used do not run out as keys come and go. A key inserted
 * past it meanwhile can be hidden by it: a miss, never another key's hit. */
static uint64_t vacate(struct sseg_pool *p, uint64_t pos)
{
	uint64_t next = atomic_load_explicit(&p->index[(pos + 1) & (p->g.buckets - 1)],
					     memory_order_relaxed);

	return next == BUCKET_EMPTY ? BUCKET_EMPTY : BUCKET_TOMB;
}

void pool_index_remove(struct sseg_pool *p, uint64_t hash, uint32_t chunk)
{
	uint64_t mask = p->g.buckets - 1, want = bucket_of(hash, chunk);

	for (uint64_t i = 0; i < POOL_MAX_PROBE; i++) {
		_Atomic uint64_t *b = &p->index[(hash + i) & mask];
		uint64_t e = atomic_load_explicit(b, memory_order_relaxed);

		if (e == BUCKET_EMPTY)
			return;
		if (e == want && atomic_compare_exchange_strong(b, &e, vacate(p, hash + i)))
			return;
	}
}

void pool_index_clear(struct sseg_pool *p)
{
	for (uint64_t i = 0; i < p->g.buckets; i++)
		atomic_store_explicit(&p->index[i], BUCKET_EMPTY, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
}

/* A bucket that names a chunk holding another key for good (published
 * under another key, or free) is a leftover of a process that died
 * between two steps: it becomes a tombstone. */
static void forget_stale(_Atomic uint64_t *b, uint64_t e, struct sseg_pool *p,
			 uint32_t chunk, uint64_t ctl)
{
	const struct pool_chunk *c = &p->chunks[chunk];
	struct pool_key k = pool_chunk_key(c);
	bool stale = CTL_STATE(ctl) == POOL_FREE ||
		     (CTL_STATE(ctl) == POOL_READY &&
		      (pool_key_hash(&k) & 0xffffffff00000000ull) != (e & 0xffffffff00000000ull));

	if (stale && atomic_load_explicit(&c->ctl, memory_order_acquire) == ctl)
		atomic_compare_exchange_strong(b, &e, vacate(p, (uint64_t)(b - p->index)));
}

/* Whether chunk's record (read as ctl) holds key k, sealed: 1 yes, 0 no,
 * -EBADMSG when the record is broken. */
static int holds(struct sseg_pool *p, uint32_t chunk, uint64_t ctl, const struct pool_key *k)
{
	struct pool_chunk *c = &p->chunks[chunk];
	struct pool_key got = pool_chunk_key(c);
	uint64_t seal = atomic_load_explicit(&c->seal, memory_order_relaxed);

	atomic_thread_fence(memory_order_acquire);
	if (!pool_key_eq(&got, k))
		return 0;
	if (seal == pool_seal(p, &got, chunk, CTL_GEN(ctl)))
		return 1;
	/* a record changing under the lookup reads torn; one that stays is broken */
	if (atomic_load_explicit(&c->ctl, memory_order_acquire) != ctl ||
	    CTL_STATE(ctl) != POOL_READY)
		return 0;
	return pool_broken(p, "chunk %u's record does not match its seal (its key or "
			   "generation was written by something other than sharedseg)", chunk);
}

int pool_index_find(struct sseg_pool *p, const struct pool_key *k, uint64_t hash, bool any_state,
		    uint32_t *chunk, uint64_t *ctl)
{
	uint64_t mask = p->g.buckets - 1, tag = hash & 0xffffffff00000000ull;

	for (uint64_t i = 0; i < POOL_MAX_PROBE; i++) {
		_Atomic uint64_t *b = &p->index[(hash + i) & mask];
		uint64_t e = atomic_load_explicit(b, memory_order_acquire), c;
		uint32_t n;
		int rc;

		if (e == BUCKET_EMPTY)
			return 0;
		if (e == BUCKET_TOMB || (e & 0xffffffff00000000ull) != tag)
			continue;
		n = (uint32_t)e - 1;
		if ((uint32_t)e == 0 || n >= p->g.chunks)
			return pool_broken(p, "index bucket %llu names chunk %u of %llu",
					   (unsigned long long)((hash + i) & mask), n,
					   (unsigned long long)p->g.chunks);
		c = atomic_load_explicit(&p->chunks[n].ctl, memory_order_acquire);
		if (!pool_ctl_sound(p, c))
			return pool_broken(p, "chunk %u's control word %#llx is none sharedseg writes",
					   n, (unsigned long long)c);
		if (CTL_STATE(c) != POOL_READY && !(any_state && CTL_STATE(c) == POOL_FILLING)) {
			if (CTL_STATE(c) == POOL_FREE)
				forget_stale(b, e, p, n, c);
			continue;
		}
		rc = holds(p, n, c, k);
		if (rc < 0)
			return rc;
		if (rc) {
			*chunk = n;
			*ctl = c;
			return 1;
		}
		if (CTL_STATE(c) == POOL_READY)
			forget_stale(b, e, p, n, c);
	}
	return 0;
}
