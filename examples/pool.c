/* SPDX-License-Identifier: Apache-2.0 */
/* One host pool, two processes: this one stores a block under its key; a
 * second process (another engine, say) opens the pool by name and loads
 * the block from it, with no copy between the two and no server. Run
 * `pool` (tests/readme/c_example.sh builds and runs it). */
#include <sharedseg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK (64 << 10)

/* A key: 32 bytes (a block hash, as engines have; here a name, padded). */
static void key_of(const char *name, unsigned char key[SSEG_POOL_KEY_SIZE])
{
	memset(key, 0, SSEG_POOL_KEY_SIZE);
	memcpy(key, name, strlen(name) < SSEG_POOL_KEY_SIZE ? strlen(name) : SSEG_POOL_KEY_SIZE);
}

static int open_pool(sseg_pool_t **pool)
{
	SSEG_POOL_OPTS(o, .name = "example-pool", .meaning = "model=demo;dtype=bfloat16;block=16",
		       .chunk_size = BLOCK, .chunks = 256);

	return sseg_pool_open(&o, pool);
}

/* Store: take a chunk, write the bytes straight into it, publish. */
static int store(sseg_pool_t *pool, const char *name, const char *bytes)
{
	unsigned char key[SSEG_POOL_KEY_SIZE];
	uint32_t chunk;
	int rc;

	key_of(name, key);
	rc = sseg_pool_reserve(pool, key, 1, &chunk);
	if (rc <= 0) /* 0: stored already, or being stored by another */
		return rc;
	strcpy(sseg_pool_chunk(pool, chunk), bytes);
	return sseg_pool_publish(pool, &chunk, 1) == 1 ? 0 : -1;
}

/* Load: look up and pin (nobody evicts it meanwhile), copy out, let go. */
static int load(sseg_pool_t *pool, const char *name, char *out, size_t len)
{
	unsigned char key[SSEG_POOL_KEY_SIZE];
	uint32_t chunk;
	int hits;

	key_of(name, key);
	hits = sseg_pool_get(pool, key, 1, 0, &chunk);
	if (hits != 1)
		return hits < 0 ? hits : -1;
	snprintf(out, len, "%s", (const char *)sseg_pool_chunk(pool, chunk));
	return sseg_pool_unpin(pool, &chunk, 1);
}

int main(void)
{
	sseg_pool_t *pool;
	char got[64];
	int status = 1;
	pid_t other;

	if (open_pool(&pool) || store(pool, "block-0", "the prefix's KV")) {
		fprintf(stderr, "pool: %s\n", sseg_last_error());
		return 1;
	}
	other = fork();
	if (other == 0) { /* another process: it finds the pool by its name */
		sseg_pool_t *mine;

		if (open_pool(&mine) || load(mine, "block-0", got, sizeof(got))) {
			fprintf(stderr, "pool: %s\n", sseg_last_error());
			_exit(1);
		}
		printf("pid %d loaded: %s\n", (int)getpid(), got);
		fflush(stdout);
		sseg_pool_close(mine);
		_exit(0);
	}
	if (other > 0)
		waitpid(other, &status, 0);
	sseg_pool_close(pool);
	return status == 0 ? 0 : 1;
}
