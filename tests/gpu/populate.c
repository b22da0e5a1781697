/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check populate: making SIZE bytes of shared memory resident with one
 * thread per core, from one memfd against several memfds under one
 * mapping (vLLM 0.33 splits its region into several files because the
 * page-cache inserts of one shm file serialise), on 4 KiB pages, THP and
 * 2 MiB HugeTLB pages. CPU only: it needs no driver. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "lines.h"
#include "populate.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define MAX_THREADS 64
#define HUGE (2 * MiB)

enum kind { KIND_BASE, KIND_THP, KIND_HUGETLB };
static const char *const kind_names[] = { "base", "thp", "hugetlb-2M" };

struct region {
	unsigned char *base; /* inside the reservation, aligned to the page */
	void *reservation;
	size_t reserved;
	size_t size;
	int fds[MAX_THREADS];
	int files;
};

struct slice {
	unsigned char *p;
	size_t len;
	size_t page;
	int err;
	int touched; /* MADV_POPULATE_WRITE missing: written page by page */
};

static void *populate_slice(void *arg)
{
	struct slice *s = arg;

	if (!madvise(s->p, s->len, MADV_POPULATE_WRITE))
		return NULL;
	if (errno != EINVAL) {
		s->err = errno;
		return NULL;
	}
	s->touched = 1; /* a kernel before 5.14 */
	for (size_t off = 0; off < s->len; off += s->page)
		s->p[off] = 0;
	return NULL;
}

/* Whether the kernel lets madvise ask for THP on shmem: why not, or NULL. */
static const char *thp_refusal(void)
{
	static char why[160];
	char value[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");

	if (!f)
		return "no /sys/kernel/mm/transparent_hugepage/shmem_enabled";
	if (!fgets(value, sizeof(value), f))
		value[0] = '\0';
	fclose(f);
	if (strstr(value, "[always]") || strstr(value, "[advise]") ||
	    strstr(value, "[within_size]") || strstr(value, "[force]"))
		return NULL;
	value[strcspn(value, "]")] = '\0';
	snprintf(why, sizeof(why), "shmem_enabled is %s]: THP on shmem needs advise or always",
		 strchr(value, '[') ? strchr(value, '[') : "[?");
	return why;
}

static void region_free(struct region *r)
{
	for (int i = 0; i < r->files; i++)
		close(r->fds[i]);
	if (r->reservation)
		munmap(r->reservation, r->reserved);
	*r = (struct region){ 0 };
}

/* size bytes from files memfds, each mapped over its part of one
 * reservation; the error and what it was, or 0. */
static int region_map(struct region *r, size_t size, int files, enum kind kind,
		      const char **what)
{
	size_t page = kind == KIND_BASE ? 4096 : HUGE, part = size / (size_t)files / page * page;
	size_t off = 0;

	r->size = size = part * (size_t)files;
	r->reserved = size + HUGE;
	*what = "reserve";
	r->reservation = mmap(NULL, r->reserved, PROT_NONE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r->reservation == MAP_FAILED) {
		r->reservation = NULL;
		return errno;
	}
	r->base = (unsigned char *)(((uintptr_t)r->reservation + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
	for (; r->files < files; r->files++, off += part) {
		int fd = memfd_create("gpu-check-populate",
				      MFD_CLOEXEC | (kind == KIND_HUGETLB ? MFD_HUGETLB : 0));

		*what = kind == KIND_HUGETLB ? "memfd_create(MFD_HUGETLB)" : "memfd_create";
		if (fd < 0)
			return errno;
		r->fds[r->files] = fd;
		*what = "ftruncate";
		if (ftruncate(fd, (off_t)part))
			return errno;
		*what = "mmap(MAP_FIXED) of a memfd";
		if (mmap(r->base + off, part, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
		    MAP_FAILED)
			return errno;
		*what = "madvise(MADV_HUGEPAGE)";
		if (kind == KIND_THP && madvise(r->base + off, part, MADV_HUGEPAGE))
			return errno;
	}
	return 0;
}

/* Populates the region with threads slices, each a multiple of page. */
static int region_populate(struct region *r, int threads, size_t page, int *touched)
{
	pthread_t tids[MAX_THREADS];
	struct slice slices[MAX_THREADS];
	size_t per = r->size / (size_t)threads / page * page, off = 0;
	int started = 0, err = 0;

	for (int i = 0; i < threads; i++, off += per) {
		slices[i] = (struct slice){ .p = r->base + off, .page = page,
					    .len = i == threads - 1 ? r->size - off : per };
		if (pthread_create(&tids[i], NULL, populate_slice, &slices[i]) == 0)
			started++;
		else
			populate_slice(&slices[i]);
	}
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	for (int i = 0; i < threads; i++) {
		err = err ? err : slices[i].err;
		*touched |= slices[i].touched;
	}
	return err;
}

static void populate_refused(enum kind kind, int files, size_t size, const char *result,
			     const char *what, const char *error)
{
	struct json j;

	j_begin(&j, "populate");
	j_str(&j, "pages", kind_names[kind]);
	j_int(&j, "files", files);
	j_int(&j, "size", (long long)size);
	j_str(&j, "what", what);
	j_str(&j, "result", result);
	j_str(&j, "error", error);
	j_end(&j);
}

static void populate_one(size_t size, enum kind kind, int files, int threads)
{
	struct region r = { 0 };
	const char *what = "";
	char obtained[32];
	int touched = 0, err = region_map(&r, size, files, kind, &what);
	double t0 = now(), seconds;
	struct json j;

	if (!err) {
		what = "madvise(MADV_POPULATE_WRITE)";
		err = region_populate(&r, threads, kind == KIND_BASE ? 4096 : HUGE, &touched);
	}
	seconds = now() - t0;
	if (err) {
		/* An empty HugeTLB pool is the machine's state, not a refusal. */
		populate_refused(kind, files, size,
				 kind == KIND_HUGETLB && err == ENOMEM ? "skipped" : "refused", what,
				 kind == KIND_HUGETLB && err == ENOMEM
					 ? "not enough free 2 MiB HugeTLB pages (ENOMEM)"
					 : errno_name(err));
		region_free(&r);
		return;
	}
	pages_of(r.base, obtained, sizeof(obtained));
	j_begin(&j, "populate");
	j_str(&j, "pages", kind_names[kind]);
	j_str(&j, "pages_obtained", obtained);
	j_int(&j, "files", files);
	j_int(&j, "threads", threads);
	j_int(&j, "size", (long long)r.size);
	j_str(&j, "result", "pass");
	j_str(&j, "how", touched ? "a write per page" : "MADV_POPULATE_WRITE");
	j_num(&j, "seconds", seconds);
	j_num(&j, "gb_s", (double)r.size / seconds / 1e9);
	j_end(&j);
	region_free(&r);
}

int populate_main(const unsigned long long *sizes, int n)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int threads = cores < 1 ? 1 : cores > MAX_THREADS ? MAX_THREADS : (int)cores;
	const char *no_thp = thp_refusal();

	for (int i = 0; i < n; i++) {
		for (enum kind kind = KIND_BASE; kind <= KIND_HUGETLB; kind++) {
			int files[2] = { 1, threads };

			for (int f = 0; f < 2; f++) {
				if (kind == KIND_THP && no_thp)
					populate_refused(kind, files[f], sizes[i], "skipped",
							 "THP", no_thp);
				else if (kind == KIND_HUGETLB && pages_wanted() == SSEG_PAGES_BASE)
					populate_refused(kind, files[f], sizes[i], "skipped",
							 "HugeTLB", "SSEG_GPU_PAGES=base");
				else
					populate_one(sizes[i], kind, files[f], threads);
			}
		}
	}
	return 0;
}
