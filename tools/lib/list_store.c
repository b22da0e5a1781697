/* SPDX-License-Identifier: Apache-2.0 */
/* What a listing holds (list.c fills it, list_json.c renders it): segments
 * found by key through an open-addressing index, so that the work grows
 * linearly with what is found, up to the caps in list_store.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list_store.h"

void *sseg_list_grown(void *items, int *cap, size_t size)
{
	int more = *cap ? *cap * 2 : 64;
	void *p = realloc(items, (size_t)more * size);

	if (p)
		*cap = more;
	return p;
}

/* Room in the index for one more segment, keeping it at most half full. */
static bool index_room(struct sseg_list *l)
{
	size_t cap = l->index_cap ? l->index_cap : 256;
	int *index;

	if ((size_t)(l->n + 1) * 2 <= l->index_cap)
		return true;
	while ((size_t)(l->n + 1) * 2 > cap)
		cap *= 2;
	index = calloc(cap, sizeof(*index));
	if (!index)
		return false;
	for (int i = 0; i < l->n; i++) {
		size_t at = l->segs[i].key & (cap - 1);

		while (index[at])
			at = (at + 1) & (cap - 1);
		index[at] = i + 1;
	}
	free(l->index);
	l->index = index;
	l->index_cap = cap;
	return true;
}

typedef bool same_fn(const struct sseg_listed *s, const void *key);

/* The segment of hash k that same() accepts, or a new one in its slot;
 * -1 at a cap or out of memory. */
static int segment_by(struct sseg_list *l, uint64_t k, same_fn *same, const void *key,
		      bool *added)
{
	struct sseg_listed *s;
	size_t at;

	*added = false;
	if (!index_room(l))
		goto nomem;
	for (at = k & (l->index_cap - 1); l->index[at]; at = (at + 1) & (l->index_cap - 1)) {
		s = &l->segs[l->index[at] - 1];
		if (s->key == k && same(s, key))
			return l->index[at] - 1;
	}
	if (l->n == SSEG_LIST_MAX_SEGMENTS) {
		l->truncated = true;
		return -1;
	}
	if (l->n == l->cap) {
		void *more = sseg_list_grown(l->segs, &l->cap, sizeof(*l->segs));

		if (!more)
			goto nomem;
		l->segs = more;
	}
	s = &l->segs[l->n];
	memset(s, 0, sizeof(*s));
	s->key = k;
	s->world = s->owner_rank = -1;
	s->first = s->last = -1;
	snprintf(s->backend, sizeof(s->backend), "memfd");
	l->index[at] = ++l->n;
	*added = true;
	return l->n - 1;
nomem:
	l->nomem = true;
	return -1;
}

struct inode_key {
	uint64_t dev, ino;
};

static bool same_inode(const struct sseg_listed *s, const void *key)
{
	const struct inode_key *k = key;

	return s->dev == k->dev && s->ino == k->ino;
}

int sseg_list_memfd_segment(struct sseg_list *l, uint64_t dev, uint64_t ino, const char *name)
{
	struct inode_key k = { dev, ino };
	bool added;
	int seg = segment_by(l, sseg_hash64(&k, sizeof(k), 1), same_inode, &k, &added);

	if (added) {
		l->segs[seg].dev = dev;
		l->segs[seg].ino = ino;
		snprintf(l->segs[seg].name, sizeof(l->segs[seg].name), "%s", name);
	}
	return seg;
}

static bool same_driver(const struct sseg_listed *s, const void *key)
{
	const struct sseg_driver_key *k = key;

	return !s->ino && s->uid == k->uid && !strcmp(s->name, k->name) &&
	       !strcmp(s->backend, k->backend) && !strcmp(s->pages, k->pages) &&
	       s->size == k->size && s->page_size == k->page && s->world == k->world &&
	       s->owner_rank == k->owner && !strcmp(s->group, k->group);
}

static uint64_t driver_hash(const struct sseg_driver_key *k)
{
	uint64_t numbers[5] = { (uint64_t)k->uid, k->size, k->page, (uint64_t)k->world,
				(uint64_t)k->owner };
	uint64_t h = sseg_hash64(numbers, sizeof(numbers), 2);

	h = sseg_hash64(k->name, strlen(k->name) + 1, h);
	h = sseg_hash64(k->backend, strlen(k->backend) + 1, h);
	h = sseg_hash64(k->group, strlen(k->group) + 1, h);
	return sseg_hash64(k->pages, strlen(k->pages) + 1, h);
}

int sseg_list_driver_segment(struct sseg_list *l, const struct sseg_driver_key *k)
{
	bool added;
	int seg = segment_by(l, driver_hash(k), same_driver, k, &added);
	struct sseg_listed *s;

	if (!added)
		return seg;
	s = &l->segs[seg];
	snprintf(s->name, sizeof(s->name), "%s", k->name);
	snprintf(s->backend, sizeof(s->backend), "%s", k->backend);
	snprintf(s->pages, sizeof(s->pages), "%s", k->pages);
	snprintf(s->group, sizeof(s->group), "%s", k->group);
	s->uid = k->uid;
	s->size = k->size;
	s->page_size = k->page;
	s->world = k->world;
	s->owner_rank = k->owner;
	return seg;
}

void sseg_list_free(struct sseg_list *l)
{
	free(l->pools);
	free(l->segs);
	free(l->holders);
	free(l->procs);
	free(l->index);
	memset(l, 0, sizeof(*l));
}
