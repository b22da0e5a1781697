/* SPDX-License-Identifier: Apache-2.0 */
/* Keys and chunk bytes for the pool's tests (poolutil.c): a key made from a
 * number, and chunk bytes that carry their key, so that a hit with another
 * key's bytes, or torn bytes, is caught. */
#ifndef SSEG_TU_POOLUTIL_H
#define SSEG_TU_POOLUTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "sharedseg.h"

/* The key for number n. */
void pu_key(uint64_t n, uint8_t key[SSEG_POOL_KEY_SIZE]);
/* keys for numbers first..first+n-1, contiguous. */
void pu_keys(uint64_t first, int n, uint8_t *keys);
/* Fills len bytes for key number n (len a multiple of 8). */
void pu_fill(void *bytes, uint64_t len, uint64_t n);
/* Whether the bytes are key number n's, whole. */
bool pu_holds(const void *bytes, uint64_t len, uint64_t n);
/* Opens pool name with these geometry and meaning (chunks 0: attach). */
int pu_open(const char *name, uint64_t chunk_size, uint64_t chunks, const char *meaning,
	    uint32_t flags, sseg_pool_t **pool);
/* Stores key numbers first..first+n-1 (bytes filled); returns how many it published. */
int pu_store(sseg_pool_t *pool, uint64_t first, int n);

#endif
