/* SPDX-License-Identifier: Apache-2.0 */
/* Slots: a process that pins or stores holds one, and a write lock on byte
 * POOL_LOCK_BASE + slot of its own open file description of the pool's
 * memfd. The kernel drops that lock when the description goes, after the
 * process's last fd and mapping of it, however the process ended: a slot
 * whose lock anyone can take belongs to no live process, and whoever takes
 * the lock frees what the slot held (its bit in every control word) before
 * using or releasing it. */
#define _GNU_SOURCE /* F_OFD_SETLK, F_OFD_GETLK */
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pool/pool.h"

static struct flock slot_lock(int s, short type)
{
	return (struct flock){ .l_type = type, .l_whence = SEEK_SET,
			       .l_start = POOL_LOCK_BASE + s, .l_len = 1 };
}

static int lock_slot(const struct sseg_pool *p, int s, short type)
{
	struct flock l = slot_lock(s, type);

	if (!fcntl(p->fd, F_OFD_SETLK, &l))
		return 1;
	if (errno == EAGAIN || errno == EACCES)
		return 0;
	return sseg_err(-errno, "pool '%s': cannot lock slot %d (F_OFD_SETLK): %s", p->g.name, s,
			strerror(errno));
}

int pool_slot_live(const struct sseg_pool *p, int s)
{
	struct flock l = slot_lock(s, F_WRLCK);

	if (s == p->slot)
		return 1;
	if (fcntl(p->fd, F_OFD_GETLK, &l))
		return sseg_err(-errno, "pool '%s': cannot ask who holds slot %d (F_OFD_GETLK): %s",
				p->g.name, s, strerror(errno));
	return l.l_type != F_UNLCK;
}

/* Frees what slot s held; the caller holds its lock. Returns whether it
 * held anything. */
static bool reclaim(struct sseg_pool *p, int s)
{
	uint32_t bit = 1u << s;
	bool any = false;

	for (uint32_t c = 0; c < p->g.chunks; c++) {
		_Atomic uint64_t *ctl = &p->chunks[c].ctl;
		uint64_t seen = atomic_load_explicit(ctl, memory_order_acquire);

		if (!(CTL_PINS(seen) & bit))
			continue;
		any = true;
		if (CTL_STATE(seen) == POOL_FILLING) {
			/* a store it never finished: out of the index, then free */
			struct pool_key k = pool_chunk_key(&p->chunks[c]);

			pool_index_remove(p, pool_key_hash(&k), c);
			if (atomic_compare_exchange_strong(
				    ctl, &seen, CTL_MAKE(CTL_GEN(seen), POOL_FREE, CTL_PINS(seen) & ~bit)))
				continue;
		}
		atomic_fetch_and_explicit(ctl, ~(uint64_t)bit, memory_order_acq_rel);
	}
	if (atomic_load_explicit(&p->slots[s].pid, memory_order_relaxed))
		any = true;
	memset((void *)&p->slots[s], 0, sizeof(p->slots[s]));
	if (any)
		atomic_fetch_add_explicit(&p->h->reclaims, 1, memory_order_relaxed);
	return any;
}

int pool_slot_take(struct sseg_pool *p)
{
	for (int s = 0; s < (int)p->g.slots; s++) {
		int rc = lock_slot(p, s, F_WRLCK);

		if (rc < 0)
			return rc;
		if (!rc)
			continue;
		reclaim(p, s);
		p->slot = s;
		p->bit = 1u << s;
		atomic_store(&p->slots[s].since, (uint64_t)time(NULL));
		atomic_store(&p->slots[s].pid, (uint64_t)getpid());
		return 0;
	}
	return sseg_err(-EUSERS, "pool '%s': all %u slots are held by live processes (at most "
			"%u processes can pin or store at once; a process that only copies "
			"bytes opens it with SSEG_POOL_MAP_ONLY)", p->g.name, p->g.slots,
			p->g.slots);
}

void pool_slot_leave(struct sseg_pool *p)
{
	struct flock l = slot_lock(p->slot, F_UNLCK);

	if (p->slot < 0)
		return;
	reclaim(p, p->slot); /* our own leftovers: not a reclaim of the dead */
	atomic_fetch_sub_explicit(&p->h->reclaims, 1, memory_order_relaxed);
	fcntl(p->fd, F_OFD_SETLK, &l);
	p->slot = -1;
}

/* The slots whose bit some control word has. */
static uint32_t bits_in_use(const struct sseg_pool *p)
{
	uint32_t bits = 0;

	for (uint32_t c = 0; c < p->g.chunks; c++)
		bits |= CTL_PINS(atomic_load_explicit(&p->chunks[c].ctl, memory_order_relaxed));
	return bits;
}

int pool_reclaim_dead(struct sseg_pool *p, bool every)
{
	uint32_t bits = every ? bits_in_use(p) : 0;
	int freed = 0;

	for (int s = 0; s < (int)p->g.slots; s++) {
		struct flock l = slot_lock(s, F_UNLCK);

		if (s == p->slot || (!(bits & (1u << s)) &&
				     !atomic_load_explicit(&p->slots[s].pid, memory_order_relaxed)))
			continue;
		if (lock_slot(p, s, F_WRLCK) != 1)
			continue;
		freed += reclaim(p, s);
		fcntl(p->fd, F_OFD_SETLK, &l);
	}
	return freed;
}
