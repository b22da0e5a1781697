/* SPDX-License-Identifier: Apache-2.0 */
/* The backend contract. A backend is one struct sseg_backend_ops and the
 * files behind it (src/backend/NAME/, src/driver/NAME.c); the core never
 * asks which backend it has, never includes a driver header and never calls
 * a backend by name. Whatever differs between backends is an op or a
 * capability bit here. A NULL op answers through the sseg_backend_*
 * wrappers (-EOPNOTSUPP, or a documented neutral default); nothing calls an
 * op directly. See docs/backends.md. */
#ifndef SSEG_BACKEND_H
#define SSEG_BACKEND_H

#include "blob.h"
#include "pages.h"
#include "segment_types.h"

struct sseg_vmm_driver;

/* Capability bits. */
enum sseg_backend_caps {
	SSEG_CAP_PINNED = 1u << 0,     /* its memory is pinned for device DMA by construction */
	SSEG_CAP_DEVICES = 1u << 1,    /* it has devices: opts.device, numa=device-local */
	SSEG_CAP_FABRIC = 1u << 2,     /* it may export fabric handles (cross-host) */
	SSEG_CAP_TAGGED = 1u << 3,     /* /proc names its mappings and it tags each rank's
					* itself; otherwise the core adds a tag page (tag.c) */
	SSEG_CAP_KEEPABLE = 1u << 4,   /* a keeper can hold its memory (opts.keeper) */
};

/* Host registration of a memfd segment for a device's DMA, implemented by
 * a backend whose driver can pin host memory. dev is the driver's state for
 * one device, made by open and freed by close. */
struct sseg_hostreg_ops {
	/* 0 when the driver is present; else -errno and why. */
	int (*usable)(char *why, size_t len);
	/* Validates the ordinal, takes what registration needs on it. */
	int (*open)(int device, void **dev);
	/* Makes dev's context current for this thread; leave restores the
	 * caller's own (a framework's context is never left changed). */
	int (*enter)(void *dev, void **saved);
	void (*leave)(void *dev, void *saved);
	/* -EINVAL only for a range the driver refused as an invalid value
	 * (what it answers when it cannot pin that much at once): the core
	 * halves the chunk once and retries. */
	int (*register_range)(void *dev, void *addr, uint64_t len, bool readonly);
	int (*unregister_range)(void *dev, void *addr);
	int (*device_pointer)(void *dev, void *addr, uint64_t *device_addr);
	/* Waits for the device's work that may still read or write the pages
	 * (before unregistering under an in-flight copy). Optional. */
	int (*quiesce)(void *dev);
	/* Releases what open took; resumable (0 once nothing is held). */
	int (*close)(void *dev);
};

struct sseg_backend_ops {
	enum sseg_backend kind;
	const char *name;
	uint32_t caps;                          /* enum sseg_backend_caps */
	const struct sseg_hostreg_ops *hostreg; /* NULL: cannot pin memfd segments */
	/* A VMM backend's driver table (backend/vmm.h), which its sseg_vmm_*
	 * ops read; NULL for any other backend. */
	const struct sseg_vmm_driver *vmm;
	/* The SHAREDSEG_ variables it and its driver read that releases up to
	 * 0.2 spelled SSEG_<name> (the names after the prefix, NULL-ended):
	 * that spelling is still read, with one warning (sseg_env). NULL:
	 * none. */
	const char *const *renamed_env;

	/* ---- facts (sseg_probe_backend, sseg_probe_device, sseg_check_support) ---- */
	/* Fills facts; 0 when the backend can create segments here, else
	 * -errno with facts->reason saying why not. */
	int (*probe)(struct sseg_probe_backend *facts);
	int (*probe_device)(int index, struct sseg_probe_device *facts);
	/* The one decision on page kinds: what pages=req gets for size bytes
	 * (size 0: the smallest segment), or why it cannot. supported() and
	 * the owner's create both ask it. */
	int (*choose_pages)(enum sseg_pages req, uint64_t size, struct sseg_page_choice *choice);
	/* Options only this backend judges, on every rank in create. */
	int (*check_opts)(const struct sseg_opts *opts);

	/* ---- create (phase 1) ---- */
	/* Owner: allocate, map, place and populate; sets base, pages,
	 * page_size and mapped_size. Takes SSEG_HELD_BACKEND first. */
	int (*create_owner)(struct sseg *seg);
	/* Peer: prepare to map (an address window, a driver context). */
	int (*reserve)(struct sseg *seg);
	/* Owner: the handle section of its blob. */
	int (*export_handle)(struct sseg *seg, struct sseg_blob_handle *handle);
	/* Peer: what the owner needs to know of it before it may import (a
	 * driver's name for this process, for a trust list), in handle->data;
	 * the kind stays SSEG_HANDLE_NONE. The owner's admit sees it in the
	 * peer's blob. Optional. */
	int (*peer_handle)(struct sseg *seg, struct sseg_blob_handle *handle);

	/* ---- complete (phase 3) ---- */
	/* Owner: hand the pages to the local peers (the fd channel). */
	int (*serve)(struct sseg *seg, const struct sseg_blob *blobs);
	/* Peer: import the owner's pages and map them. */
	int (*import_and_map)(struct sseg *seg, const struct sseg_blob *blobs);
	/* Every rank, once mapped: measure what was obtained (page kind,
	 * NUMA nodes). Optional. */
	void (*settle)(struct sseg *seg);

	/* ---- while alive ---- */
	/* sseg_info's backend part: device address, handle type, huge bytes
	 * measured now. Optional. */
	void (*describe)(const struct sseg *seg, struct sseg_info *info);
	/* In a child after fork(): close the descriptors the backend holds
	 * (no driver call). Optional. */
	void (*forget_in_child)(struct sseg *seg);
	/* Bytes of the segment's pages resident now, whoever faulted them.
	 * Optional: without it, every page is (device memory, allocated in
	 * create). */
	int (*resident)(const struct sseg *seg, uint64_t *bytes);

	/* ---- destroy ---- */
	/* Releases SSEG_HELD_BACKEND stage by stage; resumable. */
	int (*release)(struct sseg *seg);
};

/* The backend table: by enum value; NULL for a number that is no backend.
 * AUTO resolves to memfd. */
SSEG_HIDDEN const struct sseg_backend_ops *sseg_backend_get(enum sseg_backend backend);
/* The i-th backend of the table (from 0), NULL past the last: how the
 * core lists backends without naming one. */
SSEG_HIDDEN const struct sseg_backend_ops *sseg_backend_nth(int i);
/* The backend for host registration: kind if it has a host-registration
 * driver, or for AUTO the first in the table whose driver is usable.
 * NULL with the sentence set when there is none. */
SSEG_HIDDEN const struct sseg_backend_ops *sseg_backend_for_hostreg(enum sseg_backend kind);

SSEG_HIDDEN int sseg_backend_probe(const struct sseg_backend_ops *ops,
				   struct sseg_probe_backend *facts);
SSEG_HIDDEN int sseg_backend_probe_device(const struct sseg_backend_ops *ops, int index,
					  struct sseg_probe_device *facts);
SSEG_HIDDEN int sseg_backend_choose_pages(const struct sseg_backend_ops *ops,
					  enum sseg_pages req, uint64_t size,
					  struct sseg_page_choice *choice);
SSEG_HIDDEN int sseg_backend_check_opts(const struct sseg_backend_ops *ops,
					const struct sseg_opts *opts);
SSEG_HIDDEN int sseg_backend_create_owner(struct sseg *seg);
SSEG_HIDDEN int sseg_backend_reserve(struct sseg *seg);
SSEG_HIDDEN int sseg_backend_export(struct sseg *seg, struct sseg_blob_handle *handle);
SSEG_HIDDEN int sseg_backend_peer_handle(struct sseg *seg, struct sseg_blob_handle *handle);
SSEG_HIDDEN int sseg_backend_serve(struct sseg *seg, const struct sseg_blob *blobs);
SSEG_HIDDEN int sseg_backend_import(struct sseg *seg, const struct sseg_blob *blobs);
SSEG_HIDDEN void sseg_backend_settle(struct sseg *seg);
SSEG_HIDDEN void sseg_backend_describe(const struct sseg *seg, struct sseg_info *info);
SSEG_HIDDEN void sseg_backend_forget_in_child(struct sseg *seg);
SSEG_HIDDEN int sseg_backend_resident(const struct sseg *seg, uint64_t *bytes);
SSEG_HIDDEN int sseg_backend_release(struct sseg *seg);

#endif
