/* SPDX-License-Identifier: Apache-2.0 */
/* The backend table, and the wrappers that give every missing op a safe
 * answer: -EOPNOTSUPP naming the backend and the op, or the neutral
 * default an optional op documents. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/table.h"

#define ENTRY(kind, ops) [kind] = &ops,
static const struct sseg_backend_ops *const table[] = { SSEG_BACKEND_TABLE(ENTRY) };
#undef ENTRY

/* Each backend's environment, told to sseg_env before anything reads it
 * (the core names none of it). */
__attribute__((constructor)) static void declare_env(void)
{
	for (size_t k = 0; k < ARRAY_SIZE(table); k++)
		if (table[k])
			sseg_env_declare(table[k]->renamed_env);
}

const struct sseg_backend_ops *sseg_backend_get(enum sseg_backend backend)
{
	if (backend == SSEG_BACKEND_AUTO)
		backend = SSEG_BACKEND_MEMFD;
	if ((unsigned)backend >= ARRAY_SIZE(table))
		return NULL;
	return table[backend];
}

const struct sseg_backend_ops *sseg_backend_nth(int i)
{
	for (size_t k = 0; k < ARRAY_SIZE(table); k++)
		if (table[k] && i-- == 0)
			return table[k];
	return NULL;
}

static int hostreg_usable(const struct sseg_backend_ops *ops, char *why, size_t len)
{
	if (!ops->hostreg) {
		snprintf(why, len, "the %s backend has no host-registration driver", ops->name);
		return -EOPNOTSUPP;
	}
	return ops->hostreg->usable(why, len);
}

const struct sseg_backend_ops *sseg_backend_for_hostreg(enum sseg_backend kind)
{
	char why[SSEG_ERR_MAX - 96], all[SSEG_ERR_MAX - 64] = "";
	size_t used = 0;

	if (kind != SSEG_BACKEND_AUTO) {
		const struct sseg_backend_ops *ops = sseg_backend_get(kind);

		if (ops && !hostreg_usable(ops, why, sizeof(why)))
			return ops;
		sseg_err(-EOPNOTSUPP, "needs the %s driver: %s", ops ? ops->name : "given",
			 ops ? why : "no such backend");
		return NULL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
		if (!table[i] || !table[i]->hostreg)
			continue;
		if (!hostreg_usable(table[i], why, sizeof(why)))
			return table[i];
		if (used < sizeof(all))
			used += (size_t)snprintf(all + used, sizeof(all) - used, "%s%s: %s",
						 used ? "; " : "", table[i]->name, why);
	}
	sseg_err(-EOPNOTSUPP, "needs a device driver that can pin host memory, and none is "
		 "usable here (%s)", all);
	return NULL;
}

static int unsupported(const struct sseg *seg, const char *op)
{
	return sseg_err(-EOPNOTSUPP, "the %s backend does not support %s", seg->ops->name, op);
}

int sseg_backend_probe(const struct sseg_backend_ops *ops, struct sseg_probe_backend *facts)
{
	struct sseg_probe_backend f;
	size_t n = facts->sz < sizeof(f) ? facts->sz : sizeof(f);
	int rc;

	memset(&f, 0, sizeof(f));
	f.sz = sizeof(f);
	f.backend = ops->kind;
	snprintf(f.name, sizeof(f.name), "%s", ops->name);
	f.pinned = (ops->caps & SSEG_CAP_PINNED) != 0;
	f.crosses_hosts = 0;
	f.host_register = -1;
	if (ops->probe) {
		rc = ops->probe(&f);
	} else {
		snprintf(f.reason, sizeof(f.reason), "available");
		rc = 0;
	}
	f.available = rc == 0;
	if (!f.reason[0])
		snprintf(f.reason, sizeof(f.reason), "%s", f.available ? "available"
									: "not available");
	memcpy(facts, &f, n);
	facts->sz = n;
	return rc;
}

int sseg_backend_probe_device(const struct sseg_backend_ops *ops, int index,
			      struct sseg_probe_device *facts)
{
	struct sseg_probe_device d;
	size_t n = facts->sz < sizeof(d) ? facts->sz : sizeof(d);
	int rc;

	if (!ops->probe_device)
		return sseg_err(-EOPNOTSUPP, "the %s backend has no devices", ops->name);
	memset(&d, 0, sizeof(d));
	d.sz = sizeof(d);
	d.ordinal = index;
	d.host_numa_id = -1;
	rc = ops->probe_device(index, &d);
	if (rc)
		return rc;
	memcpy(facts, &d, n);
	facts->sz = n;
	return 0;
}

int sseg_backend_choose_pages(const struct sseg_backend_ops *ops, enum sseg_pages req,
			      uint64_t size, struct sseg_page_choice *choice)
{
	if (!ops->choose_pages)
		return sseg_err(-EOPNOTSUPP, "the %s backend does not choose page kinds",
				ops->name);
	return ops->choose_pages(req, size, choice);
}

int sseg_backend_check_opts(const struct sseg_backend_ops *ops, const struct sseg_opts *opts)
{
	return ops->check_opts ? ops->check_opts(opts) : 0;
}

int sseg_backend_create_owner(struct sseg *seg)
{
	return seg->ops->create_owner ? seg->ops->create_owner(seg)
				      : unsupported(seg, "allocating as owner");
}

int sseg_backend_reserve(struct sseg *seg)
{
	return seg->ops->reserve ? seg->ops->reserve(seg) : unsupported(seg, "peers");
}

int sseg_backend_export(struct sseg *seg, struct sseg_blob_handle *handle)
{
	return seg->ops->export_handle ? seg->ops->export_handle(seg, handle)
				       : unsupported(seg, "exporting a handle");
}

int sseg_backend_peer_handle(struct sseg *seg, struct sseg_blob_handle *handle)
{
	return seg->ops->peer_handle ? seg->ops->peer_handle(seg, handle) : 0;
}

int sseg_backend_serve(struct sseg *seg, const struct sseg_blob *blobs)
{
	return seg->ops->serve ? seg->ops->serve(seg, blobs) : unsupported(seg, "serving peers");
}

int sseg_backend_import(struct sseg *seg, const struct sseg_blob *blobs)
{
	return seg->ops->import_and_map ? seg->ops->import_and_map(seg, blobs)
					: unsupported(seg, "importing a handle");
}

void sseg_backend_settle(struct sseg *seg)
{
	if (seg->ops->settle)
		seg->ops->settle(seg);
}

void sseg_backend_describe(const struct sseg *seg, struct sseg_info *info)
{
	if (seg->ops->describe)
		seg->ops->describe(seg, info);
}

void sseg_backend_forget_in_child(struct sseg *seg)
{
	if (seg->ops && seg->ops->forget_in_child && (seg->held & SSEG_HELD_BACKEND))
		seg->ops->forget_in_child(seg);
}

int sseg_backend_resident(const struct sseg *seg, uint64_t *bytes)
{
	if (!seg->ops->resident) {
		*bytes = seg->mapped_size;
		return 0;
	}
	return seg->ops->resident(seg, bytes);
}

int sseg_backend_release(struct sseg *seg)
{
	if (!(seg->held & SSEG_HELD_BACKEND))
		return 0;
	return seg->ops->release ? seg->ops->release(seg) : unsupported(seg, "release");
}
