/* SPDX-License-Identifier: Apache-2.0 */
/* Address space a fake hands out as a driver's virtual address ranges. */
#ifndef SSEG_FAKEKIT_VA_H
#define SSEG_FAKEKIT_VA_H

#include <stddef.h>

/* size bytes of PROT_NONE address space, nothing behind them, at an
 * address aligned to align (a power of two); NULL when there is none. */
void *fk_va_reserve(size_t size, size_t align);
/* Puts reserved space back over [start, start+size), replacing what was
 * mapped there (an unmap inside a reservation): 0, or -1. */
int fk_va_restore(void *start, size_t size);

#endif
