/* SPDX-License-Identifier: Apache-2.0 */
/* What a pool's users do, in batches: get (look up and pin), contains,
 * unpin, reserve (take chunks to fill, evicting by the clock), publish,
 * abandon, drop. Every change of a chunk's state is one compare-and-swap
 * of its control word, so a process that dies between two of them leaves
 * a state that slots.c reclaims and no lookup serves. */
#include <string.h>

#include "pool/pool.h"

static int usable(struct sseg_pool *p, const char *what, const void *arg, int n)
{
	sseg_err_clear();
	if (!p)
		return sseg_err(-EINVAL, "%s: NULL pool", what);
	if (n < 0 || (n > 0 && !arg))
		return sseg_err(-EINVAL, "%s: %d entries at %p", what, n, arg);
	if (p->slot < 0)
		return sseg_err(-EPERM, "%s: pool '%s' was opened map-only (SSEG_POOL_MAP_ONLY): "
				"it can copy bytes, not pin or store", what, p->g.name);
	return 0;
}

/* Takes one pin of chunk, whose control word was seen as seen (READY). */
static bool pin(struct sseg_pool *p, uint32_t chunk, uint64_t seen)
{
	_Atomic uint64_t *ctl = &p->chunks[chunk].ctl;
	uint64_t gen = CTL_GEN(seen);

	if (p->pins[chunk]) {
		p->pins[chunk]++; /* our own pin holds it where it was */
		return true;
	}
	for (;;) {
		uint64_t want = seen | p->bit | CTL_REF;

		if (atomic_compare_exchange_weak(ctl, &seen, want)) {
			p->pins[chunk] = 1;
			return true;
		}
		/* another process pinned or let go: only then try again */
		if (CTL_STATE(seen) != POOL_READY || CTL_GEN(seen) != gen || (seen & p->bit))
			return false;
	}
}

static int lookup(struct sseg_pool *p, const void *keys, int n, uint32_t flags,
		  uint32_t *chunks)
{
	int hits = 0, rc = 0, i;

	for (i = 0; i < n; i++) {
		struct pool_key k = pool_key_of(keys, i);
		uint64_t hash = pool_key_hash(&k), ctl;
		uint32_t c = SSEG_POOL_NONE;

		/* a chunk taken anew between the lookup and the pin: look again */
		for (int tries = 0; tries < 4; tries++) {
			rc = pool_index_find(p, &k, hash, false, &c, &ctl);
			if (rc <= 0 || !chunks || pin(p, c, ctl))
				break;
			rc = 0;
			c = SSEG_POOL_NONE;
		}
		if (rc < 0)
			break;
		if (chunks)
			chunks[i] = rc ? c : SSEG_POOL_NONE;
		if (!rc && (flags & SSEG_POOL_PREFIX))
			break;
		hits += rc;
	}
	atomic_fetch_add_explicit(&p->h->hits, (uint64_t)hits, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->h->misses, (uint64_t)(i - hits), memory_order_relaxed);
	atomic_fetch_add_explicit(&p->slots[p->slot].hits, (uint64_t)hits, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->slots[p->slot].misses, (uint64_t)(i - hits),
				  memory_order_relaxed);
	for (int j = i; chunks && j < n; j++)
		chunks[j] = SSEG_POOL_NONE;
	return rc < 0 ? rc : hits;
}

int sseg_pool_get(sseg_pool_t *p, const void *keys, int n, uint32_t flags, uint32_t *chunks)
{
	int rc = usable(p, "sseg_pool_get", keys, n);

	if (rc)
		return rc;
	if (n && !chunks)
		return sseg_err(-EINVAL, "sseg_pool_get: NULL chunks");
	pthread_mutex_lock(&p->lock);
	rc = lookup(p, keys, n, flags, chunks);
	if (rc < 0) { /* a broken record: nothing of this batch stays pinned */
		pthread_mutex_unlock(&p->lock);
		for (int i = 0; i < n; i++)
			if (chunks[i] != SSEG_POOL_NONE)
				sseg_pool_unpin(p, &chunks[i], 1);
		for (int i = 0; i < n; i++)
			chunks[i] = SSEG_POOL_NONE;
		return rc;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int sseg_pool_contains(sseg_pool_t *p, const void *keys, int n, uint32_t flags)
{
	int rc = usable(p, "sseg_pool_contains", keys, n);

	if (rc)
		return rc;
	pthread_mutex_lock(&p->lock);
	rc = lookup(p, keys, n, flags, NULL);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* Clears this slot's bit from chunk's control word, whatever its state. */
static void let_go(struct sseg_pool *p, uint32_t chunk)
{
	atomic_fetch_and_explicit(&p->chunks[chunk].ctl, ~(uint64_t)p->bit, memory_order_release);
}

static int check_chunk(const struct sseg_pool *p, const char *what, uint32_t chunk)
{
	if (chunk >= p->g.chunks)
		return sseg_err(-EINVAL, "%s: chunk %u of pool '%s', which has %llu", what, chunk,
				p->g.name, (unsigned long long)p->g.chunks);
	return 0;
}

int sseg_pool_unpin(sseg_pool_t *p, const uint32_t *chunks, int n)
{
	int rc = usable(p, "sseg_pool_unpin", chunks, n);

	for (int i = 0; !rc && i < n; i++)
		if (chunks[i] != SSEG_POOL_NONE)
			rc = check_chunk(p, "sseg_pool_unpin", chunks[i]);
	if (rc)
		return rc;
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < n && !rc; i++) {
		uint32_t c = chunks[i];

		if (c == SSEG_POOL_NONE)
			continue;
		if (!p->pins[c])
			rc = sseg_err(-EINVAL, "sseg_pool_unpin: chunk %u is not pinned by this "
				      "handle", c);
		else if (--p->pins[c] == 0)
			let_go(p, c);
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* Takes chunk c, seen as seen, for this slot to fill: 1 taken, 0 not. */
static int take(struct sseg_pool *p, uint32_t c, uint64_t seen)
{
	uint64_t gen = (CTL_GEN(seen) + 1) & CTL_GEN_MASK;
	struct pool_key old;

	if (!atomic_compare_exchange_strong(&p->chunks[c].ctl, &seen,
					    CTL_MAKE(gen, POOL_FILLING, p->bit)))
		return 0;
	if (CTL_STATE(seen) == POOL_READY) { /* evicted: its key leaves the index */
		old = pool_chunk_key(&p->chunks[c]);
		pool_index_remove(p, pool_key_hash(&old), c);
		atomic_fetch_add_explicit(&p->h->evictions, 1, memory_order_relaxed);
	}
	return 1;
}

/* One chunk nobody pins, by the clock: a published chunk referenced since
 * the hand last passed is passed over once. */
static int clock_take(struct sseg_pool *p, uint32_t *chunk)
{
	uint64_t steps = 2 * p->g.chunks + 1;

	for (uint64_t s = 0; s < steps; s++) {
		uint64_t pos = atomic_fetch_add_explicit(&p->h->hand, 1, memory_order_relaxed);
		uint32_t c = (uint32_t)(pos % p->g.chunks);
		uint64_t ctl = atomic_load_explicit(&p->chunks[c].ctl, memory_order_acquire);

		if (!pool_ctl_sound(p, ctl))
			return pool_broken(p, "chunk %u's control word %#llx is none sharedseg "
					   "writes", c, (unsigned long long)ctl);
		if (CTL_PINS(ctl) || CTL_STATE(ctl) == POOL_FILLING)
			continue;
		if (CTL_STATE(ctl) == POOL_READY && (ctl & CTL_REF)) {
			atomic_compare_exchange_strong(&p->chunks[c].ctl, &ctl, ctl & ~CTL_REF);
			continue;
		}
		if (take(p, c, ctl)) {
			*chunk = c;
			return 1;
		}
	}
	return 0;
}

/* Writes key into the chunk this slot took, seals it, and indexes it. */
static void fill_record(struct sseg_pool *p, uint32_t c, const struct pool_key *k,
			uint64_t hash)
{
	struct pool_chunk *rec = &p->chunks[c];
	uint64_t gen = CTL_GEN(atomic_load_explicit(&rec->ctl, memory_order_relaxed));

	for (size_t i = 0; i < ARRAY_SIZE(k->w); i++)
		atomic_store_explicit(&rec->key[i], k->w[i], memory_order_relaxed);
	atomic_store_explicit(&rec->seal, pool_seal(p, k, c, gen), memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	p->reserved[c] = 1;
	/* an index too full to hold it: the chunk is still stored, found by no one
	 * until evicted; counted as a duplicate would be */
	if (pool_index_insert(p, hash, c))
		atomic_fetch_add_explicit(&p->h->duplicates, 1, memory_order_relaxed);
}

static int reserve_one(struct sseg_pool *p, const struct pool_key *k, uint32_t *chunk)
{
	uint64_t hash = pool_key_hash(k), ctl;
	uint32_t c;
	int rc = pool_index_find(p, k, hash, true, &c, &ctl);

	*chunk = SSEG_POOL_NONE;
	if (rc)
		return rc < 0 ? rc : 0; /* there, or on its way */
	rc = clock_take(p, &c);
	if (rc == 0 && pool_reclaim_dead(p, false) > 0)
		rc = clock_take(p, &c);
	if (rc <= 0)
		return rc ? rc : -ENOSPC;
	fill_record(p, c, k, hash);
	*chunk = c;
	return 1;
}

static void give_back(struct sseg_pool *p, uint32_t c)
{
	struct pool_key k = pool_chunk_key(&p->chunks[c]);
	uint64_t ctl = atomic_load_explicit(&p->chunks[c].ctl, memory_order_relaxed);

	pool_index_remove(p, pool_key_hash(&k), c);
	p->reserved[c] = 0;
	/* FILLING with only our bit: free it; anything else (a reset made it
	 * free meanwhile): just our bit goes */
	if (!(CTL_STATE(ctl) == POOL_FILLING && CTL_PINS(ctl) == p->bit &&
	      atomic_compare_exchange_strong(&p->chunks[c].ctl, &ctl,
					     CTL_MAKE(CTL_GEN(ctl), POOL_FREE, 0))))
		let_go(p, c);
}

int sseg_pool_reserve(sseg_pool_t *p, const void *keys, int n, uint32_t *chunks)
{
	int rc = usable(p, "sseg_pool_reserve", keys, n), taken = 0;

	if (rc)
		return rc;
	if (n && !chunks)
		return sseg_err(-EINVAL, "sseg_pool_reserve: NULL chunks");
	for (int i = 0; i < n; i++)
		chunks[i] = SSEG_POOL_NONE;
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < n && rc >= 0; i++) {
		struct pool_key k = pool_key_of(keys, i);

		rc = reserve_one(p, &k, &chunks[i]);
		taken += rc > 0;
	}
	if (rc == -ENOSPC && !taken)
		sseg_err(rc, "pool '%s': every one of its %llu chunks is pinned or being filled",
			 p->g.name, (unsigned long long)p->g.chunks);
	else if (rc == -ENOSPC)
		rc = 0; /* what could be taken was: the rest stay NONE */
	if (rc < 0) /* nothing of this batch stays taken */
		for (int i = 0; i < n; i++)
			if (chunks[i] != SSEG_POOL_NONE) {
				give_back(p, chunks[i]);
				chunks[i] = SSEG_POOL_NONE;
			}
	pthread_mutex_unlock(&p->lock);
	return rc < 0 ? rc : taken;
}

static int check_reserved(struct sseg_pool *p, const char *what, const uint32_t *chunks, int n)
{
	for (int i = 0; i < n; i++) {
		int rc;

		if (chunks[i] == SSEG_POOL_NONE)
			continue;
		rc = check_chunk(p, what, chunks[i]);
		if (rc)
			return rc;
		if (!p->reserved[chunks[i]])
			return sseg_err(-EINVAL, "%s: chunk %u was not reserved by this handle", what,
					chunks[i]);
	}
	return 0;
}

/* Publishes chunk c: 1, or 0 where its key was published meanwhile by
 * another (ours is given back) or a reset took it. */
static int publish_one(struct sseg_pool *p, uint32_t c)
{
	struct pool_key k = pool_chunk_key(&p->chunks[c]);
	uint64_t ctl = atomic_load_explicit(&p->chunks[c].ctl, memory_order_relaxed), seen;
	uint32_t other;
	int rc = pool_index_find(p, &k, pool_key_hash(&k), false, &other, &seen);

	if (rc < 0)
		return rc;
	if (rc || CTL_STATE(ctl) != POOL_FILLING || CTL_PINS(ctl) != p->bit) {
		if (rc)
			atomic_fetch_add_explicit(&p->h->duplicates, 1, memory_order_relaxed);
		give_back(p, c);
		return 0;
	}
	if (!atomic_compare_exchange_strong_explicit(
		    &p->chunks[c].ctl, &ctl, CTL_MAKE(CTL_GEN(ctl), POOL_READY, 0) | CTL_REF,
		    memory_order_release, memory_order_relaxed)) {
		give_back(p, c);
		return 0;
	}
	p->reserved[c] = 0;
	return 1;
}

int sseg_pool_publish(sseg_pool_t *p, const uint32_t *chunks, int n)
{
	int rc = usable(p, "sseg_pool_publish", chunks, n), done = 0;

	if (rc)
		return rc;
	pthread_mutex_lock(&p->lock);
	rc = check_reserved(p, "sseg_pool_publish", chunks, n);
	for (int i = 0; !rc && i < n; i++) {
		if (chunks[i] == SSEG_POOL_NONE)
			continue;
		rc = publish_one(p, chunks[i]);
		if (rc > 0)
			done++;
		rc = rc < 0 ? rc : 0;
	}
	pthread_mutex_unlock(&p->lock);
	atomic_fetch_add_explicit(&p->h->stores, (uint64_t)done, memory_order_relaxed);
	if (p->slot >= 0)
		atomic_fetch_add_explicit(&p->slots[p->slot].stores, (uint64_t)done,
					  memory_order_relaxed);
	return rc < 0 ? rc : done;
}

int sseg_pool_abandon(sseg_pool_t *p, const uint32_t *chunks, int n)
{
	int rc = usable(p, "sseg_pool_abandon", chunks, n);

	if (rc)
		return rc;
	pthread_mutex_lock(&p->lock);
	rc = check_reserved(p, "sseg_pool_abandon", chunks, n);
	for (int i = 0; !rc && i < n; i++)
		if (chunks[i] != SSEG_POOL_NONE)
			give_back(p, chunks[i]);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int sseg_pool_drop(sseg_pool_t *p, const void *keys, int n)
{
	int rc = usable(p, "sseg_pool_drop", keys, n), dropped = 0;

	if (rc)
		return rc;
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < n; i++) {
		struct pool_key k = pool_key_of(keys, i);
		uint64_t hash = pool_key_hash(&k), ctl;
		uint32_t c;

		rc = pool_index_find(p, &k, hash, false, &c, &ctl);
		if (rc < 0)
			break;
		if (rc == 0) /* not there */
			continue;
		rc = 0;
		if (CTL_PINS(ctl) || CTL_STATE(ctl) != POOL_READY)
			continue;
		if (atomic_compare_exchange_strong(
			    &p->chunks[c].ctl, &ctl,
			    CTL_MAKE((CTL_GEN(ctl) + 1) & CTL_GEN_MASK, POOL_FREE, 0))) {
			pool_index_remove(p, hash, c);
			dropped++;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return rc < 0 ? rc : dropped;
}
