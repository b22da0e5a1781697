/* SPDX-License-Identifier: Apache-2.0 */
/* The skeleton of a device backend whose segment is VMM host memory: one
 * physical allocation, exported by the owner, imported by the peers,
 * reserved, mapped and granted on every rank. vmm.c owns the steps and the
 * held stages (release in reverse order, a handle released at most once
 * and counted when abandoned), the device's context around driver calls,
 * and the fd channel around an import. A driver fills struct
 * sseg_vmm_driver with its calls; its ops table points .vmm at it and
 * takes the sseg_vmm_* ops below. See docs/backends.md. */
#ifndef SSEG_BACKEND_VMM_H
#define SSEG_BACKEND_VMM_H

#include <sys/types.h>

#include "backend/backend.h"

/* The stages a segment holds, each released once the call succeeded. */
enum sseg_vmm_stage {
	SSEG_VMM_HELD_DEVICE = 1u << 0,   /* the device (a context reference) */
	SSEG_VMM_HELD_HANDLE = 1u << 1,   /* the physical allocation's handle */
	SSEG_VMM_HELD_RESERVED = 1u << 2, /* the address range */
	SSEG_VMM_HELD_MAPPED = 1u << 3,   /* the handle mapped into the range */
	SSEG_VMM_HELD_FD = 1u << 4,       /* owner: the exported fd, until served */
};

/* The skeleton's part of a backend's state, its first member. */
struct sseg_vmm {
	const struct sseg_vmm_driver *drv;
	uint32_t held;  /* enum sseg_vmm_stage */
	void *ctx;      /* the device's context, current around driver calls */
	uint64_t addr;  /* the reserved range, device and host address at once */
	int export_fd;  /* with SSEG_VMM_HELD_FD */
	bool fabric;    /* owner: its blob carries a fabric handle; peer: imported one */
};

/* A driver's calls. Each returns 0 or -errno with the sentence set, and
 * runs with the device's context current unless it says otherwise; v is
 * the state's first member (cast it to the driver's own). */
struct sseg_vmm_driver {
	size_t state_size;       /* the driver's state, struct sseg_vmm first */
	const char *local_type;  /* sseg_info.handle_type: served over the fd channel */
	const char *fabric_type; /* ... imported from the owner's fabric handle */
	const char *handle_noun; /* "the driver handle", in the abandoned message */
	bool fd_pages;           /* the fd channel carries the pages as an fd */
	bool handle_before_address; /* release order: free the handle, then the range */

	/* Takes the device (no context current yet): sets v->ctx. */
	int (*open)(struct sseg *seg, struct sseg_vmm *v);
	int (*enter)(struct sseg_vmm *v, void **saved);
	void (*leave)(struct sseg_vmm *v, void *saved);
	/* Owner: places, sizes (mapped_size, page_size, pages, pages_reason)
	 * and allocates the handle; decides v->fabric. */
	int (*allocate)(struct sseg *seg, struct sseg_vmm *v);
	/* Owner, once mapped: what peers import by; *fd for the fd channel
	 * when fd_pages (else left -1). */
	int (*export_owner)(struct sseg *seg, struct sseg_vmm *v, int *fd);
	/* Owner, optional: an attempt from allocate to export failed (the
	 * sentence says where); whether allocate has another way to try
	 * (other pages), the driver logging why. The skeleton then releases
	 * what the attempt took, each stage once, and starts again. */
	bool (*allocate_again)(struct sseg *seg, struct sseg_vmm *v);
	/* Owner: the driver's data in its blob's handle section (the kind is
	 * SSEG_HANDLE_FD_CHANNEL unless it sets another). No context. */
	int (*describe_handle)(struct sseg *seg, struct sseg_vmm *v, struct sseg_blob_handle *h);
	/* Peer: the handle from the owner's blob, or from fd (-1: none). */
	int (*import)(struct sseg *seg, struct sseg_vmm *v, const struct sseg_blob *owner, int fd);
	/* Owner: let this local peer import (a trust list), before it is
	 * answered; not called for a fabric segment. Optional. */
	int (*admit)(struct sseg *seg, const struct sseg_blob *peer, pid_t pid);
	/* Every rank: the address range (v->addr), the mapping, the access. */
	int (*reserve)(struct sseg *seg, struct sseg_vmm *v);
	int (*map)(struct sseg *seg, struct sseg_vmm *v);
	int (*grant)(struct sseg *seg, struct sseg_vmm *v);
	/* Release, one stage each. */
	int (*unmap)(struct sseg_vmm *v);
	int (*free_address)(struct sseg_vmm *v);
	int (*release_handle)(struct sseg_vmm *v);
	/* Lets go of the device, after the caller's context is back. */
	int (*close)(struct sseg *seg, struct sseg_vmm *v);
};

/* The device's context current for this thread, the caller's put back. */
SSEG_HIDDEN int sseg_vmm_enter(struct sseg_vmm *v, void **saved);
SSEG_HIDDEN void sseg_vmm_leave(struct sseg_vmm *v, void *saved);

/* The sseg_backend_ops of a VMM backend, and the initializers that fill
 * them in its ops table (after .vmm = &its driver table). */
#define SSEG_VMM_OPS                                                              \
	.create_owner = sseg_vmm_create_owner, .reserve = sseg_vmm_reserve,        \
	.export_handle = sseg_vmm_export, .serve = sseg_vmm_serve,                 \
	.import_and_map = sseg_vmm_import, .describe = sseg_vmm_describe,          \
	.forget_in_child = sseg_vmm_forget_in_child, .release = sseg_vmm_release

SSEG_HIDDEN int sseg_vmm_create_owner(struct sseg *seg);
SSEG_HIDDEN int sseg_vmm_reserve(struct sseg *seg);
SSEG_HIDDEN int sseg_vmm_export(struct sseg *seg, struct sseg_blob_handle *h);
SSEG_HIDDEN int sseg_vmm_serve(struct sseg *seg, const struct sseg_blob *blobs);
SSEG_HIDDEN int sseg_vmm_import(struct sseg *seg, const struct sseg_blob *blobs);
SSEG_HIDDEN void sseg_vmm_describe(const struct sseg *seg, struct sseg_info *info);
SSEG_HIDDEN void sseg_vmm_forget_in_child(struct sseg *seg);
SSEG_HIDDEN int sseg_vmm_release(struct sseg *seg);

#endif
