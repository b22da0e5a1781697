/* SPDX-License-Identifier: Apache-2.0 */
/* The VMM skeleton (vmm.h): the steps every VMM backend takes, in one
 * order, around its driver's calls. Every driver resource is a stage
 * marked held once taken and released in reverse order, each marked
 * released only after its call succeeded; a handle is released at most
 * once. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/vmm.h"
#include "fdchannel.h"
#include "registry.h"

static struct sseg_vmm *vmm_of(const struct sseg *seg)
{
	return seg->backend_state;
}

int sseg_vmm_enter(struct sseg_vmm *v, void **saved)
{
	return v->drv->enter(v, saved);
}

void sseg_vmm_leave(struct sseg_vmm *v, void *saved)
{
	v->drv->leave(v, saved);
}

/* Takes the backend state and the rank's device; each op makes the
 * device's context current for its driver calls and puts the caller's
 * back. */
static int vmm_open(struct sseg *seg)
{
	const struct sseg_vmm_driver *drv = seg->ops->vmm;
	struct sseg_vmm *v = calloc(1, drv->state_size);
	int rc;

	if (!v)
		return sseg_err(-ENOMEM, "out of memory");
	v->drv = drv;
	v->export_fd = -1;
	seg->backend_state = v;
	seg->held |= SSEG_HELD_BACKEND;
	rc = drv->open(seg, v);
	if (rc)
		return rc;
	v->held |= SSEG_VMM_HELD_DEVICE;
	return 0;
}

/* Reserve, map and grant access: the steps owner and peers share. */
static int map_handle(struct sseg *seg, struct sseg_vmm *v)
{
	int rc = v->drv->reserve(seg, v);

	if (rc)
		return rc;
	v->held |= SSEG_VMM_HELD_RESERVED;
	rc = v->drv->map(seg, v);
	if (rc)
		return rc;
	v->held |= SSEG_VMM_HELD_MAPPED;
	rc = v->drv->grant(seg, v);
	if (rc)
		return rc;
	seg->base = (void *)(uintptr_t)v->addr;
	return 0;
}

/* Allocate, reserve, map, grant, export: one attempt. */
static int attempt(struct sseg *seg, struct sseg_vmm *v)
{
	int fd = -1;
	int rc = v->drv->allocate(seg, v);

	if (rc)
		return rc;
	v->held |= SSEG_VMM_HELD_HANDLE;
	rc = map_handle(seg, v);
	if (!rc)
		rc = v->drv->export_owner(seg, v, &fd);
	if (fd >= 0) {
		v->export_fd = fd;
		v->held |= SSEG_VMM_HELD_FD;
	}
	return rc;
}

static int release_memory(struct sseg *seg, struct sseg_vmm *v);

/* Again another way where the driver has one, once what the failed attempt
 * took is released (a failed release ends it: the stages left are the
 * segment's, for destroy). */
static int allocate(struct sseg *seg, struct sseg_vmm *v)
{
	int rc = attempt(seg, v);

	while (rc && v->drv->allocate_again && v->drv->allocate_again(seg, v)) {
		rc = release_memory(seg, v);
		if (rc)
			return rc;
		seg->base = NULL;
		rc = attempt(seg, v);
	}
	/* The channel is the barrier for other hosts' peers too: the owner
	 * must not release its handle before its own host's peers imported. */
	return rc ? rc : sseg_channel_listen(seg);
}

int sseg_vmm_create_owner(struct sseg *seg)
{
	struct sseg_vmm *v;
	void *saved;
	int rc = vmm_open(seg);

	if (rc)
		return rc;
	v = vmm_of(seg);
	rc = sseg_vmm_enter(v, &saved);
	if (rc)
		return rc;
	rc = allocate(seg, v);
	sseg_vmm_leave(v, saved);
	return rc;
}

int sseg_vmm_reserve(struct sseg *seg)
{
	return vmm_open(seg);
}

int sseg_vmm_export(struct sseg *seg, struct sseg_blob_handle *h)
{
	struct sseg_vmm *v = vmm_of(seg);

	h->kind = SSEG_HANDLE_FD_CHANNEL;
	sseg_channel_describe(seg, h);
	return v->drv->describe_handle(seg, v, h);
}

/* The exported fd, closed once: after serving, at release, in a child. */
static void close_export(struct sseg_vmm *v)
{
	if (!(v->held & SSEG_VMM_HELD_FD))
		return;
	close(v->export_fd);
	v->export_fd = -1;
	v->held &= ~SSEG_VMM_HELD_FD;
}

int sseg_vmm_serve(struct sseg *seg, const struct sseg_blob *blobs)
{
	struct sseg_vmm *v = vmm_of(seg);
	bool has_fd = v->held & SSEG_VMM_HELD_FD;
	int rc;

	rc = sseg_channel_hand_over(seg, blobs, has_fd ? v->export_fd : -1,
				    v->fabric ? NULL : v->drv->admit);
	if (!rc)
		close_export(v);
	return rc;
}

static int import_handle(struct sseg *seg, const struct sseg_blob *owner, int fd)
{
	struct sseg_vmm *v = vmm_of(seg);
	void *saved;
	int rc = sseg_vmm_enter(v, &saved);

	if (rc)
		return rc;
	rc = v->drv->import(seg, v, owner, fd);
	if (!rc) {
		v->held |= SSEG_VMM_HELD_HANDLE;
		seg->mapped_size = owner->handle.mapped_size;
		seg->page_size = owner->handle.page_size;
		seg->pages = (enum sseg_pages)owner->handle.pages;
		rc = map_handle(seg, v);
	}
	sseg_vmm_leave(v, saved);
	return rc;
}

/* The fd the owner sent over the channel, imported and closed. */
static int import_fd(struct sseg *seg, const struct sseg_blob *owner, int fd)
{
	int rc = fd >= 0 ? import_handle(seg, owner, fd)
			 : sseg_err(-EPROTO, "owner rank %u sent no fd", owner->rank);

	if (fd >= 0)
		close(fd);
	return rc;
}

int sseg_vmm_import(struct sseg *seg, const struct sseg_blob *blobs)
{
	const struct sseg_blob *owner = &blobs[seg->opts.owner_rank];
	bool fd_pages = vmm_of(seg)->drv->fd_pages;
	int fd = -1, sock, rc;

	/* Another host's owner (verification let only a fabric handle here):
	 * the caller's own barrier keeps the owner alive meanwhile. */
	if (!sseg_blob_same_host(owner, &blobs[seg->opts.rank]))
		return import_handle(seg, owner, -1);
	/* Reach the owner first, so that any failure below reaches it as an
	 * ack instead of a silent wait for its timeout; it answers only after
	 * it admitted this rank. */
	rc = sseg_channel_fetch(seg, owner, fd_pages ? &fd : NULL, &sock);
	if (rc)
		return rc;
	rc = fd_pages ? import_fd(seg, owner, fd) : import_handle(seg, owner, -1);
	if (sseg_channel_ack(seg, sock, rc) && !rc)
		sseg_log(SSEG_LOG_WARN, "segment '%s': could not confirm the import to owner rank %u",
			 seg->name, owner->rank);
	return rc;
}

void sseg_vmm_describe(const struct sseg *seg, struct sseg_info *info)
{
	const struct sseg_vmm *v = vmm_of(seg);
	bool mapped = v && (v->held & SSEG_VMM_HELD_MAPPED);

	info->device = seg->opts.device;
	info->pinned = 1;
	info->pages_verified = mapped;
	if (!v)
		return;
	info->device_addr = mapped ? v->addr : 0;
	snprintf(info->handle_type, sizeof(info->handle_type), "%s",
		 v->fabric ? v->drv->fabric_type : v->drv->local_type);
}

/* The driver's handles, mappings and device stay the parent's (drivers do
 * not work in a forked child): a child closes the exported fd and lets go
 * of the rest without a driver call, so that its destroy makes none
 * either. Whatever the child finds at the address is the driver's doing:
 * a driver may not copy its mappings into a child at all (don't-fork). */
void sseg_vmm_forget_in_child(struct sseg *seg)
{
	struct sseg_vmm *v = vmm_of(seg);

	if (!v)
		return;
	close_export(v);
	v->held = 0;
}

/* One stage: marked released only after the call succeeded. */
static int release_stage(struct sseg_vmm *v, uint32_t stage, int (*call)(struct sseg_vmm *))
{
	int rc;

	if (!(v->held & stage))
		return 0;
	rc = call(v);
	if (!rc)
		v->held &= ~stage;
	return rc;
}

/* At most once per handle: marked consumed before the call. A failure is
 * returned and counted (sseg_abandoned_handles), and the next destroy goes
 * on with the stages after it: the handle's state is unknown, so it is
 * never released again. */
static int release_handle(struct sseg *seg, struct sseg_vmm *v)
{
	int rc;

	if (!(v->held & SSEG_VMM_HELD_HANDLE))
		return 0;
	v->held &= ~SSEG_VMM_HELD_HANDLE;
	rc = v->drv->release_handle(v);
	if (rc) {
		sseg_registry_abandoned();
		sseg_log(SSEG_LOG_ERROR,
			 "segment '%s': %s; the handle is not released again (its state is unknown)",
			 seg->name, sseg_last_error());
		return sseg_err_wrap(rc, "segment '%s': %s was abandoned", seg->name,
				     v->drv->handle_noun);
	}
	return 0;
}

/* Unmap first; then the range and the handle in the driver's order. */
static int release_memory(struct sseg *seg, struct sseg_vmm *v)
{
	bool handle_first = v->drv->handle_before_address;
	int rc = release_stage(v, SSEG_VMM_HELD_MAPPED, v->drv->unmap);

	if (!rc && handle_first)
		rc = release_handle(seg, v);
	if (!rc)
		rc = release_stage(v, SSEG_VMM_HELD_RESERVED, v->drv->free_address);
	if (!rc && !handle_first)
		rc = release_handle(seg, v);
	if (!rc)
		close_export(v);
	return rc;
}

/* Destroy may run on another thread than create: the device's context is
 * made current here, and the caller's again before the device goes. */
int sseg_vmm_release(struct sseg *seg)
{
	struct sseg_vmm *v = vmm_of(seg);
	void *saved;
	int rc;

	if (!v)
		return 0; /* open failed before taking anything */
	if (v->held & ~SSEG_VMM_HELD_DEVICE) {
		rc = sseg_vmm_enter(v, &saved);
		if (rc)
			return rc;
		rc = release_memory(seg, v);
		sseg_vmm_leave(v, saved);
		if (rc)
			return rc;
	}
	if (v->held & SSEG_VMM_HELD_DEVICE) {
		rc = v->drv->close(seg, v);
		if (rc)
			return rc;
		v->held &= ~SSEG_VMM_HELD_DEVICE;
	}
	free(v);
	seg->backend_state = NULL;
	seg->base = NULL;
	seg->held &= ~SSEG_HELD_BACKEND;
	return 0;
}
