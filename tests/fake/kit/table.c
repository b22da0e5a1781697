/* SPDX-License-Identifier: Apache-2.0 */
/* Slot tables, read through the first members every slot type shares. */
#include "table.h"

static char *slot(struct fk_table t, int i)
{
	return (char *)t.slots + (size_t)i * t.stride;
}

static uintptr_t start_of(const char *s)
{
	return *(const uintptr_t *)s;
}

static size_t size_of(const char *s)
{
	return *(const size_t *)(s + sizeof(uintptr_t));
}

void *fk_free_slot(struct fk_table t)
{
	for (int i = 0; i < t.n; i++)
		if (!start_of(slot(t, i)))
			return slot(t, i);
	return NULL;
}

void *fk_slot_at(struct fk_table t, uintptr_t start)
{
	for (int i = 0; start && i < t.n; i++)
		if (start_of(slot(t, i)) == start)
			return slot(t, i);
	return NULL;
}

void *fk_slot_holding(struct fk_table t, uintptr_t p)
{
	for (int i = 0; i < t.n; i++) {
		uintptr_t lo = start_of(slot(t, i));

		if (lo && p >= lo && p - lo < size_of(slot(t, i)))
			return slot(t, i);
	}
	return NULL;
}

int fk_live(struct fk_table t)
{
	int live = 0;

	for (int i = 0; i < t.n; i++)
		live += start_of(slot(t, i)) != 0;
	return live;
}

size_t fk_overlap(struct fk_table t, uintptr_t start, size_t size)
{
	uintptr_t end = start + size;
	size_t bytes = 0;

	for (int i = 0; i < t.n; i++) {
		uintptr_t lo = start_of(slot(t, i)), hi = lo + size_of(slot(t, i));

		if (!lo || hi <= start || lo >= end)
			continue;
		bytes += (hi < end ? hi : end) - (lo > start ? lo : start);
	}
	return bytes;
}

/* The used slot with the lowest key from after on, or NULL. */
static char *lowest_from(struct fk_table t, uintptr_t after)
{
	char *found = NULL;

	for (int i = 0; i < t.n; i++) {
		uintptr_t key = start_of(slot(t, i));

		if (key && key >= after && (!found || key < start_of(found)))
			found = slot(t, i);
	}
	return found;
}

void *fk_nth(struct fk_table t, int i)
{
	char *found = NULL;
	uintptr_t after = 0;

	for (int k = 0; k <= i; k++, after = start_of(found) + 1) {
		found = lowest_from(t, after);
		if (!found)
			return NULL;
	}
	return found;
}
