/* SPDX-License-Identifier: Apache-2.0 */
/* Host registration (SSEG_F_HOST_REGISTER): each rank pins its own mapping
 * for device DMA through a backend's host-registration driver, in chunks,
 * because a single registration of 512 GiB or more fails on current GPU
 * drivers.
 * Chunks are cut between layout entries so that no copy of an entry
 * straddles two registrations, and on page boundaries wherever the layout
 * has one within reach (gVisor refuses registrations that do not start on
 * a page). A chunk the driver refuses as an invalid value (what it answers
 * when it cannot pin that much just now) is halved once and the rest
 * registered in the smaller chunks. Every chunk's device address is
 * checked: the segment has one device view or none. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/backend.h"
#include "hostreg.h"
#include "layout.h"
#include "segment_types.h"

#define DEFAULT_CHUNK (64ull << 30)

struct sseg_hostreg {
	const struct sseg_hostreg_ops *ops;
	const char *driver;  /* the backend's name, for messages */
	void *dev;           /* the driver's state for opts.device; NULL when closed */
	int nchunks;
	int registered;      /* chunks [0, registered) are registered */
	uint64_t *cuts;      /* nchunks + 1 offsets */
	size_t cap;          /* room in cuts */
	bool halved;         /* the chunk was halved once already */
	uint64_t device_addr;
};

/* Candidate cuts tried when looking back for a page-aligned one. */
#define ALIGNED_CUT_TRIES 65536

static const struct sseg_backend_ops *driver_for(const struct sseg *seg)
{
	return sseg_backend_for_hostreg(seg->opts.device_backend);
}

int sseg_hostreg_check(const struct sseg *seg)
{
	return driver_for(seg) ? 0 : sseg_err_wrap(-EOPNOTSUPP, "SSEG_F_HOST_REGISTER");
}

static int add_cut(struct sseg_hostreg *reg, uint64_t at)
{
	if ((size_t)reg->nchunks + 2 > reg->cap) {
		size_t n = reg->cap ? reg->cap * 2 : 16;
		uint64_t *cuts = realloc(reg->cuts, n * sizeof(*cuts));

		if (!cuts)
			return sseg_err(-ENOMEM, "out of memory");
		reg->cuts = cuts;
		reg->cap = n;
	}
	reg->cuts[reg->nchunks++] = at;
	return 0;
}

static uint64_t base_page(void)
{
	long page = sysconf(_SC_PAGESIZE);

	return page > 0 ? (uint64_t)page : 4096;
}

/* The highest page-aligned offset in (at, from] that no entry straddles,
 * or 0: from (aligned) back, each step to the page boundary at or below
 * the start of the entry the candidate falls in. */
static uint64_t aligned_cut(const struct sseg_layout *l, uint64_t at, uint64_t from,
			    uint64_t page)
{
	uint64_t x = from;

	for (int tries = 0; tries < ALIGNED_CUT_TRIES && x > at; tries++) {
		uint64_t cut = sseg_layout_cut_before(l, x);

		if (cut == x)
			return x;
		x = cut & ~(page - 1);
	}
	return 0;
}

/* Where the chunk that starts at `at` ends: at most chunk bytes on, on a
 * page boundary no entry straddles where there is one, else at the start
 * of the entry the limit falls in (an entry whole matters more than an
 * aligned cut). */
static uint64_t chunk_end(const struct sseg *seg, uint64_t at, uint64_t chunk)
{
	uint64_t page = base_page();
	uint64_t end = chunk < seg->mapped_size - at ? at + chunk : seg->mapped_size;
	uint64_t aligned = end & ~(page - 1), cut;

	if (end == seg->mapped_size)
		return end;
	if (!seg->layout || aligned >= sseg_layout_size(seg->layout))
		return aligned > at ? aligned : end;
	cut = aligned_cut(seg->layout, at, aligned, page);
	return cut ? cut : sseg_layout_cut_before(seg->layout, end);
}

/* Cuts from offset at to the end, after the chunks already planned. */
static int plan_from(struct sseg *seg, struct sseg_hostreg *reg, uint64_t at, uint64_t chunk)
{
	int rc;

	while (at < seg->mapped_size) {
		uint64_t end = chunk_end(seg, at, chunk);

		if (end <= at)
			return sseg_err(-EINVAL,
					"a layout entry at offset %llu is larger than the registration "
					"chunk of %llu bytes: raise register_chunk",
					(unsigned long long)at, (unsigned long long)chunk);
		rc = add_cut(reg, at);
		if (rc)
			return rc;
		at = end;
	}
	reg->cuts[reg->nchunks] = seg->mapped_size; /* add_cut left room for it */
	return 0;
}

/* The driver refused chunk `registered` as an invalid value: the rest is
 * planned again in chunks of half its size, once. */
static int halve(struct sseg *seg, struct sseg_hostreg *reg)
{
	uint64_t lo = reg->cuts[reg->registered], len = reg->cuts[reg->registered + 1] - lo;

	sseg_log(SSEG_LOG_WARN,
		 "segment '%s': %s host registration of %llu bytes at offset %llu refused (%s): "
		 "registering the rest in chunks of %llu bytes",
		 seg->name, reg->driver, (unsigned long long)len, (unsigned long long)lo,
		 sseg_last_error(), (unsigned long long)(len / 2));
	reg->halved = true;
	reg->nchunks = reg->registered;
	return plan_from(seg, reg, lo, len / 2);
}

/* One device address for the whole segment, or none: a caller adds
 * offsets to device_addr. */
static int check_device_view(struct sseg *seg, struct sseg_hostreg *reg, void *addr, uint64_t lo)
{
	uint64_t daddr = 0;
	int rc;

	if (!reg->ops->device_pointer)
		return 0;
	rc = reg->ops->device_pointer(reg->dev, addr, &daddr);
	if (rc)
		return rc;
	if (lo == 0)
		reg->device_addr = daddr;
	else if (daddr != reg->device_addr + lo)
		return sseg_err(-EIO,
				"%s host registration: chunk %d maps to device address 0x%llx, not "
				"0x%llx (the first chunk's plus its offset): the segment has no single "
				"device view (the driver places each registration on its own; a "
				"register_chunk that covers the segment makes one chunk)",
				reg->driver, reg->registered, (unsigned long long)daddr,
				(unsigned long long)(reg->device_addr + lo));
	return 0;
}

static int register_chunk(struct sseg *seg, struct sseg_hostreg *reg)
{
	uint64_t lo = reg->cuts[reg->registered], hi = reg->cuts[reg->registered + 1];
	void *addr = (char *)seg->base + lo;
	int rc;

	rc = reg->ops->register_range(reg->dev, addr, hi - lo, seg->readonly);
	if (rc == -EINVAL && !reg->halved && hi - lo > base_page())
		return halve(seg, reg);
	if (rc)
		return sseg_err_wrap(rc, "%s host registration of chunk %d of %d (%llu bytes at "
				     "offset %llu%s)", reg->driver, reg->registered + 1, reg->nchunks,
				     (unsigned long long)(hi - lo), (unsigned long long)lo,
				     reg->halved ? ", the chunk halved once already" : "");
	reg->registered++;
	return check_device_view(seg, reg, addr, lo);
}

static int register_all(struct sseg *seg, struct sseg_hostreg *reg)
{
	void *saved = NULL;
	int rc;

	rc = reg->ops->enter(reg->dev, &saved);
	if (rc)
		return rc;
	while (!rc && reg->registered < reg->nchunks)
		rc = register_chunk(seg, reg);
	reg->ops->leave(reg->dev, saved);
	return rc;
}

int sseg_hostreg_register(struct sseg *seg)
{
	uint64_t chunk = seg->opts.register_chunk ? seg->opts.register_chunk : DEFAULT_CHUNK;
	const struct sseg_backend_ops *driver = driver_for(seg);
	struct sseg_hostreg *reg;
	int rc;

	if (!driver)
		return sseg_err_wrap(-EOPNOTSUPP, "SSEG_F_HOST_REGISTER");
	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return sseg_err(-ENOMEM, "out of memory");
	reg->ops = driver->hostreg;
	reg->driver = driver->name;
	seg->hostreg = reg;
	seg->held |= SSEG_HELD_HOSTREG;
	rc = plan_from(seg, reg, 0, chunk);
	if (!rc)
		rc = reg->ops->open(seg->opts.device, &reg->dev);
	return rc ? rc : register_all(seg, reg);
}

/* Last to first; a failure leaves the rest for the next call. In-flight
 * copies are waited for first: unregistering under a DMA corrupts it. */
static int unregister_all(struct sseg *seg, struct sseg_hostreg *reg)
{
	void *saved = NULL;
	int rc;

	rc = reg->ops->enter(reg->dev, &saved);
	if (rc)
		return rc;
	if (reg->ops->quiesce)
		rc = reg->ops->quiesce(reg->dev);
	while (!rc && reg->registered > 0) {
		void *p = (char *)seg->base + reg->cuts[reg->registered - 1];

		rc = reg->ops->unregister_range(reg->dev, p);
		if (!rc)
			reg->registered--;
	}
	reg->ops->leave(reg->dev, saved);
	return rc;
}

/* Resumable: unregisters the remaining chunks, then closes the device.
 * Destroy may run on another thread than register did: enter makes the
 * device's context current there. */
int sseg_hostreg_release(struct sseg *seg)
{
	struct sseg_hostreg *reg = seg->hostreg;
	int rc;

	if (!(seg->held & SSEG_HELD_HOSTREG))
		return 0;
	if (reg->dev && reg->registered > 0) {
		rc = unregister_all(seg, reg);
		if (rc)
			return rc;
	}
	if (reg->dev) {
		rc = reg->ops->close(reg->dev);
		if (rc)
			return rc;
		reg->dev = NULL;
	}
	free(reg->cuts);
	free(reg);
	seg->hostreg = NULL;
	seg->held &= ~SSEG_HELD_HOSTREG;
	return 0;
}

uint64_t sseg_hostreg_device_addr(const struct sseg *seg)
{
	return seg->hostreg ? seg->hostreg->device_addr : 0;
}

int sseg_hostreg_chunks(const struct sseg *seg)
{
	return seg->hostreg ? seg->hostreg->registered : 0;
}
