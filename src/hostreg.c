/* Host registration (SSEG_F_HOST_REGISTER): each rank pins its own mapping
 * for device DMA through a backend's host-registration driver, in chunks,
 * because one CUDA registration of 512 GiB or more fails on current drivers;
 * chunks are cut between layout entries so that no copy of an entry
 * straddles two registrations, and on page boundaries where the layout
 * allows (some sandboxes refuse addresses that are not page-aligned). */
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "hostreg.h"
#include "layout.h"
#include "object.h"

#define DEFAULT_CHUNK (64ull << 30)

struct sseg_hostreg {
	const struct sseg_hostreg_ops *ops;
	const char *driver;  /* the backend's name, for messages */
	void *dev;           /* the driver's state for opts.device; NULL when closed */
	int nchunks;
	int registered;      /* chunks [0, registered) are registered */
	uint64_t *cuts;      /* nchunks + 1 offsets */
	uint64_t device_addr;
};

static const struct sseg_backend_ops *driver_for(const struct sseg *seg)
{
	return sseg_backend_for_hostreg(seg->opts.device_backend);
}

int sseg_hostreg_check(const struct sseg *seg)
{
	return driver_for(seg) ? 0 : sseg_err_wrap(-EOPNOTSUPP, "SSEG_F_HOST_REGISTER");
}

static int add_cut(struct sseg_hostreg *reg, uint64_t at, size_t *cap)
{
	if ((size_t)reg->nchunks + 2 > *cap) {
		size_t n = *cap ? *cap * 2 : 16;
		uint64_t *cuts = realloc(reg->cuts, n * sizeof(*cuts));

		if (!cuts)
			return sseg_err(-ENOMEM, "out of memory");
		reg->cuts = cuts;
		*cap = n;
	}
	reg->cuts[reg->nchunks++] = at;
	return 0;
}

/* Where the chunk that starts at `at` ends: at most chunk bytes on, moved
 * back to a page boundary and then to the start of any entry it would cut
 * (an entry whole matters more than an aligned cut). */
static uint64_t chunk_end(const struct sseg *seg, uint64_t at, uint64_t chunk)
{
	uint64_t end = at + chunk < seg->mapped_size ? at + chunk : seg->mapped_size;
	uint64_t aligned = end & ~(seg->page_size - 1);

	if (end == seg->mapped_size)
		return end;
	if (aligned > at)
		end = aligned;
	if (seg->layout && end < sseg_layout_size(seg->layout))
		end = sseg_layout_cut_before(seg->layout, end);
	return end;
}

static int plan_chunks(struct sseg *seg, uint64_t chunk, struct sseg_hostreg *reg)
{
	uint64_t at = 0;
	size_t cap = 0;
	int rc;

	while (at < seg->mapped_size) {
		uint64_t end = chunk_end(seg, at, chunk);

		if (end <= at)
			return sseg_err(-EINVAL,
					"a layout entry at offset %llu is larger than the registration "
					"chunk of %llu bytes: raise register_chunk",
					(unsigned long long)at, (unsigned long long)chunk);
		rc = add_cut(reg, at, &cap);
		if (rc)
			return rc;
		at = end;
	}
	reg->cuts[reg->nchunks] = seg->mapped_size; /* add_cut left room for it */
	return 0;
}

static int register_chunk(struct sseg *seg, struct sseg_hostreg *reg)
{
	uint64_t lo = reg->cuts[reg->registered], hi = reg->cuts[reg->registered + 1];
	void *addr = (char *)seg->base + lo;
	uint64_t daddr = 0;
	int rc;

	rc = reg->ops->register_range(reg->dev, addr, hi - lo, seg->readonly);
	if (rc)
		return sseg_err_wrap(rc, "%s host registration of chunk %d of %d (%llu bytes at "
				     "offset %llu)", reg->driver, reg->registered + 1, reg->nchunks,
				     (unsigned long long)(hi - lo), (unsigned long long)lo);
	reg->registered++;
	if (!reg->ops->device_pointer)
		return 0;
	rc = reg->ops->device_pointer(reg->dev, addr, &daddr);
	if (rc)
		return rc;
	/* One device address for the whole segment, or none: a caller adds
	 * offsets to device_addr. */
	if (lo == 0)
		reg->device_addr = daddr;
	else if (daddr != reg->device_addr + lo)
		return sseg_err(-EIO,
				"%s host registration: chunk %d maps to device address 0x%llx, not "
				"0x%llx (the first chunk's plus its offset): the segment has no single "
				"device view",
				reg->driver, reg->registered, (unsigned long long)daddr,
				(unsigned long long)(reg->device_addr + lo));
	return 0;
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
	rc = plan_chunks(seg, chunk, reg);
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
