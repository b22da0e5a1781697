/* Backend selection and the wrappers that give every missing op a safe
 * -EOPNOTSUPP answer. */
#include <stdio.h>

#include "backend/backend.h"
#include "backend/cuda_device.h"

static int unsupported(const struct sseg *seg, const char *op)
{
	return sseg_err(-EOPNOTSUPP, "the %s backend does not support %s",
			seg->ops ? seg->ops->name : "selected", op);
}

static int probe_unbuilt(char *why, size_t len)
{
	snprintf(why, len, "not available: this build of sharedseg has no driver for it yet");
	return -EOPNOTSUPP;
}

static const struct sseg_backend_ops ascend_ops = { .name = "ascend", .probe = probe_unbuilt };

const struct sseg_backend_ops *sseg_backend_get(enum sseg_backend backend)
{
	switch (backend) {
	case SSEG_BACKEND_AUTO:
	case SSEG_BACKEND_MEMFD:
		return &sseg_memfd_ops;
	case SSEG_BACKEND_CUDA:
		return &sseg_cuda_ops;
	case SSEG_BACKEND_ASCEND:
		return &ascend_ops;
	}
	return NULL;
}

int sseg_backend_probe(const struct sseg_backend_ops *ops, char *why, size_t len)
{
	if (!ops->probe) {
		snprintf(why, len, "available");
		return 0;
	}
	return ops->probe(why, len);
}

int sseg_backend_create_owner(struct sseg *seg)
{
	return seg->ops->create_owner ? seg->ops->create_owner(seg)
				      : unsupported(seg, "allocating as owner");
}

int sseg_backend_reserve(struct sseg *seg)
{
	return seg->ops->reserve ? seg->ops->reserve(seg) : unsupported(seg, "peer windows");
}

int sseg_backend_export(struct sseg *seg, struct sseg_blob_handle *handle)
{
	return seg->ops->export_handle ? seg->ops->export_handle(seg, handle)
				       : unsupported(seg, "exporting a handle");
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

int sseg_backend_release(struct sseg *seg)
{
	if (!(seg->held & SSEG_HELD_BACKEND))
		return 0;
	return seg->ops->release ? seg->ops->release(seg) : unsupported(seg, "release");
}
