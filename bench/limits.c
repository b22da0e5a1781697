/* SPDX-License-Identifier: Apache-2.0 */
/* The physical limits beside each figure, in one process: memset, memcpy
 * and a sequential read on private buffers of the page kind that are
 * already populated; and the first touch of fresh memory, just freed or
 * freed a while ago. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hostmem.h"
#include "kernels.h"
#include "report.h"

static void print_limit(const struct bench_case *bc, const char *bench, const char *pages,
			double *seconds, int n)
{
	struct row r = { bench, "hardware", 1, bc->size, sseg_pages_name(bc->pages), pages,
			 "GB/s" };

	for (int i = 0; i < n; i++)
		seconds[i] = (double)bc->size / seconds[i] / 1e9;
	row_begin(&r, seconds, n);
	row_end();
}

int limits_run(const struct bench_case *bc)
{
	double set[ROW_MAX_REPS], copy[ROW_MAX_REPS], read[ROW_MAX_REPS], huge;
	struct mapping a, b;
	struct room_need need = { 0 };
	const char *pages;
	int rc;

	room_hold(&need, bc->pages, bc->size);
	room_hold(&need, bc->pages, bc->size);
	if (room_check(&need, "limits", bc->size))
		return 2;
	memset(&b, 0, sizeof(b));
	rc = map_private(bc->pages, bc->size, &a);
	if (!rc)
		rc = map_private(bc->pages, bc->size, &b);
	if (rc) {
		fprintf(stderr, "sharedseg bench: a private %s buffer: %s\n", sseg_pages_name(bc->pages),
			strerror(-rc));
		goto out;
	}
	touch_write(a.base, a.len);
	touch_write(b.base, b.len);
	pages = pages_obtained(a.base, a.len, &huge);
	time_memset(a.base, bc->size); /* untimed: caches and TLBs settle */
	time_copy(b.base, a.base, bc->size);
	time_read(a.base, bc->size);
	for (int i = 0; i < bc->reps; i++) {
		set[i] = time_memset(a.base, bc->size);
		copy[i] = time_copy(b.base, a.base, bc->size);
		read[i] = time_read(a.base, bc->size);
	}
	print_limit(bc, "memset_limit", pages, set, bc->reps);
	print_limit(bc, "memcpy_limit", pages, copy, bc->reps);
	print_limit(bc, "read_limit", pages, read, bc->reps);
out:
	unmap(&b);
	unmap(&a);
	return rc ? 2 : 0;
}

/* Seconds to first-touch size fresh bytes of the case's kind; *kind: the
 * kind obtained. */
static double touch_fresh(const struct bench_case *bc, const char **kind)
{
	struct mapping m;
	double t0, s, huge;

	if (map_private(bc->pages, bc->size, &m))
		return -1;
	t0 = now_s();
	touch_write(m.base, m.len);
	s = now_s() - t0;
	*kind = pages_obtained(m.base, m.len, &huge);
	unmap(&m);
	return s;
}

/* Memory freed a moment ago against memory freed idle_s ago: a virtual
 * machine whose balloon reports free pages to its host gives them back,
 * and the next first touch waits for the host to fault them in again. */
static int retouch_after(const struct bench_case *bc, unsigned idle_s, double *rates,
			 const char **kind)
{
	for (int i = 0; i < bc->reps; i++) {
		double s;

		if (touch_fresh(bc, kind) < 0)
			return -1;
		sleep(idle_s);
		s = touch_fresh(bc, kind);
		if (s <= 0)
			return -1;
		rates[i] = (double)bc->size / s / 1e9;
	}
	return 0;
}

int retouch_run(const struct bench_case *bc)
{
	static const unsigned idle[] = { 0, 3 };
	struct row r = { "first_touch", "hardware", 1, bc->size, sseg_pages_name(bc->pages),
			 "", "GB/s" };
	struct room_need need = { 0 };
	double rates[ROW_MAX_REPS];

	room_hold(&need, bc->pages, bc->size); /* one buffer at a time */
	if (room_check(&need, "retouch", bc->size))
		return 2;
	for (size_t k = 0; k < sizeof(idle) / sizeof(idle[0]); k++) {
		if (retouch_after(bc, idle[k], rates, &r.pages_obtained)) {
			fprintf(stderr, "sharedseg bench: a private %s buffer could not be mapped\n",
				sseg_pages_name(bc->pages));
			return 2;
		}
		row_begin(&r, rates, bc->reps);
		row_num("idle_s", idle[k]);
		row_end();
	}
	return 0;
}
