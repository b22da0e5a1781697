/* SPDX-License-Identifier: Apache-2.0 */
/* Population: fault every page in up front, with threads, because zeroing
 * hundreds of GiB on one core takes minutes, and because MADV_POPULATE_*
 * reports an exhausted HugeTLB pool or memory limit as ENOMEM now instead of
 * a SIGBUS at some later first touch. */
#define _GNU_SOURCE /* Linux interfaces beyond POSIX */
#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "os/host.h"
#include "os/populate.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define TOUCH_STRIDE 4096

struct chunk {
	uint8_t *addr;
	uint64_t len;
	bool writable;
	int err; /* 0 or a negative errno */
};

/* Kernels before 5.14 lack MADV_POPULATE_*: touch one byte a page. A write
 * stores back what it read, so populating never changes content. */
static void touch(struct chunk *c)
{
	volatile uint8_t *p = c->addr;

	for (uint64_t off = 0; off < c->len; off += TOUCH_STRIDE) {
		uint8_t v = p[off];

		if (c->writable)
			p[off] = v;
	}
}

/* The kernel validates the advice before it looks at the range, so an
 * empty range tells whether MADV_POPULATE_* exists without touching memory;
 * a later EINVAL is then a real error, not an old kernel. */
static bool have_populate(void *addr)
{
	static int known; /* 0 unknown, 1 yes, 2 no */
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);

	/* Tests stand in for an old kernel here. */
	if (sseg_fault("madv_populate"))
		return false;
	if (k == 0) {
		void *page = (void *)((uintptr_t)addr & ~(uintptr_t)(sseg_os_base_page_size() - 1));

		k = madvise(page, 0, MADV_POPULATE_READ) && errno == EINVAL ? 2 : 1;
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	return k == 1;
}

bool sseg_os_populate_supported(void)
{
	static uint8_t probe_page[1] __attribute__((aligned(4096)));

	return have_populate(probe_page);
}

static void *populate_chunk(void *arg)
{
	struct chunk *c = arg;
	int advice = c->writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;

	/* Tests stand in for a pool drained or a limit reached here. */
	c->err = sseg_fault("populate");
	if (c->err)
		return NULL;
	if (!have_populate(c->addr)) {
		touch(c);
		return NULL;
	}
	if (madvise(c->addr, c->len, advice))
		c->err = -errno;
	return NULL;
}

static int chunk_error(const struct chunk *c, const uint8_t *base)
{
	uint64_t off = (uint64_t)(c->addr - base);

	/* EFAULT and EHWPOISON are what a SIGBUS would have been: no page
	 * could be allocated (an exhausted HugeTLB pool, a cgroup limit). */
	if (c->err == -ENOMEM || c->err == -EFAULT || c->err == -EHWPOISON)
		return sseg_err(-ENOMEM, "populating %" PRIu64 " bytes at offset %" PRIu64
				" failed: out of memory (HugeTLB pool or memory limit)",
				c->len, off);
	return sseg_err(c->err, "populating %" PRIu64 " bytes at offset %" PRIu64
			" failed: %s", c->len, off, strerror(-c->err));
}

/* Splits len into n chunks of whole pages, sizes differing by one page. */
static void split(uint8_t *addr, uint64_t len, uint64_t page_size, int n, bool writable,
		  struct chunk *chunks)
{
	uint64_t pages = (len + page_size - 1) / page_size;

	for (int i = 0; i < n; i++) {
		uint64_t start = pages * (uint64_t)i / (uint64_t)n * page_size;
		uint64_t end = i == n - 1 ? len : pages * (uint64_t)(i + 1) / (uint64_t)n * page_size;

		chunks[i].addr = addr + start;
		chunks[i].len = end - start;
		chunks[i].writable = writable;
		chunks[i].err = 0;
	}
}

static int run_threads(struct chunk *chunks, int n)
{
	pthread_t tids[64];
	int started = 1, rc = 0;

	/* Chunk 0 runs on the calling thread. */
	for (; started < n; started++) {
		int err = pthread_create(&tids[started], NULL, populate_chunk, &chunks[started]);

		if (err) {
			rc = sseg_err(-err, "cannot start population thread %d: %s", started,
				      strerror(err));
			break;
		}
	}
	if (rc == 0)
		populate_chunk(&chunks[0]);
	for (int i = 1; i < started; i++)
		pthread_join(tids[i], NULL);
	return rc;
}

int sseg_os_populate(void *base, uint64_t offset, uint64_t len, uint64_t page_size,
		     int threads, bool writable)
{
	uint8_t *addr = (uint8_t *)base + offset;
	struct chunk chunks[64];
	uint64_t pages;
	int n, rc;

	if (len == 0)
		return 0;
	if (!sseg_is_pow2(page_size) || threads < 1)
		return sseg_err(-EINVAL, "cannot populate with page size %" PRIu64
				" and %d threads", page_size, threads);
	pages = (len + page_size - 1) / page_size;
	n = threads < (int)ARRAY_SIZE(chunks) ? threads : (int)ARRAY_SIZE(chunks);
	if ((uint64_t)n > pages)
		n = (int)pages;
	split(addr, len, page_size, n, writable, chunks);
	have_populate(addr); /* probe once, before the threads race to */
	if (n == 1)
		populate_chunk(&chunks[0]);
	else if ((rc = run_threads(chunks, n)))
		return rc;
	for (int i = 0; i < n; i++)
		if (chunks[i].err)
			return chunk_error(&chunks[i], base);
	return 0;
}

/* In windows, so that the vector stays small whatever the size. */
#define RESIDENT_WINDOW_PAGES 4096

int sseg_os_resident(void *addr, uint64_t len, uint64_t *bytes)
{
	uint64_t page = sseg_os_base_page_size(), pages = (len + page - 1) / page, count = 0;
	unsigned char vec[RESIDENT_WINDOW_PAGES];

	for (uint64_t first = 0; first < pages; first += RESIDENT_WINDOW_PAGES) {
		uint64_t n = pages - first < RESIDENT_WINDOW_PAGES ? pages - first
								     : RESIDENT_WINDOW_PAGES;

		if (mincore((char *)addr + first * page, n * page, vec))
			return sseg_err(-errno, "mincore failed: %s", strerror(errno));
		for (uint64_t i = 0; i < n; i++)
			count += vec[i] & 1;
	}
	*bytes = count * page;
	return 0;
}
