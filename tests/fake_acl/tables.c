/* The fixed tables of what the fake runtime holds in this process: ranges
 * (reservations, mappings, registrations) and physical handles. Callers
 * hold the lock. */
#include "fake_acl.h"

struct fake_range *fake_range_slot(struct fake_range *table)
{
	for (int i = 0; i < FAKE_MAX_RANGES; i++)
		if (!table[i].start)
			return &table[i];
	return NULL;
}

struct fake_range *fake_range_at(struct fake_range *table, uintptr_t start)
{
	for (int i = 0; start && i < FAKE_MAX_RANGES; i++)
		if (table[i].start == start)
			return &table[i];
	return NULL;
}

struct fake_range *fake_range_holding(struct fake_range *table, uintptr_t p)
{
	for (int i = 0; i < FAKE_MAX_RANGES; i++)
		if (table[i].start && p >= table[i].start && p - table[i].start < table[i].size)
			return &table[i];
	return NULL;
}

int fake_range_live(const struct fake_range *table)
{
	int live = 0;

	for (int i = 0; i < FAKE_MAX_RANGES; i++)
		live += table[i].start != 0;
	return live;
}

size_t fake_range_overlap(const struct fake_range *table, uintptr_t start, size_t size)
{
	uintptr_t end = start + size;
	size_t bytes = 0;

	for (int i = 0; i < FAKE_MAX_RANGES; i++) {
		uintptr_t lo = table[i].start, hi = lo + table[i].size;

		if (!lo || hi <= start || lo >= end)
			continue;
		bytes += (hi < end ? hi : end) - (lo > start ? lo : start);
	}
	return bytes;
}

struct fake_handle *fake_handle_find(uintptr_t id)
{
	for (int i = 0; id && i < FAKE_MAX_HANDLES; i++)
		if (fake.handles[i].id == id)
			return &fake.handles[i];
	return NULL;
}

struct fake_handle *fake_handle_slot(void)
{
	for (int i = 0; i < FAKE_MAX_HANDLES; i++)
		if (!fake.handles[i].id)
			return &fake.handles[i];
	return NULL;
}
