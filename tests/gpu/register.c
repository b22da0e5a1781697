/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check register: cuMemHostRegister time per rank, 4 KiB against 2 MiB pages. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "driver.h"
#include "lines.h"
#include "ranks.h"
#include "register.h"

struct register_job {
	unsigned char *p; /* the parent's populated memfd mapping, inherited */
	unsigned long long size;
	int reps;
	int ranks;
	int *ready; /* shared: ranks holding a context, so all register at once */
	const char *pages_requested;
	char pages_obtained[32];
};

/* Waits (at most 30 s: a rank may have died) until every rank is ready. */
static void start_together(struct register_job *job)
{
	struct timespec nap = { 0, 1000000 };

	__atomic_add_fetch(job->ready, 1, __ATOMIC_SEQ_CST);
	for (int waited = 0; waited < 30000; waited++) {
		if (__atomic_load_n(job->ready, __ATOMIC_SEQ_CST) >= job->ranks)
			return;
		nanosleep(&nap, NULL);
	}
}

static int register_rank(int rank, void *arg, int out)
{
	struct register_job *job = arg;
	struct record rec = { .rank = rank, .ok = 1, .reps = job->reps, .size = job->size };
	CUresult r = CUDA_SUCCESS;

	if (load_driver(rec.error, sizeof(rec.error)) || enter_device(0) != CUDA_SUCCESS)
		r = CUDA_ERROR_NOT_INITIALIZED;
	start_together(job);
	for (int rep = 0; rep < job->reps && r == CUDA_SUCCESS; rep++) {
		double t0 = now();

		r = cu.cuMemHostRegister(job->p, job->size, CU_MEMHOSTREGISTER_PORTABLE |
							     CU_MEMHOSTREGISTER_DEVICEMAP);
		rec.values[rep] = now() - t0;
		if (r == CUDA_SUCCESS)
			r = cu.cuMemHostUnregister(job->p);
	}
	snprintf(rec.bench, sizeof(rec.bench), "host_register_time");
	snprintf(rec.mechanism, sizeof(rec.mechanism), "cuMemHostRegister");
	snprintf(rec.pages_requested, sizeof(rec.pages_requested), "%s", job->pages_requested);
	snprintf(rec.pages_obtained, sizeof(rec.pages_obtained), "%s", job->pages_obtained);
	if (r != CUDA_SUCCESS) {
		rec.ok = 0;
		rec.bench[0] = '\0';
		if (!rec.error[0])
			snprintf(rec.error, sizeof(rec.error), "cuMemHostRegister: %s", cu_name(r));
	}
	send_record(out, &rec);
	return rec.ok ? 0 : 1;
}

/* A populated shared mapping of size bytes, on 4 KiB or HugeTLB pages. */
static unsigned char *populated(unsigned long long size, int hugetlb, int *err)
{
	int fd = memfd_create("gpu-check-register", MFD_CLOEXEC | (hugetlb ? MFD_HUGETLB : 0));
	void *p = MAP_FAILED;

	*err = 0;
	if (fd < 0 || ftruncate(fd, (off_t)size))
		*err = errno;
	else
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (!*err && p == MAP_FAILED)
		*err = errno;
	if (fd >= 0)
		close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static void register_skipped(const char *pages, const char *why)
{
	struct json j;

	j_begin(&j, "register");
	j_str(&j, "pages_requested", pages);
	j_str(&j, "result", "skipped");
	j_str(&j, "error", why);
	j_end(&j);
}

static int register_pages(unsigned long long size, int reps, int ranks, int hugetlb)
{
	struct register_job job = { .size = size, .reps = reps, .ranks = ranks,
				    .pages_requested = hugetlb ? "hugetlb-2M" : "base" };
	struct record recs[MAX_RANKS] = { 0 };
	int err, nrec = 0, failed;

	job.p = populated(size, hugetlb, &err);
	if (!job.p) {
		register_skipped(job.pages_requested,
				 err == ENOMEM ? "no free HugeTLB pages for the size (ENOMEM)"
					       : errno_name(err));
		return hugetlb ? 0 : 1;
	}
	pages_of(job.p, job.pages_obtained, sizeof(job.pages_obtained));
	job.ready = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			 -1, 0);
	if (job.ready == MAP_FAILED)
		return 1;
	*job.ready = 0;
	failed = ranks_run(ranks, register_rank, &job, recs, MAX_RANKS, &nrec);
	print_all_series(recs, nrec, "s");
	report_failures("register", recs, nrec, failed);
	munmap(job.ready, sizeof(int));
	munmap(job.p, size);
	return failed ? 1 : 0;
}

int register_main(unsigned long long size, int reps, int ranks)
{
	int rc = register_pages(size, reps, ranks, 0);

	if (pages_wanted() == SSEG_PAGES_BASE) {
		register_skipped("hugetlb-2M", "SSEG_GPU_PAGES=base");
		return rc;
	}
	return register_pages(size, reps, ranks, 1) | rc;
}
