/* SPDX-License-Identifier: Apache-2.0 */
/* The host pool, case by case: store, look up, pin, evict, publish once;
 * several processes of one pool by name; one meaning per pool; what a
 * process that died held comes back; broken records reset the pool and
 * are never served; another user reaches nothing; bad arguments get
 * sentences. `build/tests/test_pool "evicts by the clock"` runs one case. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool/format.h"
#include "poolutil.h"
#include "runcases.h"
#include "stranger.h"
#include "testutil.h"

#define CHUNK 4096
#define MEANING "model=tiny-mla;dtype=bfloat16;block=16;tp=1;seed=0"

static sseg_pool_t *fresh(uint64_t chunks, char *name, size_t len)
{
	sseg_pool_t *p;
	struct sseg_pool_info in = { .sz = sizeof(in) };

	tu_name(name, len, "pool");
	CHECK_RC(pu_open(name, CHUNK, chunks, MEANING, 0, &p), 0);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.created == 1 && in.chunks == chunks && in.chunk_size == CHUNK);
	CHECK(in.slot >= 0 && in.attached == 1 && in.free == chunks);
	return p;
}

static int stores_and_finds(void *arg)
{
	uint8_t keys[4 * SSEG_POOL_KEY_SIZE];
	struct sseg_pool_info in = { .sz = sizeof(in) };
	uint32_t got[4];
	char name[64];
	sseg_pool_t *p = fresh(16, name, sizeof(name));

	(void)arg;
	CHECK_RC(pu_store(p, 100, 3), 3);
	pu_keys(100, 4, keys);
	CHECK_RC(sseg_pool_get(p, keys, 4, 0, got), 3);
	for (int i = 0; i < 3; i++)
		CHECK(got[i] != SSEG_POOL_NONE &&
		      pu_holds(sseg_pool_chunk(p, got[i]), CHUNK, 100 + (uint64_t)i));
	CHECK(got[3] == SSEG_POOL_NONE);
	CHECK_RC(sseg_pool_contains(p, keys, 4, 0), 3);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.used == 3 && in.pinned == 3 && in.stores == 3 && in.hits == 6 && in.misses == 2);
	/* a pinned key is not dropped; let go, it is */
	CHECK_RC(sseg_pool_drop(p, keys, 1), 0);
	CHECK_RC(sseg_pool_unpin(p, got, 3), 0);
	CHECK_RC(sseg_pool_drop(p, keys, 1), 1);
	CHECK_RC(sseg_pool_drop(p, keys, 1), 0);                          /* gone already */
	CHECK_RC(sseg_pool_drop(p, keys + 3 * SSEG_POOL_KEY_SIZE, 1), 0); /* never stored */
	CHECK_RC(sseg_pool_contains(p, keys, 3, 0), 2);
	/* stored twice: the second store takes nothing */
	CHECK_RC(pu_store(p, 101, 2), 0);
	sseg_pool_close(p);
	return 0;
}

static int prefix_stops_at_a_miss(void *arg)
{
	uint8_t keys[5 * SSEG_POOL_KEY_SIZE];
	uint32_t got[5];
	char name[64];
	sseg_pool_t *p = fresh(16, name, sizeof(name));

	(void)arg;
	CHECK_RC(pu_store(p, 0, 2), 2);
	CHECK_RC(pu_store(p, 3, 2), 2);
	pu_keys(0, 5, keys);
	CHECK_RC(sseg_pool_get(p, keys, 5, SSEG_POOL_PREFIX, got), 2);
	CHECK(got[0] != SSEG_POOL_NONE && got[1] != SSEG_POOL_NONE);
	CHECK(got[2] == SSEG_POOL_NONE && got[3] == SSEG_POOL_NONE && got[4] == SSEG_POOL_NONE);
	CHECK_RC(sseg_pool_contains(p, keys, 5, SSEG_POOL_PREFIX), 2);
	CHECK_RC(sseg_pool_unpin(p, got, 2), 0);
	sseg_pool_close(p);
	return 0;
}

static int evicts_by_the_clock(void *arg)
{
	uint8_t keys[8 * SSEG_POOL_KEY_SIZE];
	struct sseg_pool_info in = { .sz = sizeof(in) };
	uint32_t got[8], one;
	char name[64];
	sseg_pool_t *p = fresh(4, name, sizeof(name));

	(void)arg;
	CHECK_RC(pu_store(p, 0, 4), 4);
	pu_keys(0, 8, keys);
	CHECK_RC(sseg_pool_get(p, keys, 1, 0, &one), 1); /* key 0 stays pinned */
	CHECK_RC(pu_store(p, 4, 3), 3);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.evictions == 3 && in.used == 4);
	CHECK_RC(sseg_pool_get(p, keys, 8, 0, got), 4);
	CHECK(got[0] == one && pu_holds(sseg_pool_chunk(p, one), CHUNK, 0));
	for (int i = 4; i < 7; i++)
		CHECK(got[i] != SSEG_POOL_NONE && pu_holds(sseg_pool_chunk(p, got[i]), CHUNK, (uint64_t)i));
	/* everything pinned: a store finds no room, says so, takes nothing */
	CHECK_RC(sseg_pool_reserve(p, keys + 7 * SSEG_POOL_KEY_SIZE, 1, &one), -ENOSPC);
	CHECK_ERR_HAS("pinned or being filled");
	CHECK(one == SSEG_POOL_NONE);
	CHECK_RC(sseg_pool_unpin(p, got, 8), 0);
	CHECK_RC(pu_store(p, 7, 1), 1);
	sseg_pool_close(p);
	return 0;
}

static int half_done_is_invisible(void *arg)
{
	uint8_t keys[2 * SSEG_POOL_KEY_SIZE];
	uint32_t mine[2], got[2];
	char name[64];
	sseg_pool_t *p = fresh(8, name, sizeof(name));

	(void)arg;
	pu_keys(10, 2, keys);
	CHECK_RC(sseg_pool_reserve(p, keys, 2, mine), 2);
	pu_fill(sseg_pool_chunk(p, mine[0]), CHUNK, 10);
	CHECK_RC(sseg_pool_get(p, keys, 2, 0, got), 0);    /* being filled: a miss */
	CHECK_RC(sseg_pool_reserve(p, keys, 2, got), 0);   /* and not taken twice */
	CHECK_RC(sseg_pool_abandon(p, mine + 1, 1), 0);
	CHECK_RC(sseg_pool_publish(p, mine, 1), 1);
	CHECK_RC(sseg_pool_publish(p, mine, 1), -EINVAL); /* published: no longer ours */
	CHECK_ERR_HAS("not reserved by this handle");
	CHECK_RC(sseg_pool_get(p, keys, 2, 0, got), 1);
	CHECK(got[0] == mine[0] && got[1] == SSEG_POOL_NONE);
	CHECK_RC(sseg_pool_unpin(p, got, 1), 0);
	sseg_pool_close(p);
	return 0;
}

/* ---- several processes ---- */

struct peer {
	const char *name;
	int go[2], done[2];
	uint64_t chunks;
	const char *meaning;
};

static int peer_reads(void *arg)
{
	struct peer *pr = arg;
	uint8_t keys[3 * SSEG_POOL_KEY_SIZE];
	uint32_t got[3];
	sseg_pool_t *p;
	char c;

	CHECK(read(pr->go[0], &c, 1) == 1);
	CHECK_RC(pu_open(pr->name, 0, 0, MEANING, 0, &p), 0);
	pu_keys(0, 3, keys);
	CHECK_RC(sseg_pool_get(p, keys, 3, 0, got), 2);
	CHECK(pu_holds(sseg_pool_chunk(p, got[0]), CHUNK, 0));
	CHECK(pu_holds(sseg_pool_chunk(p, got[1]), CHUNK, 1));
	CHECK_RC(pu_store(p, 2, 1), 1);
	CHECK(write(pr->done[1], "d", 1) == 1);
	sseg_pool_close(p);
	return 0;
}

static int one_pool_by_name(void *arg)
{
	struct peer pr = { 0 };
	uint8_t keys[3 * SSEG_POOL_KEY_SIZE];
	struct sseg_pool_info in = { .sz = sizeof(in) };
	uint32_t got[3];
	char name[64], c;
	sseg_pool_t *p = fresh(8, name, sizeof(name));
	pid_t child;

	(void)arg;
	pr.name = name;
	CHECK(pipe(pr.go) == 0 && pipe(pr.done) == 0);
	child = tu_fork(peer_reads, &pr);
	CHECK_RC(pu_store(p, 0, 2), 2);
	CHECK(write(pr.go[1], "g", 1) == 1);
	CHECK(read(pr.done[0], &c, 1) == 1);
	CHECK_RC(tu_wait(child, 20000), 0);
	pu_keys(0, 3, keys);
	CHECK_RC(sseg_pool_get(p, keys, 3, 0, got), 3);
	CHECK(pu_holds(sseg_pool_chunk(p, got[2]), CHUNK, 2));
	CHECK_RC(sseg_pool_unpin(p, got, 3), 0);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.stores == 3 && in.attached == 1 && in.used == 3);
	sseg_pool_close(p);
	return 0;
}

static int refuse_other_meaning(void *arg)
{
	const char *name = arg;
	sseg_pool_t *p;

	CHECK_RC(pu_open(name, 0, 0, "model=tiny-mla;dtype=float16;block=16;tp=1;seed=0", 0, &p),
		 -EINVAL);
	CHECK_ERR_HAS("field 2 is 'dtype=bfloat16', this process declares 'dtype=float16'");
	CHECK_RC(pu_open(name, 2 * CHUNK, 0, MEANING, 0, &p), -EINVAL);
	CHECK_ERR_HAS("has chunks of 4 KiB; this process declares 8 KiB");
	CHECK_RC(pu_open(name, 0, 9, MEANING, 0, &p), -EINVAL);
	CHECK_ERR_HAS("has 8 chunks; this process declares 9");
	CHECK_RC(pu_open(name, 0, 0, MEANING, 0, &p), 0);
	sseg_pool_close(p);
	return 0;
}

static int one_meaning_per_pool(void *arg)
{
	char name[64];
	sseg_pool_t *p = fresh(8, name, sizeof(name));

	(void)arg;
	CHECK_RC(tu_wait(tu_fork(refuse_other_meaning, name), 20000), 0);
	sseg_pool_close(p);
	/* nobody has it open: EXISTING finds none */
	CHECK_RC(pu_open(name, 0, 0, MEANING, SSEG_POOL_EXISTING, &p), -ENOENT);
	CHECK_ERR_HAS("no pool");
	return 0;
}

struct dier {
	const char *name;
	int ready[2];
};

/* Pins key 0, reserves keys 5 and 6 (one filled, neither published), says
 * so, and waits to be killed. */
static int pin_and_die(void *arg)
{
	struct dier *d = arg;
	uint8_t keys[2 * SSEG_POOL_KEY_SIZE];
	uint32_t got[2];
	sseg_pool_t *p;

	CHECK_RC(pu_open(d->name, 0, 0, MEANING, 0, &p), 0);
	pu_keys(0, 1, keys);
	CHECK_RC(sseg_pool_get(p, keys, 1, 0, got), 1);
	pu_keys(5, 2, keys);
	CHECK_RC(sseg_pool_reserve(p, keys, 2, got), 2);
	pu_fill(sseg_pool_chunk(p, got[0]), CHUNK, 5);
	CHECK(write(d->ready[1], "r", 1) == 1);
	for (;;)
		pause();
}

static int dead_process_reclaimed(void *arg)
{
	struct dier d;
	uint8_t keys[8 * SSEG_POOL_KEY_SIZE];
	struct sseg_pool_info in = { .sz = sizeof(in) };
	uint32_t got[8];
	char name[64], c;
	sseg_pool_t *p = fresh(4, name, sizeof(name));
	pid_t child;

	(void)arg;
	d.name = name;
	CHECK(pipe(d.ready) == 0);
	CHECK_RC(pu_store(p, 0, 2), 2);
	child = tu_fork(pin_and_die, &d);
	CHECK(read(d.ready[0], &c, 1) == 1);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.attached == 2 && in.filling == 2 && in.pinned == 1);
	/* one chunk left that nobody pins or fills: key 1's */
	pu_keys(1, 1, keys);
	CHECK_RC(sseg_pool_get(p, keys, 1, 0, got), 1);
	pu_keys(20, 1, keys);
	CHECK_RC(sseg_pool_reserve(p, keys, 1, got + 1), -ENOSPC);
	kill(child, SIGKILL);
	CHECK_RC(tu_wait(child, 20000), 128 + SIGKILL);
	/* the kernel says it died: its pin and stores come back, its half-filled
	 * key 5 is never served */
	pu_keys(5, 2, keys);
	CHECK_RC(sseg_pool_get(p, keys, 2, 0, got + 2), 0);
	pu_keys(20, 1, keys);
	CHECK_RC(sseg_pool_reserve(p, keys, 1, got + 1), 1);
	CHECK_RC(sseg_pool_publish(p, got + 1, 1), 1);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.reclaims == 1 && in.attached == 1 && in.filling == 0);
	CHECK_RC(sseg_pool_unpin(p, got, 1), 0);
	CHECK_RC(pu_store(p, 30, 3), 3); /* every chunk can be taken again */
	CHECK_RC(sseg_pool_check(p), 0);
	sseg_pool_close(p);
	return 0;
}

/* ---- broken records ---- */

/* The pool's memfd, mapped a second time as a scribbler would. */
static uint8_t *scribbler(sseg_pool_t *p)
{
	struct sseg_pool_info in = { .sz = sizeof(in) };

	CHECK_RC(sseg_pool_info(p, &in), 0);
	return in.base;
}

static struct pool_chunk *record(sseg_pool_t *p, uint32_t chunk)
{
	const struct pool_header *h = (const void *)scribbler(p);

	return (struct pool_chunk *)(scribbler(p) + h->g.chunks_off) + chunk;
}

static int broken_records_reset(void *arg)
{
	uint8_t keys[4 * SSEG_POOL_KEY_SIZE];
	struct sseg_pool_info in = { .sz = sizeof(in) };
	uint32_t got[4], held;
	char name[64];
	sseg_pool_t *p = fresh(8, name, sizeof(name));
	struct pool_header *h = (void *)scribbler(p);

	(void)arg;
	pu_keys(0, 4, keys);
	/* a key changed under its seal: never served, found, reset; a chunk
	 * pinned meanwhile keeps its bytes until let go */
	CHECK_RC(pu_store(p, 0, 2), 2);
	CHECK_RC(pu_store(p, 9, 1), 1);
	pu_keys(9, 1, keys + 3 * SSEG_POOL_KEY_SIZE);
	CHECK_RC(sseg_pool_get(p, keys + 3 * SSEG_POOL_KEY_SIZE, 1, 0, &held), 1);
	CHECK_RC(sseg_pool_get(p, keys, 1, 0, got), 1);
	CHECK_RC(sseg_pool_unpin(p, got, 1), 0);
	atomic_store(&record(p, got[0])->seal, 12345);
	CHECK_RC(sseg_pool_get(p, keys, 2, 0, got), -EBADMSG);
	CHECK_ERR_HAS("was reset: chunk");
	CHECK_ERR_HAS("does not match its seal");
	CHECK(got[0] == SSEG_POOL_NONE && got[1] == SSEG_POOL_NONE);
	CHECK_RC(sseg_pool_get(p, keys, 2, 0, got), 0);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.resets == 1 && strstr(in.last_reset, "does not match its seal"));
	CHECK(in.pinned == 0 && in.free == 8); /* forgotten, but still pinned: */
	CHECK_RC(pu_store(p, 100, 8), 7);       /* every chunk but the pinned one */
	CHECK(pu_holds(sseg_pool_chunk(p, held), CHUNK, 9));
	CHECK_RC(sseg_pool_unpin(p, &held, 1), 0);
	CHECK_RC(pu_store(p, 200, 1), 1);
	pu_keys(0, 4, keys);
	/* a control word no state has */
	CHECK_RC(pu_store(p, 0, 1), 1);
	CHECK_RC(sseg_pool_get(p, keys, 1, 0, got), 1);
	CHECK_RC(sseg_pool_unpin(p, got, 1), 0);
	atomic_store(&record(p, got[0])->ctl, CTL_MAKE(3, POOL_BAD, 0));
	CHECK_RC(sseg_pool_get(p, keys, 1, 0, got), -EBADMSG);
	CHECK_ERR_HAS("is none sharedseg writes");
	/* a bucket naming a chunk past the last */
	CHECK_RC(pu_store(p, 0, 1), 1);
	for (uint64_t b = 0; b < h->g.buckets; b++) {
		_Atomic uint64_t *e = (_Atomic uint64_t *)(scribbler(p) + h->g.index_off) + b;

		if (atomic_load(e) && atomic_load(e) != ~0ull)
			atomic_store(e, (atomic_load(e) & ~0xffffffffull) | 4000);
	}
	CHECK_RC(sseg_pool_get(p, keys, 1, 0, got), -EBADMSG);
	CHECK_ERR_HAS("names chunk 3999 of 8");
	/* the header's geometry: check finds it, writes it back */
	h->g.chunks = 1u << 30;
	CHECK_RC(sseg_pool_check(p), -EBADMSG);
	CHECK_ERR_HAS("its header was changed");
	CHECK(h->g.chunks == 8);
	CHECK_RC(sseg_pool_check(p), 0);
	/* and after all that the pool works */
	CHECK_RC(pu_store(p, 0, 4), 4);
	CHECK_RC(sseg_pool_get(p, keys, 4, 0, got), 4);
	for (int i = 0; i < 4; i++)
		CHECK(pu_holds(sseg_pool_chunk(p, got[i]), CHUNK, (uint64_t)i));
	sseg_pool_close(p);
	return 0;
}

/* Random bytes over every record, many times: no crash, no hit with
 * another key's bytes, and a check that resets leaves a working pool. */
static int garbage_everywhere(void *arg)
{
	char name[64];
	sseg_pool_t *p = fresh(32, name, sizeof(name));
	struct pool_header *h = (void *)scribbler(p);
	uint8_t *meta = scribbler(p) + h->g.slots_off;
	uint64_t len = h->g.index_off + h->g.buckets * 8 - h->g.slots_off, seed = 1;
	int resets = 0;
	uint8_t keys[32 * SSEG_POOL_KEY_SIZE];
	uint32_t got[32];

	(void)arg;
	sseg_set_log_level(SSEG_LOG_ERROR); /* a warning a reset: hundreds */
	pu_keys(0, 32, keys);
	for (int round = 0; round < 300; round++) {
		int hits;

		pu_store(p, 0, 32);
		for (int i = 0; i < 8; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			meta[(seed >> 16) % len] = (uint8_t)(seed >> 40);
		}
		hits = sseg_pool_get(p, keys, 32, 0, got);
		CHECK(hits >= 0 || hits == -EBADMSG);
		resets += hits == -EBADMSG;
		for (int i = 0; hits > 0 && i < 32; i++)
			if (got[i] != SSEG_POOL_NONE) {
				CHECK(pu_holds(sseg_pool_chunk(p, got[i]), CHUNK, (uint64_t)i));
				CHECK_RC(sseg_pool_unpin(p, &got[i], 1), 0);
			}
		if (round % 50 == 49) {
			int rc = sseg_pool_check(p);

			CHECK(rc == 0 || rc == -EBADMSG);
			resets += rc == -EBADMSG;
			CHECK_RC(sseg_pool_check(p), 0);
		}
	}
	CHECK(resets > 0); /* the garbage was found, not just survived */
	sseg_pool_close(p);
	return 0;
}

/* ---- another user ---- */

struct outside {
	pid_t owner;
	int fd;
	const char *name;
};

static int stranger_tries(void *arg)
{
	struct outside *o = arg;
	char path[64];
	sseg_pool_t *p;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)o->owner, o->fd);
	if (open(path, O_RDONLY) >= 0)
		return 1;
	/* the same name is this user's own pool, empty: nothing of root's */
	if (pu_open(o->name, 0, 0, MEANING, SSEG_POOL_EXISTING, &p) != -ENOENT)
		return 2;
	return 0;
}

static int no_other_user(void *arg)
{
	struct outside o;
	struct stranger s = { .act = stranger_tries, .arg = &o, .fds = 8 };
	char name[64], path[64];
	sseg_pool_t *p;

	(void)arg;
	if (geteuid() != 0) {
		fprintf(stderr, "needs root to act as another user\n");
		return TU_SKIP;
	}
	p = fresh(4, name, sizeof(name));
	CHECK_RC(pu_store(p, 0, 1), 1);
	o.owner = getpid();
	o.name = name;
	o.fd = -1;
	for (int fd = 3; fd < 1024 && o.fd < 0; fd++) {
		char link[128];
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n > 0 && (link[n] = 0, strstr(link, "memfd:sseg-pool")))
			o.fd = fd;
	}
	CHECK(o.fd >= 0);
	stranger_start(&s);
	stranger_stop(&s);
	sseg_pool_close(p);
	return 0;
}

static int map_only_copies(void *arg)
{
	char name[64];
	sseg_pool_t *p = fresh(4, name, sizeof(name)), *m;
	struct sseg_pool_info in = { .sz = sizeof(in) };
	uint8_t keys[SSEG_POOL_KEY_SIZE];
	uint32_t got;

	(void)arg;
	CHECK_RC(pu_store(p, 0, 1), 1);
	CHECK_RC(pu_open(name, 0, 0, MEANING, SSEG_POOL_MAP_ONLY, &m), 0);
	CHECK_RC(sseg_pool_info(m, &in), 0);
	CHECK(in.slot == -1 && in.attached == 1 && in.created == 0);
	pu_keys(0, 1, keys);
	CHECK_RC(sseg_pool_get(p, keys, 1, 0, &got), 1);
	CHECK(pu_holds(sseg_pool_chunk(m, got), CHUNK, 0));
	CHECK_RC(sseg_pool_get(m, keys, 1, 0, &got), -EPERM);
	CHECK_ERR_HAS("map-only");
	sseg_pool_close(m);
	sseg_pool_close(p);
	return 0;
}

/* A map-only open may be the first (an engine's workers start before its
 * scheduler): the pool it makes is the one every later open finds, while
 * it alone has it open too. */
static int map_only_maker_is_found(void *arg)
{
	char name[64];
	sseg_pool_t *m, *p, *q;
	struct sseg_pool_info mi = { .sz = sizeof(mi) }, in = { .sz = sizeof(in) };
	uint8_t keys[SSEG_POOL_KEY_SIZE];
	uint32_t got;

	(void)arg;
	tu_name(name, sizeof(name), "mapmaker");
	CHECK_RC(pu_open(name, CHUNK, 4, MEANING, SSEG_POOL_MAP_ONLY, &m), 0);
	CHECK_RC(sseg_pool_info(m, &mi), 0);
	CHECK(mi.created == 1 && mi.slot == -1);
	CHECK_RC(pu_open(name, CHUNK, 4, MEANING, 0, &p), 0);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.created == 0 && in.inode == mi.inode);
	CHECK_RC(pu_store(p, 0, 1), 1);
	pu_keys(0, 1, keys);
	CHECK_RC(sseg_pool_get(p, keys, 1, 0, &got), 1);
	CHECK(pu_holds(sseg_pool_chunk(m, got), CHUNK, 0));
	sseg_pool_close(p); /* the map-only handle still has it: found again */
	CHECK_RC(pu_open(name, CHUNK, 4, MEANING, 0, &q), 0);
	CHECK_RC(sseg_pool_info(q, &in), 0);
	CHECK(in.created == 0 && in.inode == mi.inode && in.used == 1);
	sseg_pool_close(q);
	sseg_pool_close(m);
	CHECK_RC(pu_open(name, CHUNK, 4, MEANING, 0, &q), 0); /* nobody had it: a new one */
	CHECK_RC(sseg_pool_info(q, &in), 0);
	CHECK(in.created == 1 && in.used == 0);
	sseg_pool_close(q);
	return 0;
}

/* An observer (SSEG_POOL_OBSERVE, as `sharedseg ls` opens) maps the pool
 * but keeps it findable for no one: once its last process closes it, the
 * next open makes a new one, as if no one had looked. */
static int an_observer_is_found_by_no_one(void *arg)
{
	char name[64];
	sseg_pool_t *p, *o, *q;
	struct sseg_pool_info pi = { .sz = sizeof(pi) }, in = { .sz = sizeof(in) };

	(void)arg;
	tu_name(name, sizeof(name), "observed");
	CHECK_RC(pu_open(name, CHUNK, 4, MEANING, SSEG_POOL_OBSERVE, &o), -ENOENT);
	CHECK_RC(pu_open(name, CHUNK, 4, MEANING, 0, &p), 0);
	CHECK_RC(pu_store(p, 0, 1), 1);
	CHECK_RC(sseg_pool_info(p, &pi), 0);
	CHECK_RC(pu_open(name, 0, 0, NULL, SSEG_POOL_OBSERVE, &o), 0);
	CHECK_RC(sseg_pool_info(o, &in), 0);
	CHECK(in.created == 0 && in.slot == -1 && in.inode == pi.inode && in.used == 1);
	sseg_pool_close(p); /* the observer still maps it, and no open finds it */
	CHECK_RC(pu_open(name, CHUNK, 4, MEANING, SSEG_POOL_EXISTING, &q), -ENOENT);
	CHECK_RC(pu_open(name, CHUNK, 4, MEANING, 0, &q), 0);
	CHECK_RC(sseg_pool_info(q, &in), 0);
	CHECK(in.created == 1 && in.used == 0 && in.inode != pi.inode);
	sseg_pool_close(q);
	sseg_pool_close(o);
	return 0;
}

static int close_lets_go(void *arg)
{
	char name[64];
	sseg_pool_t *p = fresh(2, name, sizeof(name)), *q;
	struct sseg_pool_info in = { .sz = sizeof(in) };
	uint8_t keys[2 * SSEG_POOL_KEY_SIZE];
	uint32_t got[2];

	(void)arg;
	CHECK_RC(pu_store(p, 0, 1), 1);
	CHECK_RC(pu_open(name, 0, 0, MEANING, 0, &q), 0);
	pu_keys(0, 2, keys);
	CHECK_RC(sseg_pool_get(q, keys, 1, 0, got), 1);
	CHECK_RC(sseg_pool_reserve(q, keys + SSEG_POOL_KEY_SIZE, 1, got + 1), 1);
	sseg_pool_close(q);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.pinned == 0 && in.filling == 0 && in.attached == 1 && in.reclaims == 0);
	CHECK_RC(pu_store(p, 10, 2), 2);
	sseg_pool_close(p);
	return 0;
}

static int bad_arguments(void *arg)
{
	char name[64];
	sseg_pool_t *p = fresh(2, name, sizeof(name)), *q;
	uint8_t keys[SSEG_POOL_KEY_SIZE] = { 0 };
	uint32_t got = 7;
	SSEG_POOL_OPTS(o, .name = "bad/name", .chunk_size = CHUNK, .chunks = 2);

	(void)arg;
	CHECK_RC(sseg_pool_open(&o, &q), -EINVAL);
	CHECK_ERR_HAS("[A-Za-z0-9._-]");
	o.name = "ok";
	o.chunk_size = 100;
	CHECK_RC(sseg_pool_open(&o, &q), -EINVAL);
	CHECK_ERR_HAS("not a multiple of 64");
	o.chunk_size = 1ull << 40;
	o.chunks = 1ull << 30;
	CHECK_RC(sseg_pool_open(&o, &q), -EOVERFLOW);
	CHECK_RC(sseg_pool_open(NULL, &q), -EINVAL);
	CHECK_RC(sseg_pool_get(NULL, keys, 1, 0, &got), -EINVAL);
	CHECK_RC(sseg_pool_get(p, keys, -1, 0, &got), -EINVAL);
	CHECK_RC(sseg_pool_get(p, NULL, 1, 0, &got), -EINVAL);
	got = 2;
	CHECK_RC(sseg_pool_unpin(p, &got, 1), -EINVAL);
	CHECK_ERR_HAS("chunk 2 of pool");
	got = 0;
	CHECK_RC(sseg_pool_unpin(p, &got, 1), -EINVAL);
	CHECK_ERR_HAS("not pinned by this handle");
	CHECK(sseg_pool_chunk(p, 2) == NULL && sseg_pool_chunk(p, 1) != NULL);
	CHECK_RC(pu_open(name, 0, 0, MEANING, SSEG_POOL_EXISTING, &q), 0);
	sseg_pool_close(q);
	sseg_pool_close(NULL);
	sseg_pool_close(p);
	return 0;
}

static const struct tu_case cases[] = {
	{ "stores and finds", stores_and_finds, NULL, 0 },
	{ "prefix stops at a miss", prefix_stops_at_a_miss, NULL, 0 },
	{ "evicts by the clock", evicts_by_the_clock, NULL, 0 },
	{ "half done is invisible", half_done_is_invisible, NULL, 0 },
	{ "one pool by name", one_pool_by_name, NULL, 0 },
	{ "one meaning per pool", one_meaning_per_pool, NULL, 0 },
	{ "a dead process's share comes back", dead_process_reclaimed, NULL, 0 },
	{ "broken records reset", broken_records_reset, NULL, 0 },
	{ "garbage everywhere", garbage_everywhere, NULL, 0 },
	{ "no other user", no_other_user, NULL, 0 },
	{ "map only copies", map_only_copies, NULL, 0 },
	{ "a map-only maker is found", map_only_maker_is_found, NULL, 0 },
	{ "an observer is found by no one", an_observer_is_found_by_no_one, NULL, 0 },
	{ "close lets go", close_lets_go, NULL, 0 },
	{ "bad arguments", bad_arguments, NULL, 0 },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	return tu_run_cases(argc, argv, cases);
}
