/* Page policy: what the owner allocates, where it is placed, how it is
 * faulted in, and what was actually obtained. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "segment.h"

static int hugetlb_fits(uint64_t page_size, uint64_t size, uint64_t *avail, uint64_t *needed)
{
	struct sseg_hugetlb_pool pool;
	uint64_t rounded;

	*avail = 0;
	if (sseg_round_up(size, page_size, &rounded))
		return -EOVERFLOW;
	*needed = rounded / page_size;
	if (os_hugetlb_pool(page_size, &pool))
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
	if (os_thp_shmem_usable(thp_reason, sizeof(thp_reason))) {
		c->pages = SSEG_PAGES_THP;
		c->page_size = SSEG_2M;
		snprintf(c->reason, sizeof(c->reason),
			 "THP for shmem (HugeTLB 2 MiB pool: %llu free, %llu needed)",
			 (unsigned long long)avail2, (unsigned long long)needed);
		return;
	}
	c->pages = SSEG_PAGES_BASE;
	c->page_size = os_base_page_size();
	snprintf(c->reason, sizeof(c->reason), "base pages: %s; HugeTLB 2 MiB pool %llu free",
		 thp_reason, (unsigned long long)avail2);
}

int sseg_pages_choose(enum sseg_pages req, uint64_t size, struct sseg_page_choice *c)
{
	char reason[256];

	memset(c, 0, sizeof(*c));
	switch (req) {
	case SSEG_PAGES_AUTO:
		choose_auto(size, c);
		return 0;
	case SSEG_PAGES_BASE:
		c->pages = SSEG_PAGES_BASE;
		c->page_size = os_base_page_size();
		snprintf(c->reason, sizeof(c->reason), "base pages requested");
		return 0;
	case SSEG_PAGES_THP:
		if (!os_thp_shmem_usable(reason, sizeof(reason)))
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

void sseg_pages_verify(struct sseg *seg)
{
	uint64_t huge = 0;
	bool hugetlb = seg->pages == SSEG_PAGES_HUGETLB_2M || seg->pages == SSEG_PAGES_HUGETLB_1G;

	if (os_huge_bytes(seg->window, seg->mapped_size, &huge))
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
		return os_numa_bind(seg->window, seg->mapped_size, seg->opts.numa_node);
	case SSEG_NUMA_INTERLEAVE:
		rc = os_numa_nodes(&nodes);
		return rc ? rc : os_numa_interleave(seg->window, seg->mapped_size, nodes);
	case SSEG_NUMA_DEVICE_LOCAL:
		return sseg_err(-EOPNOTSUPP,
				"numa=device-local needs a GPU backend; the %s backend has no device",
				seg->ops->name);
	}
	return sseg_err(-EINVAL, "numa=%d is not a placement", (int)seg->opts.numa);
}

int sseg_populate_range(struct sseg *seg, uint64_t offset, uint64_t len, int threads)
{
	double t0 = sseg_now();
	int rc;

	if (threads <= 0) {
		threads = os_cpu_count();
		if (threads > 4)
			threads = 4;
	}
	if (!len)
		return 0;
	rc = os_populate((char *)seg->window + offset, len, seg->page_size, threads,
			 !seg->readonly);
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
