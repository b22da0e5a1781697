/* SPDX-License-Identifier: Apache-2.0 */
/* The host pool's records as a buggy process of the same user may leave
 * them. The input is a sequence of steps, a byte each then its operands:
 *   0 store K          reserve key K, fill its chunk with K's bytes, publish
 *   1 get K            look up and pin key K (pins kept to the input's end)
 *   2 drop K
 *   3 scribble O L B   L bytes of the input (B...) written at offset O of the
 *                      pool's records (slots, chunks, index; not the header)
 *   4 check
 * on one pool of 16 chunks kept for the process (each input starts with a
 * check, which resets what the last one broke). Invariants: no crash; every
 * call returns a value it may; a hit's bytes are its key's, whatever was
 * scribbled; after a check that passes, every chunk can be stored again. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "pool/format.h"
#include "sharedseg.h"

#define CHUNK 64
#define CHUNKS 16

static sseg_pool_t *pool;
static uint8_t *records;
static uint64_t records_len;

static void key_of(uint8_t k, uint8_t key[SSEG_POOL_KEY_SIZE])
{
	memset(key, 0, SSEG_POOL_KEY_SIZE);
	key[0] = k;
	key[31] = 0xa5;
}

static void setup(void)
{
	struct sseg_pool_info in = { .sz = sizeof(in) };
	const struct pool_header *h;
	char name[64];

	snprintf(name, sizeof(name), "fuzz-pool-%d", (int)getpid());
	{
		SSEG_POOL_OPTS(o, .name = name, .meaning = "fuzz", .chunk_size = CHUNK,
			       .chunks = CHUNKS, .pages = SSEG_PAGES_BASE);

		FUZZ_CHECK(sseg_pool_open(&o, &pool) == 0);
	}
	sseg_set_log_level(SSEG_LOG_OFF); /* a reset an input: no lines */
	FUZZ_CHECK(sseg_pool_info(pool, &in) == 0);
	h = in.base;
	records = (uint8_t *)in.base + h->g.slots_off;
	records_len = h->g.index_off + h->g.buckets * 8 - h->g.slots_off;
}

static void store(uint8_t k)
{
	uint8_t key[SSEG_POOL_KEY_SIZE];
	uint32_t chunk;
	int rc;

	key_of(k, key);
	rc = sseg_pool_reserve(pool, key, 1, &chunk);
	FUZZ_CHECK(rc == 0 || rc == 1 || rc == -ENOSPC || rc == -EBADMSG);
	if (rc != 1)
		return;
	memset(sseg_pool_chunk(pool, chunk), k, CHUNK);
	rc = sseg_pool_publish(pool, &chunk, 1);
	FUZZ_CHECK(rc == 0 || rc == 1 || rc == -EBADMSG);
}

static void get(uint8_t k, uint32_t *held, int *nheld)
{
	uint8_t key[SSEG_POOL_KEY_SIZE], *bytes;
	uint32_t chunk;
	int rc;

	key_of(k, key);
	rc = sseg_pool_get(pool, key, 1, 0, &chunk);
	FUZZ_CHECK(rc == 0 || rc == 1 || rc == -EBADMSG);
	if (rc != 1)
		return;
	bytes = sseg_pool_chunk(pool, chunk);
	FUZZ_CHECK(bytes != NULL);
	for (int i = 0; i < CHUNK; i++)
		FUZZ_CHECK(bytes[i] == k); /* never another key's bytes */
	if (*nheld < 64)
		held[(*nheld)++] = chunk;
	else
		FUZZ_CHECK(sseg_pool_unpin(pool, &chunk, 1) == 0);
}

static void drop(uint8_t k)
{
	uint8_t key[SSEG_POOL_KEY_SIZE];
	int rc;

	key_of(k, key);
	rc = sseg_pool_drop(pool, key, 1);
	FUZZ_CHECK(rc == 0 || rc == 1 || rc == -EBADMSG);
}

static void scribble(struct fz *in)
{
	uint64_t at = fz_u64(in) % records_len;
	size_t len = fz_u8(in) % 16;

	for (size_t i = 0; i < len && at + i < records_len; i++)
		records[at + i] = fz_u8(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = { data, size };
	uint32_t held[64];
	int nheld = 0, rc;

	if (!pool)
		setup();
	rc = sseg_pool_check(pool);
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG);
	for (int steps = 0; in.n && steps < 256; steps++) {
		uint8_t op = fz_u8(&in) % 5, k = fz_u8(&in) % 24;

		if (op == 0)
			store(k);
		else if (op == 1)
			get(k, held, &nheld);
		else if (op == 2)
			drop(k);
		else if (op == 3)
			scribble(&in);
		else
			FUZZ_CHECK((rc = sseg_pool_check(pool)) == 0 || rc == -EBADMSG);
	}
	FUZZ_CHECK(sseg_pool_unpin(pool, held, nheld) == 0);
	/* sound again, and nothing lost for good: every chunk takes a store */
	rc = sseg_pool_check(pool);
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG);
	FUZZ_CHECK(sseg_pool_check(pool) == 0);
	{
		uint8_t keys[CHUNKS * SSEG_POOL_KEY_SIZE];
		uint32_t chunks[CHUNKS];

		for (int i = 0; i < CHUNKS; i++)
			key_of((uint8_t)(100 + i), keys + i * SSEG_POOL_KEY_SIZE);
		FUZZ_CHECK(sseg_pool_reserve(pool, keys, CHUNKS, chunks) == CHUNKS);
		FUZZ_CHECK(sseg_pool_abandon(pool, chunks, CHUNKS) == 0);
	}
	return 0;
}
