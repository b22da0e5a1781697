/* What this system can do: the facts behind `sharedseg probe` and
 * sseg_supported(). */
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cuda_device.h"
#include "segment.h"

static void append(char *buf, size_t len, const char *line)
{
	size_t used = strlen(buf);

	if (used < len)
		snprintf(buf + used, len - used, "%s%s", used ? "\n" : "", line);
}

/* memfd itself is the memfd backend's own probe; HugeTLB memfds are
 * tried only where a free 2 MiB page exists to try them on. */
static void probe_memfd(struct sseg_probe *p)
{
	int fd;

	p->memfd_ok = p->sealing_ok = p->backend_ok[SSEG_BACKEND_MEMFD];
	if (!p->memfd_ok)
		append(p->advice, sizeof(p->advice),
		       "memfd_create with sealing failed: a kernel >= 3.17 is needed");
	for (int i = 0; i < p->npools; i++) {
		if (p->pools[i].page_size != SSEG_2M || p->pools[i].free == 0)
			continue;
		p->memfd_hugetlb_ok = !os_memfd_create("sharedseg-probe", SSEG_2M, SSEG_2M, &fd);
		if (p->memfd_hugetlb_ok)
			close(fd);
	}
	sseg_err_clear();
}

/* How to make the 2 MiB pool back a segment of size bytes. */
static void advise_hugetlb(struct sseg_probe *p, uint64_t size)
{
	uint64_t needed = (size + SSEG_2M - 1) / SSEG_2M, total = 0, avail = 0;
	char line[192], sz[32];

	for (int i = 0; i < p->npools; i++)
		if (p->pools[i].page_size == SSEG_2M) {
			total = p->pools[i].total;
			avail = p->pools[i].free > p->pools[i].reserved
					? p->pools[i].free - p->pools[i].reserved : 0;
		}
	if (avail >= needed)
		return;
	sseg_format_size(size, sz, sizeof(sz));
	snprintf(line, sizeof(line),
		 "for HugeTLB pages on a %s segment, %llu more 2 MiB pages are needed: "
		 "echo %llu > /proc/sys/vm/nr_hugepages",
		 sz, (unsigned long long)(needed - avail),
		 (unsigned long long)(total + needed - avail));
	append(p->advice, sizeof(p->advice), line);
}

static void probe_pages(struct sseg_probe *p, uint64_t size)
{
	struct sseg_page_choice choice;
	char reason[256];

	os_thp_shmem_knobs(p->thp_shmem_enabled, p->thp_shmem_2m_enabled);
	p->thp_shmem_usable = os_thp_shmem_usable(reason, sizeof(reason));
	if (!p->thp_shmem_usable)
		append(p->advice, sizeof(p->advice), reason);
	p->npools = os_hugetlb_pools(p->pools, SSEG_PROBE_MAX_POOLS);
	if (p->npools < 0)
		p->npools = 0;
	p->auto_size = size;
	sseg_pages_choose(SSEG_PAGES_AUTO, size, &choice);
	p->auto_pages = choice.pages;
	snprintf(p->auto_reason, sizeof(p->auto_reason), "%s", choice.reason);
	if (choice.pages != SSEG_PAGES_HUGETLB_2M && choice.pages != SSEG_PAGES_HUGETLB_1G)
		advise_hugetlb(p, size);
}

int sseg_probe(uint64_t size, struct sseg_probe *probe)
{
	struct sseg_probe p;
	struct utsname u;
	size_t n;

	if (!probe || probe->sz < offsetof(struct sseg_probe, advice))
		return sseg_err(-EINVAL, "sseg_probe needs a struct with sz set");
	memset(&p, 0, sizeof(p));
	p.sz = sizeof(p);
	if (!uname(&u))
		snprintf(p.kernel, sizeof(p.kernel), "%s", u.release);
	probe_pages(&p, size ? size : SSEG_1G);
	os_numa_nodes(&p.node_mask);
	p.nnodes = __builtin_popcountll(p.node_mask);
	for (int b = SSEG_BACKEND_MEMFD; b < SSEG_PROBE_BACKENDS; b++) {
		const struct sseg_backend_ops *ops = sseg_backend_get((enum sseg_backend)b);

		p.backend_ok[b] = !sseg_backend_probe(ops, p.backend_reason[b],
						       sizeof(p.backend_reason[b]));
	}
	probe_memfd(&p);
	p.backend_ok[SSEG_BACKEND_AUTO] = p.backend_ok[SSEG_BACKEND_MEMFD];
	sseg_cuda_probe_devices(&p);
	snprintf(p.backend_reason[SSEG_BACKEND_AUTO], sizeof(p.backend_reason[0]),
		 "picks memfd");
	sseg_err_clear();
	n = probe->sz < sizeof(p) ? probe->sz : sizeof(p);
	memcpy(probe, &p, n);
	probe->sz = n;
	return 0;
}

int sseg_supported(enum sseg_backend backend, enum sseg_pages pages)
{
	const struct sseg_backend_ops *ops = sseg_backend_get(backend);
	char why[160];
	int rc;

	if (!ops)
		return sseg_err(-EINVAL, "backend=%d is not a backend", (int)backend);
	rc = sseg_backend_probe(ops, why, sizeof(why));
	if (rc)
		return sseg_err(rc, "backend %s: %s", ops->name, why);
	switch (pages) {
	case SSEG_PAGES_AUTO:
	case SSEG_PAGES_BASE:
		return 0;
	case SSEG_PAGES_THP:
		if (!os_thp_shmem_usable(why, sizeof(why)))
			return sseg_err(-EOPNOTSUPP, "pages=thp: %s", why);
		return 0;
	case SSEG_PAGES_HUGETLB_2M:
	case SSEG_PAGES_HUGETLB_1G: {
		struct sseg_hugetlb_pool pool;
		uint64_t ps = pages == SSEG_PAGES_HUGETLB_1G ? SSEG_1G : SSEG_2M;

		if (os_hugetlb_pool(ps, &pool))
			return sseg_err(-EOPNOTSUPP, "pages=%s: the kernel has no such HugeTLB pool",
					sseg_pages_name(pages));
		if (pool.total == 0)
			return sseg_err(-EOPNOTSUPP,
					"pages=%s: the HugeTLB pool is empty; raise "
					"/sys/kernel/mm/hugepages/hugepages-%llukB/nr_hugepages",
					sseg_pages_name(pages), (unsigned long long)(ps >> 10));
		return 0;
	}
	}
	return sseg_err(-EINVAL, "pages=%d is not a page kind", (int)pages);
}
