/* SPDX-License-Identifier: Apache-2.0 */
/* Page policy: what the owner allocates, where it is placed, how it is
 * faulted in, and what was actually obtained. */
#include <stdio.h>
#include <string.h>

#include "segment_types.h"
#include "os/hugepage.h"
#include "os/host.h"
#include "os/memory.h"
#include "os/numa.h"
#include "os/populate.h"
#include "pages.h"

static int hugetlb_fits(uint64_t page_size, uint64_t size, uint64_t *avail, uint64_t *needed)
{
	struct sseg_hugetlb_pool pool;
	uint64_t rounded;

	*avail = 0;
	if (sseg_round_up(size, page_size, &rounded))
		return -EOVERFLOW;
	*needed = rounded / page_size;
	if (sseg_os_hugetlb_pool(page_size, &pool))
		return -ENOENT;
	*avail = pool.free > pool.reserved ? pool.free - pool.reserved : 0;
	return *avail >= *needed ? 0 : -ENOMEM;
}

static void take_hugetlb(enum sseg_pages pages, uint64_t avail, uint64_t needed,
			 struct sseg_page_choice *c)
{
	c->pages = pages;
	c->page_size = pages == SSEG_PAGES_HUGETLB_1G ? SSEG_1G : SSEG_2M;
	snprintf(c->reason, sizeof(c->reason), "HugeTLB %s pool: %llu free pages, %llu needed",
		 pages == SSEG_PAGES_HUGETLB_1G ? "1 GiB" : "2 MiB", (unsigned long long)avail,
		 (unsigned long long)needed);
}

static int choose_hugetlb(enum sseg_pages pages, uint64_t size, struct sseg_page_choice *c)
{
	uint64_t page_size = pages == SSEG_PAGES_HUGETLB_1G ? SSEG_1G : SSEG_2M;
	const char *label = pages == SSEG_PAGES_HUGETLB_1G ? "1 GiB" : "2 MiB";
	uint64_t avail = 0, needed = 0;
	int rc = hugetlb_fits(page_size, size, &avail, &needed);

	if (rc == -ENOENT)
		return sseg_err(-EOPNOTSUPP, "pages=%s: this kernel has no %s HugeTLB pool",
				sseg_pages_name(pages), label);
	if (rc == -ENOMEM)
		return sseg_err(-ENOMEM,
				"pages=%s: the %s HugeTLB pool has %llu free pages, %llu needed; raise "
				"/sys/kernel/mm/hugepages/hugepages-%llukB/nr_hugepages",
				sseg_pages_name(pages), label, (unsigned long long)avail,
				(unsigned long long)needed, (unsigned long long)(page_size >> 10));
	if (rc)
		return sseg_err(rc, "pages=%s: size overflows", sseg_pages_name(pages));
	take_hugetlb(pages, avail, needed, c);
	return 0;
}

static void choose_auto(uint64_t size, struct sseg_page_choice *c)
{
	uint64_t avail2 = 0, avail1 = 0, needed = 0;
	char thp_reason[256];

	if (size >= SSEG_1G && !hugetlb_fits(SSEG_1G, size, &avail1, &needed)) {
		take_hugetlb(SSEG_PAGES_HUGETLB_1G, avail1, needed, c);
		return;
	}
	if (!hugetlb_fits(SSEG_2M, size, &avail2, &needed)) {
		take_hugetlb(SSEG_PAGES_HUGETLB_2M, avail2, needed, c);
		return;
	}
	if (sseg_os_thp_shmem_usable(thp_reason, sizeof(thp_reason))) {
		c->pages = SSEG_PAGES_THP;
		c->page_size = SSEG_2M;
		snprintf(c->reason, sizeof(c->reason),
			 "THP for shmem (HugeTLB 2 MiB pool: %llu free, %llu needed)",
			 (unsigned long long)avail2, (unsigned long long)needed);
		return;
	}
	c->pages = SSEG_PAGES_BASE;
	c->page_size = sseg_os_base_page_size();
	snprintf(c->reason, sizeof(c->reason), "base pages: %s; HugeTLB 2 MiB pool %llu free",
		 thp_reason, (unsigned long long)avail2);
}

int sseg_pages_choose(enum sseg_pages req, uint64_t size, struct sseg_page_choice *c)
{
	char reason[256];

	memset(c, 0, sizeof(*c));
	if (size == 0)
		size = 1; /* the smallest segment: one page of the kind */
	switch (req) {
	case SSEG_PAGES_AUTO:
		choose_auto(size, c);
		return 0;
	case SSEG_PAGES_BASE:
		c->pages = SSEG_PAGES_BASE;
		c->page_size = sseg_os_base_page_size();
		snprintf(c->reason, sizeof(c->reason), "base pages requested");
		return 0;
	case SSEG_PAGES_THP:
		if (!sseg_os_thp_shmem_usable(reason, sizeof(reason)))
			return sseg_err(-EOPNOTSUPP, "pages=thp: %s", reason);
		c->pages = SSEG_PAGES_THP;
		c->page_size = SSEG_2M;
		snprintf(c->reason, sizeof(c->reason), "THP requested");
		return 0;
	case SSEG_PAGES_HUGETLB_2M:
	case SSEG_PAGES_HUGETLB_1G:
		return choose_hugetlb(req, size, c);
	}
	return sseg_err(-EINVAL, "pages=%d is not a page kind", (int)req);
}

int sseg_memory_fits(uint64_t bytes, const char *what)
{
	struct sseg_os_memory m;
	char need[32], avail[32], limit[32], used[32];
	int rc = sseg_os_memory(&m);

	if (rc)
		return 0; /* no /proc/meminfo: nothing to judge by */
	sseg_format_size(bytes, need, sizeof(need));
	sseg_format_size(m.available, avail, sizeof(avail));
	if (bytes > m.available)
		return sseg_err(-ENOMEM,
				"%s needs %s, more than the %s of memory available on this host "
				"(MemAvailable): refused before allocating rather than OOM-killed while "
				"populating",
				what, need, avail);
	if (m.cgroup_limit) {
		uint64_t room = m.cgroup_limit > m.cgroup_usage ? m.cgroup_limit - m.cgroup_usage : 0;

		sseg_format_size(m.cgroup_limit, limit, sizeof(limit));
		sseg_format_size(m.cgroup_usage, used, sizeof(used));
		if (bytes > room)
			return sseg_err(-ENOMEM,
					"%s needs %s, more than this process's memory cgroup allows: "
					"limit %s, %s in use (%s): refused before allocating rather than "
					"OOM-killed while populating",
					what, need, limit, used, m.cgroup);
	}
	return 0;
}

/* Whether what the mapping obtained must be read from smaps: THP shows
 * there only as it is faulted in, and base pages may have been turned into
 * THP by a forcing knob. Reading smaps makes the kernel walk every mapping
 * of the process (tens of ms in a process that imported torch), so
 * HugeTLB (the fd's filesystem decides) and base pages under knobs that
 * cannot force THP are known without it. */
bool sseg_pages_need_smaps(const struct sseg *seg)
{
	char global[16] = "", per2m[16] = "";

	if (seg->pages == SSEG_PAGES_THP)
		return true;
	if (seg->pages != SSEG_PAGES_BASE)
		return false;
	sseg_os_thp_shmem_knobs(global, per2m);
	return !strcmp(global, "force") || !strcmp(per2m, "force");
}

void sseg_pages_verify(struct sseg *seg)
{
	uint64_t huge = 0;
	bool hugetlb = seg->pages == SSEG_PAGES_HUGETLB_2M || seg->pages == SSEG_PAGES_HUGETLB_1G;

	if (!sseg_pages_need_smaps(seg)) {
		seg->huge_bytes = hugetlb ? seg->mapped_size : 0;
		seg->pages_verified = 1;
		return;
	}
	if (sseg_os_huge_bytes(seg->base, seg->mapped_size, &huge))
		return;
	seg->huge_bytes = huge;
	/* HugeTLB pages are what the fd's filesystem says; THP only shows once
	 * faulted in, and may come partly as base pages. */
	seg->pages_verified = hugetlb || seg->pages == SSEG_PAGES_BASE || huge > 0;
	if (seg->pages == SSEG_PAGES_BASE && huge > 0) {
		seg->pages = SSEG_PAGES_THP;
		seg->page_size = SSEG_2M;
		snprintf(seg->pages_reason, sizeof(seg->pages_reason),
			 "base pages requested but the kernel mapped %llu bytes as THP "
			 "(shmem_enabled forces it)",
			 (unsigned long long)huge);
	} else if (seg->pages == SSEG_PAGES_THP && huge > 0 && huge < seg->mapped_size) {
		snprintf(seg->pages_reason, sizeof(seg->pages_reason),
			 "THP: only %llu of %llu bytes on 2 MiB pages (memory fragmented?)",
			 (unsigned long long)huge, (unsigned long long)seg->mapped_size);
	}
}

int sseg_place(struct sseg *seg)
{
	uint64_t nodes = 0;
	int rc;

	switch (seg->opts.numa) {
	case SSEG_NUMA_NONE:
		return 0;
	case SSEG_NUMA_NODE:
		return sseg_os_numa_bind(seg->base, seg->mapped_size, seg->opts.numa_node);
	case SSEG_NUMA_INTERLEAVE:
		rc = sseg_os_numa_nodes(&nodes);
		return rc ? rc : sseg_os_numa_interleave(seg->base, seg->mapped_size, nodes);
	case SSEG_NUMA_DEVICE_LOCAL:
		return sseg_err(-EOPNOTSUPP,
				"numa=device-local needs a backend with devices; the %s backend has "
				"none",
				sseg_backend_name(seg->backend));
	}
	return sseg_err(-EINVAL, "numa=%d is not a placement", (int)seg->opts.numa);
}

/* With an interrupt check, population goes in steps this large (rounded
 * to the page size) and asks between them. */
#define POPULATE_STEP (256ull << 20)

static int populate_steps(struct sseg *seg, uint64_t offset, uint64_t len, int threads)
{
	uint64_t step = seg->opts.interrupt ? POPULATE_STEP : len, done = 0;
	int rc = 0;

	if (step < seg->page_size)
		step = seg->page_size;
	while (!rc && done < len) {
		uint64_t n = len - done < step ? len - done : step;

		rc = sseg_os_populate(seg->base, offset + done, n, seg->page_size, threads,
				      !seg->readonly);
		done += n;
		if (!rc && done < len && seg->opts.interrupt &&
		    seg->opts.interrupt(seg->opts.interrupt_ctx))
			rc = sseg_err(-EINTR, "interrupted while populating, %llu of %llu bytes done",
				      (unsigned long long)done, (unsigned long long)len);
	}
	return rc;
}

int sseg_populate_range(struct sseg *seg, uint64_t offset, uint64_t len, int threads)
{
	double t0 = sseg_now();
	int rc;

	if (threads <= 0) {
		threads = sseg_os_cpu_count();
		if (threads > 4)
			threads = 4;
	}
	if (!len)
		return 0;
	rc = populate_steps(seg, offset, len, threads);
	seg->populate_s += sseg_now() - t0;
	return rc;
}

/* Slice i of n, cut at page boundaries; the last slice takes the rest. */
int sseg_populate_slice(struct sseg *seg, int slice, int nslices)
{
	uint64_t pages = seg->mapped_size / seg->page_size;
	uint64_t first = pages * (uint64_t)slice / (uint64_t)nslices;
	uint64_t last = pages * (uint64_t)(slice + 1) / (uint64_t)nslices;

	return sseg_populate_range(seg, first * seg->page_size, (last - first) * seg->page_size,
				   1);
}
