/* The fixed tables of what the fake driver holds. Callers hold the lock. */
#include "fake_cuda.h"

struct fake_range *fake_range_slot(struct fake_range *table, int n)
{
	for (int i = 0; i < n; i++)
		if (!table[i].start)
			return &table[i];
	return NULL;
}

struct fake_range *fake_range_at(struct fake_range *table, int n, uintptr_t start)
{
	for (int i = 0; i < n; i++)
		if (table[i].start && table[i].start == start)
			return &table[i];
	return NULL;
}

int fake_range_live(const struct fake_range *table, int n)
{
	int live = 0;

	for (int i = 0; i < n; i++)
		live += table[i].start != 0;
	return live;
}

size_t fake_range_overlap(const struct fake_range *table, int n, uintptr_t start, size_t size)
{
	uintptr_t end = start + size;
	size_t bytes = 0;

	for (int i = 0; i < n; i++) {
		uintptr_t lo = table[i].start, hi = lo + table[i].size;

		if (!lo || hi <= start || lo >= end)
			continue;
		bytes += (hi < end ? hi : end) - (lo > start ? lo : start);
	}
	return bytes;
}

struct fake_handle *fake_handle_find(CUmemGenericAllocationHandle id)
{
	for (int i = 0; id && i < FAKE_MAX_HANDLES; i++)
		if (fake.handles[i].id == id)
			return &fake.handles[i];
	return NULL;
}
