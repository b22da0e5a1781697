/* SPDX-License-Identifier: Apache-2.0 */
/* vLLM's shared offload region: a named file in /dev/shm that one rank
 * creates with O_EXCL; every rank maps it and populates its own slice
 * with MADV_POPULATE_WRITE. vLLM keeps the name until it closes, so it
 * outlives a SIGKILLed group; the bench unlinks it as soon as every rank
 * has it open (the memory and the mappings are the same), and its parent
 * unlinks it after every repetition (named_in), so that a bench stopped by
 * a signal or a lost rank leaves nothing in /dev/shm. */
#define _GNU_SOURCE /* O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "case.h"
#include "kernels.h"

static const char *devshm_refuses(enum sseg_pages kind)
{
	if (kind == SSEG_PAGES_BASE || kind == SSEG_PAGES_THP)
		return NULL;
	return "a named file in /dev/shm (tmpfs) cannot hold HugeTLB pages";
}

static int create_file(const struct mech_ctx *c, struct mech_map *m)
{
	m->fd = open(m->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (m->fd < 0)
		return mech_fail(m, m->path, errno);
	mech_hold(c, "named");
	if (ftruncate(m->fd, (off_t)pages_round(c->bc->pages, c->bc->size)))
		return mech_fail(m, "ftruncate", errno);
	return 0;
}

/* Every rank opens the file; once all have, rank 0 unlinks its name. */
static int open_then_unlink(const struct mech_ctx *c, struct mech_map *m)
{
	double t0 = now_s();
	int ok = 1;

	if (c->rank && (m->fd = open(m->path, O_RDWR | O_CLOEXEC)) < 0)
		ok = !mech_fail(m, m->path, errno);
	m->attach_s = now_s() - t0;
	if (!mech_step(c, m, ok))
		return -1;
	if (c->rank == 0 && unlink(m->path))
		return mech_fail(m, m->path, errno);
	m->path[0] = '\0';
	return 0;
}

/* [start, end) of this rank's slice, on page boundaries */
static void slice(const struct mech_ctx *c, uint64_t len, uint64_t *start, uint64_t *end)
{
	uint64_t page = pages_size(c->bc->pages), pages = len / page;
	uint64_t n = (uint64_t)c->bc->ranks, r = (uint64_t)c->rank;

	*start = pages * r / n * page;
	*end = pages * (r + 1) / n * page;
}

static int map_and_populate(const struct mech_ctx *c, struct mech_map *m)
{
	uint64_t start, end;
	double t0 = now_s();
	int rc = map_shared_fd(c->bc->pages, m->fd, c->bc->size, &m->map);

	if (rc)
		return mech_fail(m, "mmap", rc);
	m->attach_s += now_s() - t0;
	slice(c, m->map.len, &start, &end);
	rc = populate_write((char *)m->map.base + start, end - start);
	return rc ? mech_fail(m, "MADV_POPULATE_WRITE of this rank's slice", rc) : 0;
}

static int devshm_open(const struct mech_ctx *c, struct mech_map *m)
{
	double t0 = now_s();
	int ok = 1;

	mech_named_path(c->bc->mech, c->name, m->path, sizeof(m->path));
	if (c->rank == 0)
		ok = !create_file(c, m);
	if (!mech_step(c, m, ok))
		return -1;
	if (open_then_unlink(c, m) || map_and_populate(c, m))
		return -1;
	m->create_s = now_s() - t0;
	m->base = m->map.base;
	m->len = c->bc->size;
	mech_hold(c, "unlinked");
	return 0;
}

static void devshm_close(const struct mech_ctx *c, struct mech_map *m)
{
	unmap(&m->map);
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	/* a failure before every rank opened it */
	if (c->rank == 0 && m->path[0])
		unlink(m->path);
}

const struct mech_ops mech_devshm = {
	.name = "devshm",
	.label = "devshm-file",
	.shared = true,
	.attach = "open + mmap",
	.named_in = "/dev/shm",
	.refuses = devshm_refuses,
	.open = devshm_open,
	.close = devshm_close,
};
