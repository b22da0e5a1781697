/* SPDX-License-Identifier: Apache-2.0 */
/* The ways to make a memfd's 4 KiB pages resident, timed side by side in
 * one process on fresh memfds of the case's size: MADV_POPULATE_WRITE on a
 * mapping with 1 and 2 threads (what the owner does), and fallocate() on
 * the file (pages allocated without page tables), each followed by a
 * second mapping's first read (what a peer's first touch then costs: its
 * page tables, and whatever the first pass left undone). Then, on the
 * populated memfd, a peer's page tables made up front by
 * MADV_POPULATE_READ and its read after that, against the first read that
 * faults them (with the kernel's fault-around) as it goes. */
#define _GNU_SOURCE /* fallocate, memfd_create */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels.h"
#include "report.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum way { WAY_POPULATE_1, WAY_POPULATE_2, WAY_FALLOCATE, WAYS };

static const char *const way_names[WAYS] = { "populate_write_1_thread",
					     "populate_write_2_threads", "fallocate" };

struct half {
	char *base;
	uint64_t len;
	int err;
};

static void *populate_half(void *arg)
{
	struct half *h = arg;

	h->err = madvise(h->base, h->len, MADV_POPULATE_WRITE) ? errno : 0;
	return NULL;
}

static int populate(char *base, uint64_t len, int threads)
{
	struct half halves[2] = { { base, len / 2, 0 }, { base + len / 2, len - len / 2, 0 } };
	pthread_t tid;

	if (threads == 1) {
		halves[0].len = len;
		populate_half(&halves[0]);
		return halves[0].err;
	}
	if (pthread_create(&tid, NULL, populate_half, &halves[1]))
		return EAGAIN;
	populate_half(&halves[0]);
	pthread_join(tid, NULL);
	return halves[0].err ? halves[0].err : halves[1].err;
}

static void *map_fd(int fd, uint64_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p != MAP_FAILED)
		madvise(p, len, MADV_NOHUGEPAGE);
	return p == MAP_FAILED ? NULL : p;
}

/* A third mapping of the populated file: MADV_POPULATE_READ's seconds,
 * and a read's after it. */
static int prefaulted(int fd, uint64_t len, double *advice, double *read)
{
	char *p = map_fd(fd, len);
	double t0 = now_s();
	int err;

	if (!p)
		return ENOMEM;
	err = madvise(p, len, MADV_POPULATE_READ) ? errno : 0;
	*advice = now_s() - t0;
	if (!err)
		*read = time_read(p, len);
	munmap(p, len);
	return err;
}

struct peer_tables {
	double advice, read;
};

/* One repetition of one way: *first its seconds, *then a second mapping's
 * first read after it; with tables, a third mapping's prefaulted read. */
static int one_way(enum way w, uint64_t len, double *first, double *then,
		   struct peer_tables *tables)
{
	int fd = memfd_create("sseg-bench-alt", MFD_CLOEXEC), err = 0;
	char *owner = NULL, *peer = NULL;
	double t0;

	if (fd < 0 || ftruncate(fd, (off_t)len))
		return errno;
	owner = map_fd(fd, len);
	peer = map_fd(fd, len);
	if (!owner || !peer) {
		err = ENOMEM;
		goto out;
	}
	t0 = now_s();
	if (w == WAY_FALLOCATE)
		err = fallocate(fd, 0, 0, (off_t)len) ? errno : 0;
	else
		err = populate(owner, len, w == WAY_POPULATE_1 ? 1 : 2);
	*first = now_s() - t0;
	if (!err)
		*then = time_read(peer, len);
	if (!err && tables)
		err = prefaulted(fd, len, &tables->advice, &tables->read);
out:
	if (owner)
		munmap(owner, len);
	if (peer)
		munmap(peer, len);
	close(fd);
	return err;
}

static void print_way(const struct bench_case *bc, const char *bench, enum way w,
		      double *seconds, int n)
{
	struct row r = { bench, way_names[w], 1, bc->size, "base", "base", "s" };

	row_begin(&r, seconds, n);
	row_end();
}

/* A peer's page tables on populated memory, each way. */
static void print_tables(const struct bench_case *bc, const char *way, double *seconds, int n)
{
	struct row r = { "peer_tables_4k", way, 1, bc->size, "base", "base", "s" };

	row_begin(&r, seconds, n);
	row_end();
}

int alternatives_run(const struct bench_case *bc)
{
	double first[WAYS][ROW_MAX_REPS], then[WAYS][ROW_MAX_REPS], ignore;
	double advice[ROW_MAX_REPS], read[ROW_MAX_REPS];
	struct room_need need = { 0 };
	struct peer_tables t;
	int err;

	room_hold(&need, SSEG_PAGES_BASE, bc->size); /* one memfd at a time, however mapped */
	if (room_check(&need, "alternatives", bc->size))
		return 2;
	/* Untimed: the machine hands back memory it holds for the first. */
	if ((err = one_way(WAY_POPULATE_2, bc->size, &ignore, &ignore, NULL)))
		goto fail;
	for (int i = 0; i < bc->reps; i++) {
		for (int w = 0; w < WAYS; w++)
			if ((err = one_way((enum way)w, bc->size, &first[w][i], &then[w][i],
					   w == WAY_POPULATE_2 ? &t : NULL)))
				goto fail;
		advice[i] = t.advice;
		read[i] = t.advice + t.read;
	}
	for (int w = 0; w < WAYS; w++) {
		print_way(bc, "resident_4k", (enum way)w, first[w], bc->reps);
		print_way(bc, "first_read_after", (enum way)w, then[w], bc->reps);
	}
	print_tables(bc, "populate_read", advice, bc->reps);
	print_tables(bc, "populate_read_then_read", read, bc->reps);
	print_tables(bc, "first_read_faulting", then[WAY_POPULATE_2], bc->reps);
	return 0;
fail:
	fprintf(stderr, "sharedseg bench: alternatives at %llu bytes: %s\n",
		(unsigned long long)bc->size, strerror(err));
	return 1;
}
