/* SPDX-License-Identifier: Apache-2.0 */
/* What a process of the same user may have written into a pool, found and
 * undone: a geometry that does not match its checksum, a control word or a
 * bucket this library never writes, a record whose key does not match its
 * seal. The reset forgets every key: each chunk becomes free in a new
 * generation, keeping its pins (bytes being read stay until their readers
 * let go; a dead process's pins go when its slot is reclaimed), and the
 * index is cleared. Operations
 * in flight meanwhile see free chunks and empty buckets, and serve
 * nothing. */
#include <stdio.h>
#include <string.h>

#include "pool/pool.h"

bool pool_ctl_sound(const struct sseg_pool *p, uint64_t ctl)
{
	uint32_t slots = p->g.slots >= 32 ? UINT32_MAX : (1u << p->g.slots) - 1;
	uint32_t pins = CTL_PINS(ctl);

	if (CTL_STATE(ctl) == POOL_BAD || (pins & ~slots))
		return false;
	/* a store has one writer: its bit alone */
	return CTL_STATE(ctl) != POOL_FILLING || (pins && !(pins & (pins - 1)));
}

static void reset(struct sseg_pool *p, const char *why)
{
	snprintf(p->h->last_reset, sizeof(p->h->last_reset), "%s", why);
	for (uint32_t c = 0; c < p->g.chunks; c++) {
		_Atomic uint64_t *ctl = &p->chunks[c].ctl;
		uint64_t seen = atomic_load(ctl), want;

		do {
			/* pins stay: a process attached a moment ago may be reading;
			 * a dead one's go with its slot (slots.c) */
			uint32_t pins = pool_ctl_sound(p, seen) ? CTL_PINS(seen) : 0;

			want = CTL_MAKE((CTL_GEN(seen) + 1) & CTL_GEN_MASK, POOL_FREE, pins);
		} while (!atomic_compare_exchange_weak(ctl, &seen, want));
	}
	pool_index_clear(p);
	/* a geometry scribbled on is written back from this process's copy */
	if (memcmp(&p->h->g, &p->g, sizeof(p->g)) || p->h->checksum != pool_geometry_sum(&p->g)) {
		memcpy(&p->h->g, &p->g, sizeof(p->g));
		p->h->checksum = pool_geometry_sum(&p->g);
	}
	atomic_fetch_add(&p->h->resets, 1);
}

int pool_broken(struct sseg_pool *p, const char *fmt, ...)
{
	char what[SSEG_POOL_WHY_MAX - 64], why[SSEG_POOL_WHY_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(why, sizeof(why), "pool '%s' was reset: %s", p->g.name, what);
	reset(p, why);
	sseg_log(SSEG_LOG_WARN, "%s", why);
	return sseg_err(-EBADMSG, "%s", why);
}

uint64_t pool_geometry_sum(const struct pool_geometry *g)
{
	return sseg_hash64(g, sizeof(*g), POOL_MAGIC);
}

int pool_geometry_check(const struct pool_geometry *g, uint64_t sum, uint64_t size)
{
	uint64_t need = g->data_off + g->chunks * g->chunk_size;

	if (g->magic != POOL_MAGIC)
		return sseg_err(-EBADMSG, "the memfd holds no sharedseg pool (magic %#llx)",
				(unsigned long long)g->magic);
	if (g->format != POOL_FORMAT)
		return sseg_err(-EPROTO, "pool '%.*s' is of format %u; this library reads format "
				"%u", (int)SSEG_NAME_MAX, g->name, g->format, POOL_FORMAT);
	if (sum != pool_geometry_sum(g))
		return sseg_err(-EBADMSG, "pool '%.*s': its header does not match its checksum "
				"(written by something other than sharedseg)", (int)SSEG_NAME_MAX,
				g->name);
	/* a matching checksum over nonsense is still refused */
	if (!g->chunks || g->chunks > (1ull << 31) || !g->chunk_size || g->chunk_size % 64 ||
	    g->slots == 0 || g->slots > SSEG_POOL_SLOTS || !sseg_is_pow2(g->buckets) ||
	    g->buckets < g->chunks || g->slots_off < sizeof(struct pool_header) ||
	    g->chunks_off < g->slots_off + g->slots * sizeof(struct pool_slot) ||
	    g->index_off < g->chunks_off + g->chunks * sizeof(struct pool_chunk) ||
	    g->data_off < g->index_off + g->buckets * 8 || need > size || g->total > size ||
	    g->chunk_size > size || g->name[SSEG_NAME_MAX] || g->meaning[SSEG_POOL_MEANING_MAX])
		return sseg_err(-EBADMSG, "pool '%.*s': its geometry does not fit its %llu bytes",
				(int)SSEG_NAME_MAX, g->name, (unsigned long long)size);
	return 0;
}

/* The n-th ';'-separated field of s, in buf. */
static void field(const char *s, int n, char *buf, size_t len)
{
	const char *end;

	for (; n > 0 && s; n--) {
		s = strchr(s, ';');
		s = s ? s + 1 : NULL;
	}
	if (!s) {
		snprintf(buf, len, "(none)");
		return;
	}
	end = strchr(s, ';');
	snprintf(buf, len, "%.*s", (int)(end ? (size_t)(end - s) : strlen(s)), s);
}

static int meaning_differs(const struct pool_geometry *g, const char *mine)
{
	char a[128], b[128];

	for (int n = 0;; n++) {
		field(g->meaning, n, a, sizeof(a));
		field(mine, n, b, sizeof(b));
		if (strcmp(a, b))
			return sseg_err(-EINVAL, "pool '%s' means something else: its field %d is "
					"'%s', this process declares '%s' (a pool holds keys of "
					"one meaning; name another pool)", g->name, n + 1, a, b);
	}
}

int pool_declaration_check(const struct pool_geometry *g, const struct sseg_pool_opts *o)
{
	const char *mine = o->meaning ? o->meaning : "";
	char have[32], want[32];

	/* what the bytes mean first: it says why the sizes differ too */
	if (o->meaning && strcmp(mine, g->meaning))
		return meaning_differs(g, mine);
	if (o->chunk_size && o->chunk_size != g->chunk_size) {
		sseg_format_size(g->chunk_size, have, sizeof(have));
		sseg_format_size(o->chunk_size, want, sizeof(want));
		return sseg_err(-EINVAL, "pool '%s' has chunks of %s; this process declares %s",
				g->name, have, want);
	}
	if (o->chunks && o->chunks != g->chunks)
		return sseg_err(-EINVAL, "pool '%s' has %llu chunks; this process declares %llu",
				g->name, (unsigned long long)g->chunks,
				(unsigned long long)o->chunks);
	return 0;
}

/* This process's bit where this handle neither pins nor fills: written by
 * something else, it would keep the chunk for as long as this process
 * lives. */
static void forget_phantoms(struct sseg_pool *p)
{
	if (p->slot < 0)
		return;
	pthread_mutex_lock(&p->lock);
	for (uint32_t c = 0; c < p->g.chunks; c++) {
		_Atomic uint64_t *ctl = &p->chunks[c].ctl;
		uint64_t seen = atomic_load(ctl);

		if (!(CTL_PINS(seen) & p->bit) || p->pins[c] || p->reserved[c])
			continue;
		if (CTL_STATE(seen) == POOL_FILLING && CTL_PINS(seen) == p->bit)
			atomic_compare_exchange_strong(ctl, &seen,
						       CTL_MAKE(CTL_GEN(seen), POOL_FREE, 0));
		else
			atomic_fetch_and(ctl, ~(uint64_t)p->bit);
	}
	pthread_mutex_unlock(&p->lock);
}

int sseg_pool_check(sseg_pool_t *p)
{
	sseg_err_clear();
	if (!p)
		return sseg_err(-EINVAL, "sseg_pool_check: NULL pool");
	pool_reclaim_dead(p, true);
	forget_phantoms(p);
	if (memcmp(&p->h->g, &p->g, sizeof(p->g)) || p->h->checksum != pool_geometry_sum(&p->g))
		return pool_broken(p, "its header was changed since it was made");
	for (uint32_t c = 0; c < p->g.chunks; c++) {
		uint64_t ctl = atomic_load(&p->chunks[c].ctl);
		struct pool_key k;

		if (!pool_ctl_sound(p, ctl))
			return pool_broken(p, "chunk %u's control word %#llx is none sharedseg "
					   "writes", c, (unsigned long long)ctl);
		if (CTL_STATE(ctl) != POOL_READY)
			continue;
		k = pool_chunk_key(&p->chunks[c]);
		if (atomic_load(&p->chunks[c].seal) != pool_seal(p, &k, c, CTL_GEN(ctl)) &&
		    atomic_load(&p->chunks[c].ctl) == ctl)
			return pool_broken(p, "chunk %u's record does not match its seal (its key "
					   "or generation was written by something other than "
					   "sharedseg)", c);
	}
	for (uint64_t b = 0; b < p->g.buckets; b++) {
		uint64_t e = atomic_load(&p->index[b]);

		if (e && e != ~0ull && ((uint32_t)e == 0 || (uint32_t)e - 1 >= p->g.chunks))
			return pool_broken(p, "index bucket %llu names chunk %u of %llu",
					   (unsigned long long)b, (uint32_t)e - 1,
					   (unsigned long long)p->g.chunks);
	}
	return 0;
}
