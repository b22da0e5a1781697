/* SPDX-License-Identifier: Apache-2.0 */
/* Teardown that keeps failing, concurrent with creates: segments handed to
 * the pending list are retried (and freed) by other threads' creates while
 * the thread that deferred them still returns; nothing is read after the
 * hand-over, nothing leaks, and the count comes back to zero. Run under
 * ThreadSanitizer by `make test` (label concurrency). */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fault.h"
#include "testutil.h"

#define THREADS 4
#define ROUNDS 40

static int solo(const char *name, sseg_t **seg)
{
	SSEG_OPTS(o, .name = name, .size = 1u << 20, .world_size = 1, .pages = SSEG_PAGES_BASE);
	unsigned char blob[SSEG_BLOB_SIZE];
	int rc = sseg_create(&o, seg, blob);

	return rc ? rc : sseg_complete(*seg, blob);
}

/* Destroys until done or taken over: 0, or -EINPROGRESS once deferred. */
static int destroy_through(sseg_t *seg)
{
	for (;;) {
		int rc = sseg_destroy(seg);

		if (rc == 0 || rc == -EINPROGRESS)
			return rc;
		CHECK(rc == -EIO);
	}
}

static void *worker(void *arg)
{
	char name[64];
	int deferred = 0;

	snprintf(name, sizeof(name), "race-%d", (int)(intptr_t)arg);
	for (int i = 0; i < ROUNDS; i++) {
		sseg_t *seg = NULL;

		CHECK_RC(solo(name, &seg), 0);
		/* Every other round's destroy meets failing munmaps. */
		if (i % 2 == 0)
			sseg_test_fault("munmap", 0, 3, -EIO);
		deferred += destroy_through(seg) == -EINPROGRESS;
		sseg_pending_count(); /* read while others change it */
	}
	return (void *)(intptr_t)deferred;
}

int main(void)
{
	pthread_t tids[THREADS];
	struct tu_maps before;
	int deferred = 0, before_fds;
	sseg_t *seg;

	/* Per-thread malloc arenas reserve address space that would read as
	 * leaked windows: one arena. */
	mallopt(M_ARENA_MAX, 1);
	before = tu_maps();
	before_fds = tu_count_fds();

	for (int t = 0; t < THREADS; t++)
		CHECK(pthread_create(&tids[t], NULL, worker, (void *)(intptr_t)t) == 0);
	for (int t = 0; t < THREADS; t++) {
		void *ret;

		CHECK(pthread_join(tids[t], &ret) == 0);
		deferred += (int)(intptr_t)ret;
	}
	sseg_test_fault(NULL, 0, 0, 0);
	/* One more create retries whatever is still pending. */
	CHECK_RC(solo("race-last", &seg), 0);
	CHECK_RC(sseg_destroy(seg), 0);
	CHECK(sseg_pending_count() == 0);
	/* The race needs the pending list: without deferrals it is not tried. */
	CHECK(deferred > 0);
	CHECK(tu_maps_same(before, tu_maps()));
	CHECK(tu_count_fds() == before_fds);
	printf("pending_race: ok (%d segment(s) went through the pending list)\n", deferred);
	return 0;
}
