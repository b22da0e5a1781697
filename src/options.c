/* SPDX-License-Identifier: Apache-2.0 */
/* Validation of the caller's options into the segment's own copy. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "keeper_wire.h"
#include "layout.h"
#include "options.h"
#include "segment_types.h"

/* Bytes of the first release's struct sseg_opts: callers built against it
 * keep working when the struct grows. */
#define OPTS_MIN_SZ (offsetof(struct sseg_opts, layout) + sizeof(void *))

static int check_size_field(const struct sseg_opts *o)
{
	const uint8_t *tail = (const uint8_t *)o + sizeof(*o);

	if (o->sz < OPTS_MIN_SZ)
		return sseg_err(-EINVAL,
				"opts.sz is %zu, at least %zu expected: declare options with SSEG_OPTS()",
				o->sz, (size_t)OPTS_MIN_SZ);
	for (size_t i = 0; o->sz > sizeof(*o) && i < o->sz - sizeof(*o); i++)
		if (tail[i])
			return sseg_err(-E2BIG,
					"opts has %zu bytes, this library knows %zu, and the extra "
					"fields are set: it was built against a newer sharedseg",
					o->sz, sizeof(*o));
	return 0;
}

static int check_group(const struct sseg_opts *o)
{
	size_t n = o->name ? strlen(o->name) : 0;

	if (n == 0 || n > SSEG_NAME_MAX)
		return sseg_err(-EINVAL, "name must be 1 to %u bytes, got %zu", SSEG_NAME_MAX, n);
	if (o->world_size < 1 || o->world_size > 65536)
		return sseg_err(-EINVAL, "world_size=%d: must be 1 to 65536", o->world_size);
	if (o->rank < 0 || o->rank >= o->world_size)
		return sseg_err(-EINVAL, "rank=%d is outside 0..%d", o->rank, o->world_size - 1);
	if (o->owner_rank < 0 || o->owner_rank >= o->world_size)
		return sseg_err(-EINVAL, "owner_rank=%d is outside 0..%d", o->owner_rank,
				o->world_size - 1);
	if (o->timeout_ms < 0)
		return sseg_err(-EINVAL, "timeout_ms=%d is negative", o->timeout_ms);
	return 0;
}

static int check_policy(const struct sseg_opts *o)
{
	if (!sseg_backend_get(o->backend))
		return sseg_err(-EINVAL, "backend=%d is not a backend", (int)o->backend);
	if ((unsigned)o->pages > SSEG_PAGES_HUGETLB_1G)
		return sseg_err(-EINVAL, "pages=%d is not a page kind", (int)o->pages);
	if ((unsigned)o->numa > SSEG_NUMA_DEVICE_LOCAL)
		return sseg_err(-EINVAL, "numa=%d is not a placement", (int)o->numa);
	if (o->numa == SSEG_NUMA_NODE && (o->numa_node < 0 || o->numa_node > 63))
		return sseg_err(-EINVAL, "numa_node=%d is outside 0..63", o->numa_node);
	if ((unsigned)o->populate > SSEG_POPULATE_BACKGROUND)
		return sseg_err(-EINVAL, "populate=%d is not a population mode", (int)o->populate);
	if (o->populate_threads < 0 || o->populate_threads > 256)
		return sseg_err(-EINVAL, "populate_threads=%d is outside 0..256",
				o->populate_threads);
	if (o->flags & ~(SSEG_F_READONLY_PEERS | SSEG_F_HOST_REGISTER))
		return sseg_err(-EINVAL, "flags=0x%x has unknown bits", o->flags);
	if ((o->flags & SSEG_F_HOST_REGISTER) && (sseg_backend_get(o->backend)->caps & SSEG_CAP_PINNED))
		return sseg_err(-EINVAL,
				"SSEG_F_HOST_REGISTER is for memfd segments: %s-backend memory is "
				"pinned already",
				sseg_backend_get(o->backend)->name);
	if (!sseg_backend_get(o->device_backend))
		return sseg_err(-EINVAL, "device_backend=%d is not a backend", (int)o->device_backend);
	if (o->device < 0)
		return sseg_err(-EINVAL, "device=%d is negative", o->device);
	if (o->register_chunk && o->register_chunk < (2u << 20))
		return sseg_err(-EINVAL, "register_chunk=%llu is below 2 MiB",
				(unsigned long long)o->register_chunk);
	return 0;
}

static int check_keeper(const struct sseg_opts *o)
{
	int rc;

	if (!o->keeper)
		return 0;
	rc = sseg_keep_check_name(o->keeper);
	if (rc)
		return rc;
	if (!(sseg_backend_get(o->backend)->caps & SSEG_CAP_KEEPABLE))
		return sseg_err(-EOPNOTSUPP,
				"keeper '%s': a keeper holds memfd segments, not %s-backend memory",
				o->keeper, sseg_backend_get(o->backend)->name);
	if (o->flags & SSEG_F_READONLY_PEERS)
		return sseg_err(-EINVAL,
				"keeper '%s' with SSEG_F_READONLY_PEERS: that seal forbids the next "
				"owner's writable mapping of the kept memory",
				o->keeper);
	return 0;
}

static int check_size(const struct sseg_opts *o, uint64_t *size)
{
	uint64_t layout_size = o->layout ? sseg_layout_size(o->layout) : 0;

	*size = o->size ? o->size : layout_size;
	if (*size == 0)
		return sseg_err(-EINVAL, "size is 0 and no layout gives one");
	if (o->size && o->size < layout_size)
		return sseg_err(-EINVAL, "size=%llu is smaller than the layout's %llu bytes",
				(unsigned long long)o->size, (unsigned long long)layout_size);
	if (*size > (1ull << 46))
		return sseg_err(-EINVAL, "size=%llu is past the 64 TiB this library maps",
				(unsigned long long)*size);
	return 0;
}

/* Everything judged on the segment's own copy: a caller built against an
 * older, shorter struct gets zeros for the fields it does not have. */
static int check_all(struct sseg *seg)
{
	const struct sseg_opts *o = &seg->opts;
	int rc = check_group(o);

	if (!rc)
		rc = check_policy(o);
	if (!rc)
		rc = check_keeper(o);
	if (!rc)
		rc = check_size(o, &seg->size);
	if (rc)
		return rc;
	seg->ops = sseg_backend_get(o->backend);
	return sseg_backend_check_opts(seg->ops, o);
}

int sseg_opts_load(struct sseg *seg, const struct sseg_opts *o)
{
	int rc;

	if (!o)
		return sseg_err(-EINVAL, "opts is NULL");
	rc = check_size_field(o);
	if (rc)
		return rc;
	memset(&seg->opts, 0, sizeof(seg->opts));
	memcpy(&seg->opts, o, o->sz < sizeof(*o) ? o->sz : sizeof(*o));
	seg->opts.sz = sizeof(seg->opts);
	rc = check_all(seg);
	if (rc)
		return rc;
	snprintf(seg->name, sizeof(seg->name), "%s", o->name);
	seg->opts.name = seg->name;
	if (seg->opts.keeper) {
		snprintf(seg->keeper, sizeof(seg->keeper), "%s", seg->opts.keeper);
		seg->opts.keeper = seg->keeper;
	}
	if (o->layout) {
		seg->layout = sseg_layout_copy(o->layout);
		if (!seg->layout)
			return sseg_err(-ENOMEM, "out of memory copying the layout");
	}
	seg->opts.layout = seg->layout;
	seg->backend = seg->ops->kind;
	seg->is_owner = o->rank == o->owner_rank;
	seg->readonly = !seg->is_owner && (o->flags & SSEG_F_READONLY_PEERS);
	return 0;
}

void sseg_decl_of(const struct sseg *seg, struct sseg_decl *d)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", seg->name);
	d->layout = seg->layout ? sseg_layout_hash(seg->layout) : 0;
	d->size = seg->size;
	d->pages = (uint64_t)seg->opts.pages;
	d->backend = (uint64_t)seg->backend;
	d->flags = seg->opts.flags;
	d->populate = (uint64_t)seg->opts.populate;
	d->world_size = (uint64_t)seg->opts.world_size;
	d->owner_rank = (uint64_t)seg->opts.owner_rank;
	d->numa = (uint64_t)seg->opts.numa;
	d->numa_node = seg->opts.numa == SSEG_NUMA_NODE ? (uint64_t)seg->opts.numa_node : 0;
}
