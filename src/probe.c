/* SPDX-License-Identifier: Apache-2.0 */
/* What this system can do: the facts behind `sharedseg probe` and
 * sseg_check_support(). */
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "backend/backend.h"
#include "os/hugepage.h"
#include "os/memfd.h"
#include "os/memory.h"
#include "os/numa.h"
#include "pages.h"

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

	p->memfd_ok = p->sealing_ok = !sseg_os_memfd_create("sseg:probe", 4096, 0, &fd);
	if (p->memfd_ok)
		close(fd);
	if (!p->memfd_ok)
		append(p->advice, sizeof(p->advice),
		       "memfd_create with sealing failed: a kernel >= 3.17 is needed");
	for (int i = 0; i < p->npools; i++) {
		if (p->pools[i].page_size != SSEG_2M || p->pools[i].free == 0)
			continue;
		p->memfd_hugetlb_ok = !sseg_os_memfd_create("sseg:probe", SSEG_2M, SSEG_2M, &fd);
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

	sseg_os_thp_shmem_knobs(p->thp_shmem_enabled, p->thp_shmem_2m_enabled);
	p->thp_shmem_usable = sseg_os_thp_shmem_usable(reason, sizeof(reason));
	if (!p->thp_shmem_usable)
		append(p->advice, sizeof(p->advice), reason);
	p->npools = sseg_os_hugetlb_pools(p->pools, SSEG_PROBE_MAX_POOLS);
	if (p->npools < 0)
		p->npools = 0;
	p->auto_size = size;
	sseg_pages_choose(SSEG_PAGES_AUTO, size, &choice);
	p->auto_pages = choice.pages;
	snprintf(p->auto_reason, sizeof(p->auto_reason), "%s", choice.reason);
	if (choice.pages != SSEG_PAGES_HUGETLB_2M && choice.pages != SSEG_PAGES_HUGETLB_1G)
		advise_hugetlb(p, size);
}

static void probe_memory(struct sseg_probe *p)
{
	struct sseg_os_memory m;

	if (sseg_os_memory(&m))
		return;
	p->mem_available = m.available;
	p->cgroup_limit = m.cgroup_limit;
	p->cgroup_usage = m.cgroup_usage;
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
	sseg_os_numa_nodes(&p.node_mask);
	p.nnodes = __builtin_popcountll(p.node_mask);
	probe_memfd(&p);
	probe_memory(&p);
	sseg_err_clear();
	n = probe->sz < sizeof(p) ? probe->sz : sizeof(p);
	memcpy(probe, &p, n);
	probe->sz = n;
	return 0;
}

int sseg_probe_backend(enum sseg_backend backend, struct sseg_probe_backend *facts)
{
	struct sseg_probe_backend f = { .sz = sizeof(f) };
	const struct sseg_backend_ops *ops;
	size_t n;

	if (backend == SSEG_BACKEND_AUTO || !(ops = sseg_backend_get(backend)))
		return sseg_err(-ENOENT, "backend=%d is not a backend", (int)backend);
	if (!facts || facts->sz < offsetof(struct sseg_probe_backend, driver))
		return sseg_err(-EINVAL, "sseg_probe_backend needs a struct with sz set");
	sseg_backend_probe(ops, &f);
	/* One owner serves other hosts where a device's fabric handle works:
	 * a real create and export, so asked here, not on every create. */
	for (int d = 0; (ops->caps & SSEG_CAP_FABRIC) && f.available && d < f.ndevices; d++) {
		struct sseg_probe_device dev = { .sz = sizeof(dev) };

		if (!sseg_backend_probe_device(ops, d, &dev) && dev.fabric_works > 0)
			f.crosses_hosts = 1;
	}
	n = facts->sz < sizeof(f) ? facts->sz : sizeof(f);
	memcpy(facts, &f, n);
	facts->sz = n;
	sseg_err_clear();
	return 0;
}

int sseg_probe_device(enum sseg_backend backend, int index, struct sseg_probe_device *facts)
{
	const struct sseg_backend_ops *ops = sseg_backend_get(backend);

	if (!ops)
		return sseg_err(-ENOENT, "backend=%d is not a backend", (int)backend);
	if (!facts || facts->sz < offsetof(struct sseg_probe_device, uuid))
		return sseg_err(-EINVAL, "sseg_probe_device needs a struct with sz set");
	return sseg_backend_probe_device(ops, index, facts);
}

int sseg_check_support(enum sseg_backend backend, enum sseg_pages pages)
{
	return sseg_check_support_size(backend, pages, 0);
}

int sseg_check_support_size(enum sseg_backend backend, enum sseg_pages pages, uint64_t size)
{
	const struct sseg_backend_ops *ops = sseg_backend_get(backend);
	struct sseg_probe_backend facts = { .sz = sizeof(facts) };
	struct sseg_page_choice choice;
	int rc;

	if (!ops)
		return sseg_err(-EINVAL, "backend=%d is not a backend", (int)backend);
	if ((unsigned)pages > SSEG_PAGES_HUGETLB_1G)
		return sseg_err(-EINVAL, "pages=%d is not a page kind", (int)pages);
	rc = sseg_backend_probe(ops, &facts);
	if (rc)
		return sseg_err(rc, "backend %s: %s", ops->name, facts.reason);
	/* The same decision as the owner's create. */
	return sseg_backend_choose_pages(ops, pages, size, &choice);
}

int sseg_supported(enum sseg_backend backend, enum sseg_pages pages)
{
	return sseg_check_support(backend, pages);
}
