/* SPDX-License-Identifier: Apache-2.0 */
/* The pool under attack: processes doing random lookups, stores, drops and
 * evictions on a pool much smaller than their keys, each checking every
 * hit's bytes against its key (the bytes carry it), while one of them is
 * SIGKILLed at a random point each round and replaced. No hit may carry
 * another key's bytes or torn bytes; at the end the pool is sound and
 * every chunk can be taken again. The same work by threads, each with its
 * handle, runs under ThreadSanitizer. SSEG_POOL_KILLS sets the rounds
 * (default 1000); `make bench` runs 10,000 (and SSEG_CASE_TIMEOUT_MS). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "poolutil.h"
#include "runcases.h"
#include "testutil.h"

#define CHUNK 1024
#define CHUNKS 24
#define KEYS 80
#define WORKERS 4
#define MEANING "attack=1"

struct board {
	_Atomic uint64_t ops[WORKERS];
	_Atomic uint64_t hits, wrong, stores, enospc;
	_Atomic int stop;
	char name[64];
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct held {
	uint32_t chunk[16];
	uint64_t key[16];
	int n;
};

static void check_bytes(sseg_pool_t *p, struct board *b, uint32_t chunk, uint64_t key)
{
	if (pu_holds(sseg_pool_chunk(p, chunk), CHUNK, key))
		return;
	atomic_fetch_add(&b->wrong, 1);
	fprintf(stderr, "key %llu: chunk %u holds other bytes (first word %llu)\n",
		(unsigned long long)key, chunk,
		(unsigned long long)*(uint64_t *)sseg_pool_chunk(p, chunk));
}

/* A pinned chunk keeps its bytes until let go: checked again then. */
static void let_go(sseg_pool_t *p, struct board *b, struct held *h)
{
	for (int i = 0; i < h->n; i++)
		check_bytes(p, b, h->chunk[i], h->key[i]);
	CHECK_RC(sseg_pool_unpin(p, h->chunk, h->n), 0);
	h->n = 0;
}

/* Looks up a run of keys, checks every hit's bytes, holds the pins a while. */
static void look(sseg_pool_t *p, struct board *b, uint64_t *s, struct held *h)
{
	uint8_t keys[8 * SSEG_POOL_KEY_SIZE];
	uint32_t got[8];
	uint64_t first = rnd(s) % KEYS;
	int n = 1 + (int)(rnd(s) % 8), hits;

	if (first + (uint64_t)n > KEYS)
		n = (int)(KEYS - first);
	pu_keys(first, n, keys);
	hits = sseg_pool_get(p, keys, n, rnd(s) % 2 ? SSEG_POOL_PREFIX : 0, got);
	CHECK(hits >= 0);
	for (int i = 0; i < n; i++) {
		if (got[i] == SSEG_POOL_NONE)
			continue;
		atomic_fetch_add(&b->hits, 1);
		check_bytes(p, b, got[i], first + (uint64_t)i);
		if (h->n < 16 && rnd(s) % 2) { /* unpinned later */
			h->chunk[h->n] = got[i];
			h->key[h->n++] = first + (uint64_t)i;
		} else {
			CHECK_RC(sseg_pool_unpin(p, &got[i], 1), 0);
		}
	}
}

/* Stores a run of keys, filling in two halves (a kill may fall between),
 * and now and then gives a store up. */
static void store(sseg_pool_t *p, struct board *b, uint64_t *s)
{
	uint8_t keys[4 * SSEG_POOL_KEY_SIZE];
	uint32_t got[4];
	uint64_t first = rnd(s) % KEYS;
	int n = 1 + (int)(rnd(s) % 4), rc;

	if (first + (uint64_t)n > KEYS)
		n = (int)(KEYS - first);
	pu_keys(first, n, keys);
	rc = sseg_pool_reserve(p, keys, n, got);
	if (rc == -ENOSPC) {
		atomic_fetch_add(&b->enospc, 1);
		return;
	}
	CHECK(rc >= 0);
	for (int i = 0; i < n; i++) {
		uint8_t *bytes = sseg_pool_chunk(p, got[i]);
		uint8_t whole[CHUNK];

		if (got[i] == SSEG_POOL_NONE)
			continue;
		pu_fill(whole, CHUNK, first + (uint64_t)i);
		memcpy(bytes + CHUNK / 2, whole + CHUNK / 2, CHUNK / 2);
		memcpy(bytes, whole, CHUNK / 2);
	}
	if (rnd(s) % 8 == 0) {
		CHECK_RC(sseg_pool_abandon(p, got, n), 0);
		return;
	}
	rc = sseg_pool_publish(p, got, n);
	CHECK(rc >= 0);
	atomic_fetch_add(&b->stores, (uint64_t)rc);
}

static void work(struct board *b, int w, uint64_t seed)
{
	struct held h = { .n = 0 };
	sseg_pool_t *p;
	uint64_t s = seed | 1;

	CHECK_RC(pu_open(b->name, 0, 0, MEANING, 0, &p), 0);
	while (!atomic_load(&b->stop)) {
		uint64_t op = rnd(&s) % 10;

		if (op < 5)
			look(p, b, &s, &h);
		else if (op < 9)
			store(p, b, &s);
		else {
			uint8_t key[SSEG_POOL_KEY_SIZE];

			pu_key(rnd(&s) % KEYS, key);
			CHECK(sseg_pool_drop(p, key, 1) >= 0);
		}
		if (h.n && rnd(&s) % 3 == 0)
			let_go(p, b, &h);
		atomic_fetch_add(&b->ops[w], 1);
	}
	let_go(p, b, &h);
	sseg_pool_close(p);
}

static struct board *new_board(sseg_pool_t **p)
{
	struct board *b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	CHECK(b != MAP_FAILED);
	memset(b, 0, sizeof(*b));
	tu_name(b->name, sizeof(b->name), "attack");
	CHECK_RC(pu_open(b->name, CHUNK, CHUNKS, MEANING, 0, p), 0);
	return b;
}

/* After the attack: sound, nothing wrong served, every chunk takes a store.
 * The counts, as one row of `make bench` (bench/run.py reads it). */
static void after(sseg_pool_t *p, struct board *b, int kills)
{
	struct sseg_pool_info in = { .sz = sizeof(in) };
	unsigned long long wrong = atomic_load(&b->wrong);

	CHECK_RC(sseg_pool_check(p), 0);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	printf("{\"schema\": 1, \"bench\": \"pool_kills\", \"mechanism\": \"sharedseg-pool\", "
	       "\"ranks\": %d, \"size\": %d, \"pages_requested\": \"base\", "
	       "\"pages_obtained\": \"base\", \"unit\": \"wrong hits\", \"min\": %llu, "
	       "\"median\": %llu, \"max\": %llu, \"reps\": 1, \"kills\": %d, \"hits\": %llu, "
	       "\"stores\": %llu, \"no_room\": %llu, \"evictions\": %llu, \"reclaims\": %llu, "
	       "\"duplicates\": %llu}\n", WORKERS, CHUNK, wrong, wrong, wrong, kills,
	       (unsigned long long)b->hits, (unsigned long long)b->stores,
	       (unsigned long long)b->enospc, (unsigned long long)in.evictions,
	       (unsigned long long)in.reclaims, (unsigned long long)in.duplicates);
	CHECK(wrong == 0);
	CHECK(atomic_load(&b->hits) > 0 && in.evictions > 0);
	CHECK(in.attached == 1 && in.filling == 0 && in.pinned == 0);
	CHECK(in.reclaims >= (uint64_t)kills);
	CHECK_RC(pu_store(p, 1000, CHUNKS), CHUNKS);
	CHECK(in.resets == 0);
}

struct seat {
	struct board *b;
	int w;
};

static void *thread_work(void *arg)
{
	struct seat *st = arg;

	work(st->b, st->w, 0x9e3779b97f4a7c15ull * (uint64_t)(st->w + 1));
	return NULL;
}

static int threads(void *arg)
{
	sseg_pool_t *p;
	struct board *b = new_board(&p);
	pthread_t t[WORKERS];
	struct seat st[WORKERS];

	(void)arg;
	for (int w = 0; w < WORKERS; w++) {
		st[w] = (struct seat){ b, w };
		CHECK(pthread_create(&t[w], NULL, thread_work, &st[w]) == 0);
	}
	/* until each thread has done its share */
	for (int w = 0; w < WORKERS; w++)
		while (atomic_load(&b->ops[w]) < 20000)
			sched_yield();
	atomic_store(&b->stop, 1);
	for (int w = 0; w < WORKERS; w++)
		pthread_join(t[w], NULL);
	after(p, b, 0);
	sseg_pool_close(p);
	return 0;
}

static pid_t spawn(struct board *b, int w, uint64_t seed)
{
	pid_t parent = getpid(), pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		/* a worker never outlives the case (a timeout kills the case) */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
			_exit(1);
		work(b, w, seed);
		_exit(0);
	}
	return pid;
}

static int killed_at_random(void *arg)
{
	const char *env = getenv("SSEG_POOL_KILLS");
	int kills = env ? atoi(env) : 1000;
	uint64_t s = 88172645463325252ull;
	pid_t pids[WORKERS];
	sseg_pool_t *p;
	struct board *b = new_board(&p);

	(void)arg;
	for (int w = 0; w < WORKERS; w++)
		pids[w] = spawn(b, w, rnd(&s));
	for (int k = 0; k < kills; k++) {
		int w = (int)(rnd(&s) % WORKERS);
		uint64_t until = atomic_load(&b->ops[w]) + 1 + rnd(&s) % 40;
		double deadline = tu_now() + 20;
		int status;

		/* the victim gets some work done first: a wait on its progress */
		while (atomic_load(&b->ops[w]) < until && tu_now() < deadline)
			sched_yield();
		CHECK(atomic_load(&b->ops[w]) >= until);
		kill(pids[w], SIGKILL);
		CHECK(waitpid(pids[w], &status, 0) == pids[w]);
		if (WIFEXITED(status)) /* a worker ends only by the kill */
			fprintf(stderr, "worker %d exited with %d\n", w, WEXITSTATUS(status));
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		pids[w] = spawn(b, w, rnd(&s));
		if (atomic_load(&b->wrong))
			break;
	}
	atomic_store(&b->stop, 1);
	for (int w = 0; w < WORKERS; w++)
		CHECK_RC(tu_wait(pids[w], 20000), 0);
	after(p, b, kills);
	sseg_pool_close(p);
	return 0;
}

static const struct tu_case cases[] = {
	{ "threads", threads, NULL, 0 },
	{ "killed at random", killed_at_random, NULL, 0 },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	return tu_run_cases(argc, argv, cases);
}
