/* SPDX-License-Identifier: Apache-2.0 */
/* Reservations are PROT_NONE anonymous mappings without a commitment. */
#include <stdint.h>
#include <sys/mman.h>

#include "va.h"

#define RESERVE_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)

/* Over-reserves by align and trims both ends. */
void *fk_va_reserve(size_t size, size_t align)
{
	char *span = mmap(NULL, size + align, PROT_NONE, RESERVE_FLAGS, -1, 0);
	uintptr_t start;

	if (span == MAP_FAILED)
		return NULL;
	start = ((uintptr_t)span + align - 1) & ~(uintptr_t)(align - 1);
	if (start > (uintptr_t)span)
		munmap(span, start - (uintptr_t)span);
	munmap((char *)start + size, (uintptr_t)span + align - start);
	return (void *)start;
}

int fk_va_restore(void *start, size_t size)
{
	void *back = mmap(start, size, PROT_NONE, RESERVE_FLAGS | MAP_FIXED, -1, 0);

	return back == MAP_FAILED ? -1 : 0;
}
