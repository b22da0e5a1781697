/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>
#include <string.h>

#include "poolutil.h"

static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void pu_key(uint64_t n, uint8_t key[SSEG_POOL_KEY_SIZE])
{
	uint64_t s = n * 7919 + 17, w[SSEG_POOL_KEY_SIZE / 8];

	for (size_t i = 0; i < SSEG_POOL_KEY_SIZE / 8; i++)
		w[i] = next(&s);
	memcpy(key, w, sizeof(w));
}

void pu_keys(uint64_t first, int n, uint8_t *keys)
{
	for (int i = 0; i < n; i++)
		pu_key(first + (uint64_t)i, keys + (size_t)i * SSEG_POOL_KEY_SIZE);
}

void pu_fill(void *bytes, uint64_t len, uint64_t n)
{
	uint64_t s = n, *w = bytes;

	for (uint64_t i = 0; i < len / 8; i++)
		w[i] = i == 0 ? n : next(&s);
}

bool pu_holds(const void *bytes, uint64_t len, uint64_t n)
{
	const uint64_t *w = bytes;
	uint64_t s = n;

	for (uint64_t i = 0; i < len / 8; i++)
		if (w[i] != (i == 0 ? n : next(&s)))
			return false;
	return true;
}

int pu_open(const char *name, uint64_t chunk_size, uint64_t chunks, const char *meaning,
	    uint32_t flags, sseg_pool_t **pool)
{
	SSEG_POOL_OPTS(o, .name = name, .meaning = meaning, .chunk_size = chunk_size,
		       .chunks = chunks, .pages = SSEG_PAGES_BASE, .flags = flags,
		       .timeout_ms = 10000);

	return sseg_pool_open(&o, pool);
}

int pu_store(sseg_pool_t *pool, uint64_t first, int n)
{
	struct sseg_pool_info in = { .sz = sizeof(in) };
	uint8_t *keys = malloc((size_t)n * SSEG_POOL_KEY_SIZE);
	uint32_t *chunks = malloc((size_t)n * sizeof(*chunks));
	int rc;

	sseg_pool_info(pool, &in);
	pu_keys(first, n, keys);
	rc = sseg_pool_reserve(pool, keys, n, chunks);
	for (int i = 0; rc >= 0 && i < n; i++)
		if (chunks[i] != SSEG_POOL_NONE)
			pu_fill(sseg_pool_chunk(pool, chunks[i]), in.chunk_size, first + (uint64_t)i);
	if (rc >= 0)
		rc = sseg_pool_publish(pool, chunks, n);
	free(keys);
	free(chunks);
	return rc;
}
