/* One vtable per backend. A NULL op answers -EOPNOTSUPP through the
 * sseg_backend_* wrappers; no caller ever calls an op directly. */
#ifndef SSEG_BACKEND_H
#define SSEG_BACKEND_H

#include "segment.h"

struct sseg_backend_ops {
	const char *name;
	/* 0 when usable on this system; else -errno and the reason. */
	int (*probe)(char *why, size_t len);
	/* Owner, in create: allocate, map, place and populate; sets page_size,
	 * pages and mapped_size. */
	int (*create_owner)(struct sseg *seg);
	/* Peer, in create: reserve an address window for the mapping. */
	int (*reserve)(struct sseg *seg);
	/* Owner, in create: fill the handle section of its blob. */
	int (*export_handle)(struct sseg *seg, struct sseg_blob_handle *handle);
	/* Owner, in complete: hand the pages to the local peers. */
	int (*serve)(struct sseg *seg, const struct sseg_blob *blobs);
	/* Peer, in complete: import the owner's pages and map them. */
	int (*import_and_map)(struct sseg *seg, const struct sseg_blob *blobs);
	/* Backend-private stages (SSEG_HELD_BACKEND); resumable. */
	int (*release)(struct sseg *seg);
};

SSEG_HIDDEN const struct sseg_backend_ops *sseg_backend_get(enum sseg_backend backend);
SSEG_HIDDEN extern const struct sseg_backend_ops sseg_memfd_ops;

SSEG_HIDDEN int sseg_backend_probe(const struct sseg_backend_ops *ops, char *why, size_t len);
SSEG_HIDDEN int sseg_backend_create_owner(struct sseg *seg);
SSEG_HIDDEN int sseg_backend_reserve(struct sseg *seg);
SSEG_HIDDEN int sseg_backend_export(struct sseg *seg, struct sseg_blob_handle *handle);
SSEG_HIDDEN int sseg_backend_serve(struct sseg *seg, const struct sseg_blob *blobs);
SSEG_HIDDEN int sseg_backend_import(struct sseg *seg, const struct sseg_blob *blobs);
SSEG_HIDDEN int sseg_backend_release(struct sseg *seg);

#endif
