/* SPDX-License-Identifier: Apache-2.0 */
/* Opening and closing a pool, making a new one, and what it holds now. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "keeper_wire.h"
#include "os/claim.h"
#include "os/hugepage.h"
#include "os/memfd.h"
#include "pages.h"
#include "pool/pool.h"

static int check_opts(const struct sseg_pool_opts *o)
{
	int rc;

	if (!o || o->sz < offsetof(struct sseg_pool_opts, keeper) + sizeof(o->keeper))
		return sseg_err(-EINVAL, "sseg_pool_open: options missing or from an older header "
				"(set .sz with SSEG_POOL_OPTS)");
	if (o->sz > sizeof(*o))
		for (size_t i = sizeof(*o); i < o->sz; i++)
			if (((const uint8_t *)o)[i])
				return sseg_err(-EINVAL, "sseg_pool_open: options from a newer header "
						"set fields this library does not know");
	rc = sseg_keep_check_name(o->name);
	if (rc)
		return sseg_err(rc, "a pool's name must be 1 to %u bytes of [A-Za-z0-9._-]: "
				"'%s'", SSEG_NAME_MAX, o->name ? o->name : "(null)");
	if (o->meaning && strlen(o->meaning) > SSEG_POOL_MEANING_MAX)
		return sseg_err(-EINVAL, "pool '%s': its meaning is %zu bytes, at most %u", o->name,
				strlen(o->meaning), SSEG_POOL_MEANING_MAX);
	if (o->chunk_size % 64)
		return sseg_err(-EINVAL, "pool '%s': chunk_size %llu is not a multiple of 64",
				o->name, (unsigned long long)o->chunk_size);
	if (o->chunks > (1ull << 31))
		return sseg_err(-EINVAL, "pool '%s': %llu chunks, at most 2^31", o->name,
				(unsigned long long)o->chunks);
	if (o->flags & ~(SSEG_POOL_MAP_ONLY | SSEG_POOL_EXISTING | SSEG_POOL_OBSERVE))
		return sseg_err(-EINVAL, "pool '%s': unknown flags %#x", o->name, o->flags);
	if (o->keeper && sseg_keep_check_name(o->keeper))
		return -EINVAL;
	return 0;
}

static uint64_t round64(uint64_t v)
{
	return (v + 63) & ~63ull;
}

/* Where everything lies in a pool of o's size, on pages of page_size. */
static int lay_out(const struct sseg_pool_opts *o, uint64_t page_size, struct pool_geometry *g)
{
	uint64_t data, align = page_size > SSEG_2M ? page_size : SSEG_2M;

	memset(g, 0, sizeof(*g));
	g->magic = POOL_MAGIC;
	g->format = POOL_FORMAT;
	g->slots = SSEG_POOL_SLOTS;
	snprintf(g->name, sizeof(g->name), "%s", o->name);
	snprintf(g->meaning, sizeof(g->meaning), "%s", o->meaning ? o->meaning : "");
	g->chunk_size = o->chunk_size;
	g->chunks = o->chunks;
	for (g->buckets = 64; g->buckets < 2 * g->chunks;)
		g->buckets *= 2;
	g->slots_off = round64(sizeof(struct pool_header));
	g->chunks_off = round64(g->slots_off + g->slots * sizeof(struct pool_slot));
	g->index_off = round64(g->chunks_off + g->chunks * sizeof(struct pool_chunk));
	if (sseg_round_up(g->index_off + g->buckets * 8, align, &g->data_off) ||
	    __builtin_mul_overflow(g->chunks, g->chunk_size, &data) ||
	    __builtin_add_overflow(g->data_off, data, &g->total) ||
	    sseg_round_up(g->total, page_size, &g->total) || g->total > (1ull << 50))
		return sseg_err(-EOVERFLOW, "pool '%s': %llu chunks of %llu bytes is more than "
				"this library maps", o->name, (unsigned long long)o->chunks,
				(unsigned long long)o->chunk_size);
	g->page_size = page_size;
	g->created = (uint64_t)time(NULL);
	return 0;
}

static int new_id(uint8_t id[16])
{
	if (getrandom(id, 16, 0) != 16)
		return sseg_err(-errno, "getrandom: %s", strerror(errno));
	return 0;
}

int pool_make(const struct sseg_pool_opts *o, int *fd, uint64_t *size)
{
	struct sseg_page_choice pc;
	struct pool_geometry g;
	struct pool_header *h;
	bool hugetlb;
	int rc;

	if (!o->chunk_size || !o->chunks)
		return sseg_err(-EINVAL, "pool '%s' does not exist yet: its chunk_size and chunks "
				"are needed to make it", o->name);
	rc = lay_out(o, 4096, &g);
	if (!rc)
		rc = sseg_pages_choose(o->pages, g.total, &pc);
	if (!rc)
		rc = lay_out(o, pc.page_size, &g);
	if (!rc)
		rc = new_id(g.id);
	if (rc)
		return rc;
	g.pages = (uint32_t)pc.pages;
	hugetlb = pc.pages == SSEG_PAGES_HUGETLB_2M || pc.pages == SSEG_PAGES_HUGETLB_1G;
	if (!hugetlb && (rc = sseg_memory_fits(g.total, "the pool")))
		return rc;
	rc = sseg_os_memfd_create("sseg-pool", g.total, hugetlb ? pc.page_size : 0, fd);
	if (!rc && hugetlb)
		rc = sseg_os_memfd_allocate(*fd, g.total);
	if (!rc) /* its size for good: a keeper takes only a memfd sealed so */
		rc = sseg_os_memfd_seal(*fd, false);
	if (rc)
		goto fail;
	h = mmap(NULL, g.data_off, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (h == MAP_FAILED) {
		rc = sseg_err(-errno, "pool '%s': cannot map its header: %s", o->name,
			      strerror(errno));
		goto fail;
	}
	h->g = g; /* the rest of a new memfd reads zero: free chunks, empty buckets */
	h->checksum = pool_geometry_sum(&g);
	munmap(h, g.data_off);
	*size = g.total;
	return 0;
fail:
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	return rc;
}

static int map_pool(struct sseg_pool *p, uint64_t size)
{
	struct pool_header *h;

	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
	if (h == MAP_FAILED)
		return sseg_err(-errno, "cannot map the pool (%llu bytes): %s",
				(unsigned long long)size, strerror(errno));
	p->base = h;
	p->g = h->g;
	if (pool_geometry_check(&p->g, h->checksum, size))
		return -EBADMSG;
	if (p->g.pages == SSEG_PAGES_THP)
		sseg_os_madvise_hugepage((uint8_t *)h + p->g.data_off, p->g.total - p->g.data_off);
	p->h = h;
	p->slots = (struct pool_slot *)((uint8_t *)h + p->g.slots_off);
	p->chunks = (struct pool_chunk *)((uint8_t *)h + p->g.chunks_off);
	p->index = (_Atomic uint64_t *)((uint8_t *)h + p->g.index_off);
	p->data = (uint8_t *)h + p->g.data_off;
	memcpy(&p->id64, p->g.id, sizeof(p->id64));
	return 0;
}

static void unmap_pool(struct sseg_pool *p, uint64_t size)
{
	if (p->base)
		munmap(p->base, size);
	if (p->fd >= 0)
		close(p->fd);
	free(p->pins);
	free(p->reserved);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static int attach(struct sseg_pool *p, const struct sseg_pool_opts *o, uint64_t size)
{
	int rc = map_pool(p, size);

	if (!rc)
		rc = pool_declaration_check(&p->g, o);
	/* in use, as a keeper asks of what it holds: never freed for a segment
	 * of the same name while a process has the pool open */
	if (!rc)
		rc = sseg_os_memfd_claim(p->fd);
	if (rc || POOL_MAP_ONLY(o))
		return rc;
	p->pins = calloc(p->g.chunks, sizeof(*p->pins));
	p->reserved = calloc(p->g.chunks, 1);
	if (!p->pins || !p->reserved)
		return sseg_err(-ENOMEM, "pool '%s': no memory for this process's pins of %llu "
				"chunks", p->g.name, (unsigned long long)p->g.chunks);
	rc = pool_slot_take(p);
	if (!rc)
		pool_reclaim_dead(p, false);
	return rc;
}

int sseg_pool_open(const struct sseg_pool_opts *o, sseg_pool_t **out)
{
	struct pool_found f;
	struct sseg_pool *p;
	int rc;

	sseg_err_clear();
	if (!out)
		return sseg_err(-EINVAL, "sseg_pool_open: NULL result");
	*out = NULL;
	rc = check_opts(o);
	if (rc)
		return rc;
	p = calloc(1, sizeof(*p));
	if (!p)
		return sseg_err(-ENOMEM, "sseg_pool_open: out of memory");
	p->fd = -1;
	p->slot = -1;
	pthread_mutex_init(&p->lock, NULL);
	rc = pool_find(o, &f);
	if (rc) {
		unmap_pool(p, 0);
		return rc;
	}
	p->fd = f.fd;
	p->created = f.created;
	p->kept = f.kept == 1;
	rc = attach(p, o, f.size);
	if (rc) {
		pool_slot_leave(p);
		pool_found_done(&f, NULL);
		unmap_pool(p, f.size);
		return rc;
	}
	/* made here, or open elsewhere while the keeper holds none of its name
	 * (restarted since): left with the keeper */
	if (o->keeper && !f.keeper_silent && !(o->flags & SSEG_POOL_OBSERVE) &&
	    (p->created || f.kept == 0))
		p->kept = pool_keep(o, p, f.keeper_deadline) == 0;
	/* an observer is found by no one: it keeps nobody's pool findable */
	pool_found_done(&f, o->flags & SSEG_POOL_OBSERVE ? NULL : p);
	*out = p;
	return 0;
}

void sseg_pool_close(sseg_pool_t *p)
{
	if (!p)
		return;
	pool_forget(p);
	pool_slot_leave(p); /* our pins and reservations go with the slot */
	unmap_pool(p, p->g.total);
}

void *sseg_pool_chunk(const sseg_pool_t *p, uint32_t chunk)
{
	if (!p || chunk >= p->g.chunks)
		return NULL;
	return p->data + (uint64_t)chunk * p->g.chunk_size;
}

static void count_chunks(const struct sseg_pool *p, struct sseg_pool_info *in)
{
	for (uint32_t c = 0; c < p->g.chunks; c++) {
		uint64_t ctl = atomic_load_explicit(&p->chunks[c].ctl, memory_order_relaxed);

		in->used += CTL_STATE(ctl) == POOL_READY;
		in->filling += CTL_STATE(ctl) == POOL_FILLING;
		in->free += CTL_STATE(ctl) == POOL_FREE;
		in->pinned += CTL_STATE(ctl) == POOL_READY && CTL_PINS(ctl);
	}
}

int sseg_pool_info(sseg_pool_t *p, struct sseg_pool_info *in)
{
	struct sseg_pool_info mine;
	struct stat st;

	sseg_err_clear();
	if (!p || !in || in->sz < offsetof(struct sseg_pool_info, last_reset))
		return sseg_err(-EINVAL, "sseg_pool_info: NULL or short argument (set .sz)");
	memset(&mine, 0, sizeof(mine));
	snprintf(mine.name, sizeof(mine.name), "%s", p->g.name);
	snprintf(mine.meaning, sizeof(mine.meaning), "%s", p->g.meaning);
	mine.chunk_size = p->g.chunk_size;
	mine.chunks = p->g.chunks;
	mine.size = p->g.total;
	if (!fstat(p->fd, &st))
		mine.inode = (uint64_t)st.st_ino;
	mine.pages = (enum sseg_pages)p->g.pages;
	mine.page_size = p->g.page_size;
	mine.base = p->base;
	mine.slot = p->slot;
	mine.created = p->created;
	mine.kept = p->kept;
	count_chunks(p, &mine);
	for (uint32_t s = 0; s < p->g.slots; s++)
		mine.attached += pool_slot_live(p, (int)s) == 1;
	mine.hits = atomic_load(&p->h->hits);
	mine.misses = atomic_load(&p->h->misses);
	mine.stores = atomic_load(&p->h->stores);
	mine.evictions = atomic_load(&p->h->evictions);
	mine.reclaims = atomic_load(&p->h->reclaims);
	mine.duplicates = atomic_load(&p->h->duplicates);
	mine.resets = atomic_load(&p->h->resets);
	memcpy(mine.last_reset, p->h->last_reset, sizeof(mine.last_reset));
	mine.last_reset[sizeof(mine.last_reset) - 1] = '\0';
	mine.sz = in->sz < sizeof(mine) ? in->sz : sizeof(mine);
	memcpy(in, &mine, mine.sz);
	return 0;
}

int sseg_pool_attached(sseg_pool_t *p, int *pids)
{
	sseg_err_clear();
	if (!p || !pids)
		return sseg_err(-EINVAL, "sseg_pool_attached: NULL argument");
	for (uint32_t s = 0; s < SSEG_POOL_SLOTS; s++) {
		int live = s < p->g.slots ? pool_slot_live(p, (int)s) : 0;

		pids[s] = live == 1 ? (int)atomic_load(&p->slots[s].pid) : 0;
	}
	return 0;
}
