/* SPDX-License-Identifier: Apache-2.0 */
/* Fixed tables of what a fake holds (handles, reservations, mappings,
 * registrations). A slot is any struct whose first member is
 * `uintptr_t start` (or the handle's id), 0 in a free slot; the range
 * lookups also read a `size_t size` right after it. FK_SLOT and FK_RANGE
 * check a slot type at compile time. Callers hold the lock. */
#ifndef SSEG_FAKEKIT_TABLE_H
#define SSEG_FAKEKIT_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct fk_table {
	void *slots;
	size_t stride;
	int n;
};

#define FK_TABLE(array)                                    \
	((struct fk_table){ (array), sizeof((array)[0]),   \
			    (int)(sizeof(array) / sizeof((array)[0])) })

#define FK_SLOT(type, key)                                                          \
	_Static_assert(offsetof(type, key) == 0 &&                                  \
			       _Generic(((type *)0)->key, uintptr_t: 1, default: 0), \
		       #type " begins with uintptr_t " #key)
#define FK_RANGE(type)     \
	FK_SLOT(type, start); \
	_Static_assert(offsetof(type, size) == sizeof(uintptr_t) &&                 \
			       _Generic(((type *)0)->size, size_t: 1, default: 0),  \
		       #type " has size_t size after start")

/* A free slot, or NULL. */
void *fk_free_slot(struct fk_table t);
/* The used slot whose key is start (start 0: none), or NULL. */
void *fk_slot_at(struct fk_table t, uintptr_t start);
/* The range that holds p, or NULL. */
void *fk_slot_holding(struct fk_table t, uintptr_t p);
/* The number of used slots. */
int fk_live(struct fk_table t);
/* The bytes of [start, start+size) the ranges cover. */
size_t fk_overlap(struct fk_table t, uintptr_t start, size_t size);
/* The i-th used slot in the order of its key (i from 0), or NULL. */
void *fk_nth(struct fk_table t, int i);

#endif
