/* The physical limit beside each figure: memset, memcpy and a sequential
 * read on private buffers of the page kind that are already populated, in
 * one process.
 * And prefault: memory a virtual machine's host has not backed yet is
 * several times slower to touch the first time; touching it once up front
 * keeps that out of whichever case would come first. */
#include <stdio.h>
#include <string.h>

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
	row_begin(stdout, &r, seconds, n);
	row_end(stdout);
}

int limits_run(const struct bench_case *bc)
{
	double set[ROW_MAX_REPS], copy[ROW_MAX_REPS], read[ROW_MAX_REPS], huge;
	struct mapping a, b;
	const char *pages;
	int rc = map_private(bc->pages, bc->size, &a);

	memset(&b, 0, sizeof(b));
	if (!rc)
		rc = map_private(bc->pages, bc->size, &b);
	if (rc) {
		fprintf(stderr, "sseg_bench: a private %s buffer: %s\n", sseg_pages_name(bc->pages),
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

int prefault_run(const struct bench_case *bc)
{
	struct mapping m;
	int rc = map_private(bc->pages, bc->size, &m);

	if (rc) {
		fprintf(stderr, "sseg_bench: prefault: %s\n", strerror(-rc));
		return 2;
	}
	touch_write(m.base, m.len);
	unmap(&m);
	return 0;
}
