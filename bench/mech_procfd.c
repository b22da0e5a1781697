/* SPDX-License-Identifier: Apache-2.0 */
/* The closest prior shared-segment design: an unnamed memfd with
 * MADV_HUGEPAGE, the owner touching one byte per 2 MiB, peers reopening
 * /proc/<owner pid>/fd/<n>. Nothing checks that shmem_enabled lets the
 * advice work: under the kernel default the pages stay 4 KiB and only one
 * in 512 is touched. */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "case.h"
#include "group.h"
#include "kernels.h"

struct handle {
	int32_t ok;
	int32_t pid;
	int32_t fd;
};

static const char *procfd_refuses(enum sseg_pages kind)
{
	return kind == SSEG_PAGES_THP ? NULL : "the recipe asks for THP with MADV_HUGEPAGE only";
}

static int map_advised(const struct mech_ctx *c, struct mech_map *m)
{
	int rc = map_shared_anywhere(m->fd, c->bc->size, &m->map);

	if (rc)
		return mech_fail(m, "mmap", rc);
	if (madvise(m->map.base, m->map.len, MADV_HUGEPAGE))
		return mech_fail(m, "madvise(MADV_HUGEPAGE)", errno);
	return 0;
}

static int owner_create(const struct mech_ctx *c, struct mech_map *m)
{
	volatile unsigned char *p;

	m->fd = memfd_create(c->name, MFD_CLOEXEC);
	if (m->fd < 0)
		return mech_fail(m, "memfd_create", errno);
	if (ftruncate(m->fd, (off_t)c->bc->size))
		return mech_fail(m, "ftruncate", errno);
	if (map_advised(c, m))
		return -1;
	p = m->map.base;
	for (uint64_t off = 0; off < m->map.len; off += SIZE_2M)
		p[off] = 1;
	return 0;
}

static int peer_attach(const struct mech_ctx *c, struct mech_map *m, const struct handle *h)
{
	char path[64];
	double t0 = now_s();

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)h->pid, (int)h->fd);
	m->fd = open(path, O_RDWR | O_CLOEXEC);
	if (m->fd < 0)
		return mech_fail(m, path, errno);
	if (map_advised(c, m))
		return -1;
	m->attach_s = now_s() - t0;
	return 0;
}

static int procfd_open(const struct mech_ctx *c, struct mech_map *m)
{
	struct handle mine = { .ok = 1 }, all[GROUP_MAX_RANKS];
	double t0 = now_s();

	if (c->rank == 0) {
		mine.ok = !owner_create(c, m);
		mine.pid = (int32_t)getpid();
		mine.fd = m->fd;
		m->create_s = now_s() - t0;
	}
	if (sseg_local_allgather(&mine, all, sizeof(mine), c->group))
		return mech_fail(m, "the ranks' exchange", EPROTO);
	if (!all[0].ok) {
		if (c->rank)
			snprintf(m->error, sizeof(m->error), "the owner failed; see its message");
		return -1;
	}
	if (c->rank && peer_attach(c, m, &all[0]))
		return -1;
	m->base = m->map.base;
	m->len = c->bc->size;
	return 0;
}

static void procfd_close(const struct mech_ctx *c, struct mech_map *m)
{
	unmap(&m->map);
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
}

const struct mech_ops mech_procfd = {
	.name = "procfd",
	.label = "memfd-procfd",
	.shared = true,
	.attach = "open /proc/pid/fd + mmap",
	.refuses = procfd_refuses,
	.open = procfd_open,
	.close = procfd_close,
};
