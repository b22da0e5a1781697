/* SPDX-License-Identifier: Apache-2.0 */
/* `sharedseg bench pool`: the host pool beside what it replaces, in one run.
 *   lookup  a 64-key prefix looked up and pinned (then unpinned), per key,
 *           by 1, 2, 4 and 8 processes at once; beside the floor of any
 *           design with a server in the path: a Unix-socket round trip of
 *           the same 64 keys to a process (a thread a client) that answers
 *           from a hash table;
 *   copy    a chunk stored (reserve, memcpy in, publish) and loaded (get,
 *           memcpy out, unpin), beside memcpy of the same bytes between
 *           private buffers of the same page kind;
 *   reclaim what a SIGKILLed process pinned and half-stored, given back at
 *           the next open (its slot taken anew), beside an open with
 *           nothing to give back. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels.h"
#include "mapping.h"
#include "report.h"

#define PREFIX 64
#define PREFIXES 64
#define LOOKUP_CHUNKS 8192
#define LOOKUP_ROUNDS 2000
#define MAX_PROCS 8
#define COPY_CHUNKS 64

static void key_of(uint64_t n, uint8_t *key)
{
	uint64_t w[SSEG_POOL_KEY_SIZE / 8];

	for (size_t i = 0; i < SSEG_POOL_KEY_SIZE / 8; i++)
		w[i] = (n + 1) * 0x9e3779b97f4a7c15ull ^ (i * 0xbf58476d1ce4e5b9ull);
	memcpy(key, w, sizeof(w));
}

static void keys_of(uint64_t first, int n, uint8_t *keys)
{
	for (int i = 0; i < n; i++)
		key_of(first + (uint64_t)i, keys + (size_t)i * SSEG_POOL_KEY_SIZE);
}

static int open_pool(const char *name, uint64_t chunk_size, uint64_t chunks,
		     enum sseg_pages pages, sseg_pool_t **p)
{
	SSEG_POOL_OPTS(o, .name = name, .meaning = "bench", .chunk_size = chunk_size,
		       .chunks = chunks, .pages = pages);
	int rc = sseg_pool_open(&o, p);

	if (rc)
		fprintf(stderr, "sharedseg bench pool: %s\n", sseg_last_error());
	return rc;
}

/* ---- lookups ---- */

struct start_line {
	_Atomic int ready, go;
	double ns_per_key[MAX_PROCS];
};

static void wait_for(_Atomic int *v, int want)
{
	while (atomic_load(v) < want)
		sched_yield();
}

/* One process's rounds: a prefix looked up, pinned and let go. */
static double pool_rounds(sseg_pool_t *p, uint64_t seed)
{
	uint8_t keys[PREFIX * SSEG_POOL_KEY_SIZE];
	uint32_t got[PREFIX];
	double t0;

	t0 = now_s();
	for (int r = 0; r < LOOKUP_ROUNDS; r++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		keys_of((seed >> 33) % PREFIXES * PREFIX, PREFIX, keys);
		if (sseg_pool_get(p, keys, PREFIX, SSEG_POOL_PREFIX, got) != PREFIX ||
		    sseg_pool_unpin(p, got, PREFIX))
			return -1;
	}
	return (now_s() - t0) * 1e9 / (LOOKUP_ROUNDS * PREFIX);
}

/* ---- the server floor: a thread a client, a hash table, one round trip
 * a request of PREFIX keys ---- */

#define TABLE 16384

struct table {
	uint64_t keys[TABLE];
	uint32_t values[TABLE];
};

static uint64_t first_word(const uint8_t *key)
{
	uint64_t w;

	memcpy(&w, key, sizeof(w));
	return w ? w : 1;
}

static uint32_t table_find(const struct table *t, const uint8_t *key)
{
	uint64_t k = first_word(key);

	for (uint64_t i = k % TABLE;; i = (i + 1) % TABLE) {
		if (t->keys[i] == k)
			return t->values[i];
		if (!t->keys[i])
			return UINT32_MAX;
	}
}

static void table_put(struct table *t, const uint8_t *key, uint32_t v)
{
	uint64_t k = first_word(key);
	uint64_t i = k % TABLE;

	while (t->keys[i] && t->keys[i] != k)
		i = (i + 1) % TABLE;
	t->keys[i] = k;
	t->values[i] = v;
}

struct answerer {
	const struct table *t;
	int sock;
};

static void *answer(void *arg)
{
	struct answerer *a = arg;
	uint8_t keys[PREFIX * SSEG_POOL_KEY_SIZE];
	uint32_t got[PREFIX];

	while (recv(a->sock, keys, sizeof(keys), MSG_WAITALL) == (ssize_t)sizeof(keys)) {
		for (int i = 0; i < PREFIX; i++)
			got[i] = table_find(a->t, keys + (size_t)i * SSEG_POOL_KEY_SIZE);
		if (send(a->sock, got, sizeof(got), MSG_NOSIGNAL) != (ssize_t)sizeof(got))
			break;
	}
	return NULL;
}

static void serve(int nclients, const int *socks)
{
	struct table *t = calloc(1, sizeof(*t));
	struct answerer a[MAX_PROCS];
	pthread_t th[MAX_PROCS];
	uint8_t key[SSEG_POOL_KEY_SIZE];

	for (uint32_t n = 0; t && n < PREFIX * PREFIXES; n++) {
		key_of(n, key);
		table_put(t, key, n);
	}
	for (int i = 0; t && i < nclients; i++) {
		a[i] = (struct answerer){ t, socks[i] };
		pthread_create(&th[i], NULL, answer, &a[i]);
	}
	for (int i = 0; t && i < nclients; i++)
		pthread_join(th[i], NULL);
	_exit(0);
}

static double socket_rounds(int sock, uint64_t seed)
{
	uint8_t keys[PREFIX * SSEG_POOL_KEY_SIZE];
	uint32_t got[PREFIX];
	double t0 = now_s();

	for (int r = 0; r < LOOKUP_ROUNDS; r++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		keys_of((seed >> 33) % PREFIXES * PREFIX, PREFIX, keys);
		if (send(sock, keys, sizeof(keys), MSG_NOSIGNAL) != (ssize_t)sizeof(keys) ||
		    recv(sock, got, sizeof(got), MSG_WAITALL) != (ssize_t)sizeof(got) ||
		    got[PREFIX - 1] == UINT32_MAX)
			return -1;
	}
	return (now_s() - t0) * 1e9 / (LOOKUP_ROUNDS * PREFIX);
}

/* nprocs processes at once, started together; each one's ns a key. */
static int lookups_at_once(const char *name, int nprocs, bool server, double *ns)
{
	struct start_line *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int socks[MAX_PROCS][2], theirs[MAX_PROCS], rc = 0;
	pid_t pids[MAX_PROCS], srv = -1;

	if (s == MAP_FAILED)
		return -1;
	memset(s, 0, sizeof(*s));
	for (int i = 0; server && i < nprocs; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, socks[i]))
			return -1;
		theirs[i] = socks[i][1];
	}
	if (server && (srv = fork()) == 0) {
		for (int i = 0; i < nprocs; i++) /* a client's end closed is its EOF */
			close(socks[i][0]);
		serve(nprocs, theirs);
	}
	for (int i = 0; i < nprocs; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			sseg_pool_t *p = NULL;
			double r;

			for (int j = 0; server && j < nprocs; j++)
				close(socks[j][1]);
			if (!server && open_pool(name, 0, 0, SSEG_PAGES_AUTO, &p))
				_exit(1);
			atomic_fetch_add(&s->ready, 1);
			wait_for(&s->go, 1);
			r = server ? socket_rounds(socks[i][0], (uint64_t)i + 1)
				   : pool_rounds(p, (uint64_t)i + 1);
			s->ns_per_key[i] = r;
			sseg_pool_close(p);
			_exit(r > 0 ? 0 : 1);
		}
	}
	wait_for(&s->ready, nprocs);
	atomic_store(&s->go, 1);
	for (int i = 0; i < nprocs; i++) {
		int status;

		waitpid(pids[i], &status, 0);
		rc |= !WIFEXITED(status) || WEXITSTATUS(status);
		ns[i] = s->ns_per_key[i];
	}
	for (int i = 0; server && i < nprocs; i++) {
		close(socks[i][0]);
		close(socks[i][1]);
	}
	if (srv > 0)
		waitpid(srv, NULL, 0);
	munmap(s, sizeof(*s));
	return rc ? -1 : 0;
}

static int lookup_rows(const struct bench_case *bc, const char *name)
{
	static const int procs[] = { 1, 2, 4, 8 };

	for (size_t k = 0; k < sizeof(procs) / sizeof(procs[0]); k++) {
		if (procs[k] > bc->ranks)
			break;
		for (int server = 0; server < 2; server++) {
			struct row r = { "pool_lookup", server ? "unix-socket-server" : "sharedseg-pool",
					 procs[k], PREFIX, sseg_pages_name(bc->pages), "", "ns/key" };
			double med[ROW_MAX_REPS], ns[MAX_PROCS];

			for (int rep = 0; rep < bc->reps; rep++) {
				if (lookups_at_once(name, procs[k], server, ns))
					return -1;
				med[rep] = median_of(ns, procs[k]);
			}
			row_begin(&r, med, bc->reps);
			row_end();
		}
	}
	return 0;
}

/* ---- copies ---- */

static int copy_rows(const struct bench_case *bc, const char *name)
{
	struct mapping src, dst;
	double in[ROW_MAX_REPS], out[ROW_MAX_REPS], plain[ROW_MAX_REPS], huge;
	uint64_t len = bc->size * COPY_CHUNKS;
	uint8_t keys[COPY_CHUNKS * SSEG_POOL_KEY_SIZE];
	uint32_t got[COPY_CHUNKS];
	struct sseg_pool_info info = { .sz = sizeof(info) };
	const char *kind;
	sseg_pool_t *p;
	int rc = -1;

	if (open_pool(name, bc->size, COPY_CHUNKS, bc->pages, &p))
		return -1;
	sseg_pool_info(p, &info);
	if (map_private(bc->pages, len, &src) || map_private(bc->pages, len, &dst))
		goto out;
	touch_write(src.base, len);
	touch_write(dst.base, len);
	touch_write(sseg_pool_chunk(p, 0), len);
	for (int rep = -1; rep < bc->reps; rep++) {
		double t0;

		keys_of((uint64_t)(rep + 2) * 1000000, COPY_CHUNKS, keys);
		t0 = now_s();
		if (sseg_pool_reserve(p, keys, COPY_CHUNKS, got) != COPY_CHUNKS)
			goto out;
		for (int i = 0; i < COPY_CHUNKS; i++)
			memcpy(sseg_pool_chunk(p, got[i]), (uint8_t *)src.base + i * bc->size, bc->size);
		if (sseg_pool_publish(p, got, COPY_CHUNKS) != COPY_CHUNKS)
			goto out;
		t0 = now_s() - t0;
		if (rep >= 0)
			in[rep] = (double)len / t0 / 1e9;
		t0 = now_s();
		if (sseg_pool_get(p, keys, COPY_CHUNKS, 0, got) != COPY_CHUNKS)
			goto out;
		for (int i = 0; i < COPY_CHUNKS; i++)
			memcpy((uint8_t *)dst.base + i * bc->size, sseg_pool_chunk(p, got[i]), bc->size);
		sseg_pool_unpin(p, got, COPY_CHUNKS);
		t0 = now_s() - t0;
		if (rep >= 0)
			out[rep] = (double)len / t0 / 1e9;
		t0 = time_copy(dst.base, src.base, len);
		if (rep >= 0)
			plain[rep] = (double)len / t0 / 1e9;
	}
	kind = pages_obtained(src.base, len, &huge);
	{
		struct row r = { "pool_copy", "sharedseg-pool", 1, bc->size,
				 sseg_pages_name(bc->pages), sseg_pages_name(info.pages), "GB/s" };

		row_begin(&r, in, bc->reps);
		row_str("role", "store");
		row_end();
		row_begin(&r, out, bc->reps);
		row_str("role", "load");
		row_end();
		r.mechanism = "memcpy";
		r.pages_obtained = kind;
		row_begin(&r, plain, bc->reps);
		row_str("role", "memcpy");
		row_end();
	}
	rc = 0;
out:
	unmap(&dst);
	unmap(&src);
	sseg_pool_close(p);
	return rc;
}

/* ---- reclaim ---- */

/* Pins every stored chunk but one and half-stores that one, says so, and
 * waits for the kill. */
static void pin_and_wait(const char *name, uint64_t chunks, int ready)
{
	uint8_t *keys = malloc(chunks * SSEG_POOL_KEY_SIZE);
	uint32_t *got = malloc(chunks * sizeof(*got));
	sseg_pool_t *p;

	if (!keys || !got || open_pool(name, 0, 0, SSEG_PAGES_AUTO, &p))
		_exit(1);
	keys_of(0, (int)chunks, keys);
	if (sseg_pool_get(p, keys, (int)chunks - 1, 0, got) != (int)chunks - 1 ||
	    sseg_pool_reserve(p, keys + (chunks - 1) * SSEG_POOL_KEY_SIZE, 1, got) != 1 ||
	    write(ready, "r", 1) != 1)
		_exit(1);
	for (;;)
		pause();
}

static double timed_open(const char *name)
{
	double t0 = now_s();
	sseg_pool_t *p;

	if (open_pool(name, 0, 0, SSEG_PAGES_AUTO, &p))
		return -1;
	t0 = now_s() - t0;
	sseg_pool_close(p);
	return t0 * 1e3;
}

static int reclaim_rows(const struct bench_case *bc, const char *name)
{
	const uint64_t chunks = 65536;
	double after_kill[ROW_MAX_REPS], clean[ROW_MAX_REPS];
	uint8_t *keys = malloc(chunks * SSEG_POOL_KEY_SIZE);
	uint32_t *got = malloc(chunks * sizeof(*got));
	sseg_pool_t *p;
	int rc = -1;

	if (!keys || !got || open_pool(name, 64, chunks, SSEG_PAGES_BASE, &p))
		goto out;
	keys_of(0, (int)chunks - 1, keys);
	if (sseg_pool_reserve(p, keys, (int)chunks - 1, got) != (int)chunks - 1 ||
	    sseg_pool_publish(p, got, (int)chunks - 1) != (int)chunks - 1)
		goto close;
	for (int rep = 0; rep < bc->reps; rep++) {
		int pipefd[2];
		char c;
		pid_t kid;

		if (pipe(pipefd))
			goto close;
		kid = fork();
		if (kid == 0)
			pin_and_wait(name, chunks, pipefd[1]);
		if (read(pipefd[0], &c, 1) != 1)
			goto close;
		kill(kid, SIGKILL);
		waitpid(kid, NULL, 0);
		close(pipefd[0]);
		close(pipefd[1]);
		after_kill[rep] = timed_open(name); /* takes the dead slot: frees its share */
		clean[rep] = timed_open(name);
	}
	{
		struct row r = { "pool_reclaim", "sharedseg-pool", 1, chunks, "base", "base", "ms" };

		row_begin(&r, after_kill, bc->reps);
		row_str("role", "open after a kill");
		row_u64("pinned", chunks - 1);
		row_end();
		row_begin(&r, clean, bc->reps);
		row_str("role", "open");
		row_end();
	}
	rc = 0;
close:
	sseg_pool_close(p);
out:
	free(keys);
	free(got);
	return rc;
}

int pool_run(const struct bench_case *bc)
{
	char name[64];
	sseg_pool_t *p;
	uint8_t keys[PREFIX * SSEG_POOL_KEY_SIZE];
	uint32_t got[PREFIX];
	int rc = 1;

	snprintf(name, sizeof(name), "bench-pool-%d", (int)getpid());
	/* the lookups' pool, kept open here so that every process finds it */
	if (open_pool(name, 4096, LOOKUP_CHUNKS, bc->pages, &p))
		return 2;
	for (int i = 0; i < PREFIXES; i++) {
		keys_of((uint64_t)i * PREFIX, PREFIX, keys);
		if (sseg_pool_reserve(p, keys, PREFIX, got) != PREFIX ||
		    sseg_pool_publish(p, got, PREFIX) != PREFIX)
			goto out;
	}
	if (lookup_rows(bc, name))
		goto out;
	sseg_pool_close(p);
	p = NULL;
	snprintf(name, sizeof(name), "bench-copy-%d", (int)getpid());
	if (copy_rows(bc, name))
		goto out;
	snprintf(name, sizeof(name), "bench-reclaim-%d", (int)getpid());
	if (reclaim_rows(bc, name))
		goto out;
	rc = 0;
out:
	sseg_pool_close(p);
	return rc;
}
