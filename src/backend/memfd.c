/* SPDX-License-Identifier: Apache-2.0 */
/* The memfd backend: the owner's pages live in a sealed, unnamed memfd that
 * the fd channel hands to the peers on its host. Its state: the memfd (the
 * owner's, until every peer has mapped) and the address window each rank
 * maps it into. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/backend.h"
#include "fdchannel.h"
#include "keeper.h"
#include "os/claim.h"
#include "os/hugepage.h"
#include "os/memfd.h"
#include "os/numa.h"
#include "os/host.h"
#include "os/populate.h"
#include "os/window.h"
#include "tag.h"

enum memfd_stage {
	MEMFD_HELD_FD = 1u << 0,
	MEMFD_HELD_WINDOW = 1u << 1,
};

struct memfd_state {
	uint32_t held;
	int fd;
	void *window;
	uint64_t window_size; /* reserved address space */
	char label[SSEG_NAME_MAX + 8];
};

static struct memfd_state *state(const struct sseg *seg)
{
	return seg->backend_state;
}

static bool is_hugetlb(uint32_t pages)
{
	return pages == SSEG_PAGES_HUGETLB_2M || pages == SSEG_PAGES_HUGETLB_1G;
}

/* An fd from another process (the owner's, a keeper's), checked before it
 * is mapped: a sealed memfd of the size and page size its sender declares. */
static int check_fd(int fd, uint32_t pages, uint64_t page_size, uint64_t mapped_size,
		    const char *whose)
{
	uint64_t fd_page_size;
	int rc;

	rc = sseg_os_memfd_check(fd, mapped_size, &fd_page_size);
	if (rc)
		return sseg_err_wrap(rc, "the fd received from %s was refused", whose);
	/* THP lives on tmpfs, whose block size stays the base page. */
	if (is_hugetlb(pages) ? fd_page_size != page_size
			      : fd_page_size != sseg_os_base_page_size())
		return sseg_err(-EPROTO, "%s says %s pages of %llu bytes but its fd has %llu-byte pages",
				whose, sseg_pages_name((enum sseg_pages)pages),
				(unsigned long long)page_size, (unsigned long long)fd_page_size);
	return 0;
}

static int memfd_probe(struct sseg_probe_backend *facts)
{
	int fd, rc;

	facts->host_register = 0;
	rc = sseg_os_memfd_create("sseg:probe", 4096, 0, &fd);
	if (rc) {
		snprintf(facts->reason, sizeof(facts->reason),
			 "memfd with sealing unavailable: %s", sseg_last_error());
		return rc;
	}
	close(fd);
	snprintf(facts->reason, sizeof(facts->reason), "available");
	return 0;
}

static int take_state(struct sseg *seg)
{
	struct memfd_state *st = calloc(1, sizeof(*st));

	if (!st)
		return sseg_err(-ENOMEM, "out of memory");
	st->fd = -1;
	seg->backend_state = st;
	seg->held |= SSEG_HELD_BACKEND;
	return 0;
}

/* Peers advise too: a page faulted through a peer's mapping (populate
 * spread or lazy) is allocated by the rules of that mapping. */
static int advise_pages(struct sseg *seg)
{
	if (seg->pages == SSEG_PAGES_THP)
		return sseg_os_madvise_hugepage(seg->base, seg->mapped_size);
	/* Keep shmem_enabled=always from turning a base request into THP. */
	if (seg->pages == SSEG_PAGES_BASE)
		madvise(seg->base, seg->mapped_size, MADV_NOHUGEPAGE);
	return 0;
}

static int choose(struct sseg *seg)
{
	struct sseg_page_choice choice;
	int rc;

	rc = sseg_pages_choose(seg->opts.pages, seg->size, &choice);
	if (rc)
		return rc;
	seg->pages = choice.pages;
	seg->page_size = choice.page_size;
	/* A segment smaller than one huge page would not have had one anyway:
	 * nothing to warn about there. */
	if (seg->opts.pages == SSEG_PAGES_AUTO && choice.pages == SSEG_PAGES_BASE)
		sseg_log(seg->size < SSEG_2M ? SSEG_LOG_INFO : SSEG_LOG_WARN,
			 "pages=auto fell back to 4 KiB pages: %s", choice.reason);
	snprintf(seg->pages_reason, sizeof(seg->pages_reason), "%s", choice.reason);
	if (sseg_round_up(seg->size, seg->page_size, &seg->mapped_size))
		return sseg_err(-EOVERFLOW, "size %llu cannot be rounded up to the page size",
				(unsigned long long)seg->size);
	/* HugeTLB pages come from the pool checked above; other pages from
	 * memory that a populated segment must fit in. */
	if (!is_hugetlb(seg->pages) && seg->opts.populate != SSEG_POPULATE_LAZY)
		return sseg_memory_fits(seg->mapped_size, "the segment");
	return 0;
}

/* Every rank's window ends in at least one page that carries the rank's
 * tag ("/memfd:sseg-tag:NAME rank=R world=W owner=O" in /proc/PID/maps):
 * how `sharedseg ls` tells who maps what. */
static int reserve_window(struct sseg *seg, struct memfd_state *st, uint64_t span,
			  uint64_t align)
{
	char tag[SSEG_TAG_MAX];
	int rc;

	st->window_size = span + sseg_os_base_page_size();
	rc = sseg_os_window_reserve(st->window_size, align, &st->window);
	if (rc)
		return rc;
	st->held |= MEMFD_HELD_WINDOW;
	seg->base = st->window;
	sseg_tag_name(seg, false, tag, sizeof(tag));
	sseg_os_window_tag((char *)st->window + span, st->window_size - span, tag);
	return 0;
}

/* A HugeTLB pool drained between the check and the allocation fails here,
 * at mmap (the pages are reserved then), not at a later first touch. */
static int map_owner(struct sseg *seg, struct memfd_state *st)
{
	uint64_t align = seg->page_size > SSEG_2M ? seg->page_size : SSEG_2M;
	int rc;

	/* 2 MiB alignment at least, so THP can map the pages with PMDs. */
	rc = reserve_window(seg, st, seg->mapped_size, align);
	if (rc)
		return rc;
	rc = sseg_os_window_map(st->window, seg->mapped_size, st->fd, false);
	if (rc == -ENOMEM && is_hugetlb(seg->pages))
		return sseg_err_wrap(rc, "pages=%s: the %s HugeTLB pool could not reserve %llu pages "
				     "(taken by another process since it was checked?)",
				     sseg_pages_name(seg->pages),
				     seg->pages == SSEG_PAGES_HUGETLB_1G ? "1 GiB" : "2 MiB",
				     (unsigned long long)(seg->mapped_size / seg->page_size));
	return rc;
}

/* Kernels before 5.14 populate by first touch, which memory running out
 * answers with a signal: the file's pages are allocated first, so that it
 * answers with an error instead. */
static int populate_owner(struct sseg *seg, struct memfd_state *st)
{
	int rc = 0;

	if (!sseg_os_populate_supported())
		rc = sseg_os_memfd_allocate(st->fd, seg->mapped_size);
	return rc ? rc : sseg_populate_range(seg, 0, seg->mapped_size, seg->opts.populate_threads);
}

/* populate=background: the kernel without MADV_POPULATE_* would populate
 * by touch, where running out of memory is a signal; the pages are
 * allocated here instead, so that it is an error of create. */
static int prepare_background(struct sseg *seg, struct memfd_state *st)
{
	if (sseg_os_populate_supported())
		return 0;
	return sseg_os_memfd_allocate(st->fd, seg->mapped_size);
}

/* What keeps a kept fd from serving this owner, in the sentence; 0 when
 * nothing does: the size and page kind declared, a sealed memfd, writable,
 * and the group's claim on it (the keeper made it; taken again, as a
 * kernel without it would have refused it there). */
static int unusable_kept(const struct sseg *seg, int fd, const struct sseg_keep_decl *got)
{
	uint64_t want;

	if (sseg_round_up(seg->size, got->page_size ? got->page_size : 1, &want) ||
	    want != got->mapped_size)
		return sseg_err(-EPROTO, "it declares %llu bytes mapped, this segment maps %llu",
				(unsigned long long)got->mapped_size, (unsigned long long)want);
	if (check_fd(fd, got->pages, got->page_size, got->mapped_size, "the keeper"))
		return -EPROTO;
	if (sseg_os_memfd_writable(fd))
		return sseg_err_wrap(-EPERM, "the fd received from the keeper was refused");
	return sseg_os_memfd_claim(fd);
}

/* The keeper's memfd of this very declaration: its pages are what the last
 * group wrote, mapped as they are (sealed already; population only maps
 * what is resident). One this owner cannot use is let go, and the keeper
 * asked to keep the new one in its place. */
static enum sseg_keep_answer take_kept(struct sseg *seg, struct memfd_state *st,
				       struct sseg_keep_talk *t)
{
	struct sseg_keep_decl got;
	enum sseg_keep_answer answer;
	int fd;

	answer = sseg_keeper_take(seg, t, &fd, &got);
	if (answer != SSEG_KEEP_ANSWER_KEPT)
		return answer;
	if (unusable_kept(seg, fd, &got)) {
		sseg_log(SSEG_LOG_WARN, "segment '%s': keeper '%s' gave memory this owner cannot use "
			 "(%s): allocated anew, and the keeper is asked to keep it instead",
			 seg->name, seg->keeper, sseg_last_error());
		snprintf(t->why, sizeof(t->why), "its owner could not use it: %s", sseg_last_error());
		t->hold_flags |= SSEG_KEEP_REPLACE;
		close(fd);
		return SSEG_KEEP_ANSWER_NEW;
	}
	st->fd = fd;
	st->held |= MEMFD_HELD_FD;
	seg->pages = (enum sseg_pages)got.pages;
	seg->page_size = got.page_size;
	seg->mapped_size = got.mapped_size;
	seg->kept = 1;
	snprintf(seg->pages_reason, sizeof(seg->pages_reason),
		 "kept by keeper '%s' since an earlier group", seg->keeper);
	return SSEG_KEEP_ANSWER_KEPT;
}

/* The new memfd left with the keeper, claimed first for this group: the
 * keeper gives it to no one else while the group maps it. */
static void keep_new(struct sseg *seg, struct memfd_state *st, struct sseg_keep_talk *t)
{
	if (sseg_os_memfd_claim(st->fd)) {
		sseg_log(SSEG_LOG_WARN, "segment '%s': %s: it is not left with keeper '%s', and is "
			 "kept by no one", seg->name, sseg_last_error(), seg->keeper);
		return;
	}
	sseg_keeper_hold(seg, t, st->fd);
}

static int populate_asked(struct sseg *seg, struct memfd_state *st)
{
	if (seg->opts.populate == SSEG_POPULATE_OWNER)
		return populate_owner(seg, st);
	if (seg->opts.populate == SSEG_POPULATE_BACKGROUND)
		return prepare_background(seg, st);
	return 0;
}

static int create_kept(struct sseg *seg, struct memfd_state *st)
{
	int rc = map_owner(seg, st);

	if (!rc)
		rc = advise_pages(seg);
	if (!rc)
		rc = populate_asked(seg, st);
	return rc ? rc : sseg_channel_listen(seg);
}

static int memfd_create_owner(struct sseg *seg)
{
	enum sseg_keep_answer kept = SSEG_KEEP_ANSWER_UNKEPT;
	struct sseg_keep_talk talk;
	struct memfd_state *st;
	int rc;

	rc = take_state(seg);
	if (rc)
		return rc;
	st = state(seg);
	if (seg->opts.keeper) {
		sseg_keeper_talk_init(seg, &talk);
		kept = take_kept(seg, st, &talk);
	}
	if (kept == SSEG_KEEP_ANSWER_KEPT)
		return create_kept(seg, st);
	rc = choose(seg);
	if (rc)
		return rc;
	snprintf(st->label, sizeof(st->label), SSEG_MEMFD_LABEL "%s", seg->name);
	rc = sseg_os_memfd_create(st->label, seg->mapped_size,
				  is_hugetlb(seg->pages) ? seg->page_size : 0, &st->fd);
	if (rc)
		return rc;
	st->held |= MEMFD_HELD_FD;
	rc = map_owner(seg, st);
	if (!rc)
		rc = sseg_os_memfd_seal(st->fd, seg->opts.flags & SSEG_F_READONLY_PEERS);
	if (!rc)
		rc = advise_pages(seg);
	if (!rc)
		rc = sseg_place(seg);
	if (!rc)
		rc = populate_asked(seg, st);
	if (!rc && kept == SSEG_KEEP_ANSWER_NEW)
		keep_new(seg, st, &talk);
	return rc ? rc : sseg_channel_listen(seg);
}

/* A peer does not know the owner's page size yet: the window is aligned and
 * sized for the largest page the owner may pick. */
static int memfd_reserve(struct sseg *seg)
{
	uint64_t align = SSEG_2M, span;
	int rc;

	rc = take_state(seg);
	if (rc)
		return rc;
	if (seg->opts.pages == SSEG_PAGES_AUTO || seg->opts.pages == SSEG_PAGES_HUGETLB_1G)
		align = SSEG_1G;
	if (sseg_round_up(seg->size, align, &span))
		return sseg_err(-EOVERFLOW, "size %llu is too large for an address window",
				(unsigned long long)seg->size);
	return reserve_window(seg, state(seg), span, align);
}

static int memfd_export(struct sseg *seg, struct sseg_blob_handle *handle)
{
	handle->kind = SSEG_HANDLE_FD_CHANNEL;
	sseg_channel_describe(seg, handle);
	return 0;
}

static void close_fd(struct memfd_state *st)
{
	if (st->held & MEMFD_HELD_FD) {
		close(st->fd);
		st->fd = -1;
		st->held &= ~MEMFD_HELD_FD;
	}
}

static bool keeps_fd(const struct sseg *seg)
{
	return seg->opts.populate == SSEG_POPULATE_BACKGROUND;
}

static int memfd_serve(struct sseg *seg, const struct sseg_blob *blobs)
{
	int rc;

	rc = sseg_channel_hand_over(seg, blobs, state(seg)->fd, NULL);
	if (rc)
		return rc;
	/* Every local peer holds a mapping now: no fd needs to stay open,
	 * except to count what background population made resident. */
	if (!keeps_fd(seg))
		close_fd(state(seg));
	return 0;
}

static int map_received(struct sseg *seg, const struct sseg_blob_handle *h, int fd)
{
	struct memfd_state *st = state(seg);
	int rc;

	rc = check_fd(fd, h->pages, h->page_size, h->mapped_size, "the owner");
	if (rc)
		return rc;
	if (h->mapped_size >= st->window_size)
		return sseg_err(-EPROTO,
				"the owner mapped %llu bytes, more than this rank's window of %llu",
				(unsigned long long)h->mapped_size,
				(unsigned long long)st->window_size);
	rc = sseg_os_window_map(st->window, h->mapped_size, fd, seg->readonly);
	if (rc)
		return rc;
	seg->mapped_size = h->mapped_size;
	seg->page_size = h->page_size;
	seg->pages = (enum sseg_pages)h->pages;
	rc = advise_pages(seg);
	/* shmem keeps the owner's policy for every mapping; hugetlbfs has none
	 * of its own, so pages a peer faults (spread, lazy) follow the peer's. */
	return rc ? rc : sseg_place(seg);
}

static int memfd_import(struct sseg *seg, const struct sseg_blob *blobs)
{
	const struct sseg_blob *owner = &blobs[seg->opts.owner_rank];
	int fd, sock, rc, ack_rc;

	rc = sseg_channel_fetch(seg, owner, &fd, &sock);
	if (rc)
		return rc;
	rc = map_received(seg, &owner->handle, fd);
	if (!rc && keeps_fd(seg)) {
		state(seg)->fd = fd;
		state(seg)->held |= MEMFD_HELD_FD;
	} else {
		close(fd);
	}
	ack_rc = sseg_channel_ack(seg, sock, rc);
	if (rc)
		return rc;
	/* The mapping holds the pages whatever became of the owner since. */
	if (ack_rc)
		sseg_log(SSEG_LOG_WARN, "segment '%s': could not confirm the mapping to owner rank %u",
			 seg->name, owner->rank);
	return 0;
}

static void memfd_settle(struct sseg *seg)
{
	sseg_pages_verify(seg);
	sseg_os_numa_where(seg->base, seg->mapped_size, seg->page_size, &seg->numa_nodes);
}

/* THP shows in smaps as it is faulted: measured now (other page kinds are
 * known since settle). */
static void memfd_describe(const struct sseg *seg, struct sseg_info *info)
{
	if (seg->completed && seg->pages == SSEG_PAGES_THP)
		sseg_os_huge_bytes(seg->base, seg->mapped_size, &info->huge_bytes);
	info->pages_verified = seg->pages_verified || info->huge_bytes > 0;
	snprintf(info->handle_type, sizeof(info->handle_type), "%s",
		 seg->opts.world_size > 1 ? "fd" : "");
	snprintf(info->memfd_name, sizeof(info->memfd_name), "/memfd:" SSEG_MEMFD_LABEL "%s",
		 seg->name);
}

/* The file's blocks where the fd is kept (shmem and hugetlbfs count every
 * page allocated, through any mapping); else the pages mincore() finds
 * under this rank's mapping. */
static int memfd_resident(const struct sseg *seg, uint64_t *bytes)
{
	const struct memfd_state *st = state(seg);

	if (st->held & MEMFD_HELD_FD)
		return sseg_os_memfd_allocated(st->fd, bytes);
	return sseg_os_resident(seg->base, seg->mapped_size, bytes);
}

static void memfd_forget_in_child(struct sseg *seg)
{
	struct memfd_state *st = state(seg);

	if (st && (st->held & MEMFD_HELD_FD)) {
		close(st->fd);
		st->held &= ~MEMFD_HELD_FD;
	}
}

static int memfd_release(struct sseg *seg)
{
	struct memfd_state *st = state(seg);
	int rc;

	close_fd(st);
	if (st->held & MEMFD_HELD_WINDOW) {
		rc = sseg_os_window_release(st->window, st->window_size);
		if (rc)
			return rc;
		st->held &= ~MEMFD_HELD_WINDOW;
	}
	free(st);
	seg->backend_state = NULL;
	seg->base = NULL;
	seg->held &= ~SSEG_HELD_BACKEND;
	return 0;
}

const struct sseg_backend_ops sseg_memfd_ops = {
	.kind = SSEG_BACKEND_MEMFD,
	.name = "memfd",
	.caps = SSEG_CAP_TAGGED | SSEG_CAP_KEEPABLE,
	.probe = memfd_probe,
	.choose_pages = sseg_pages_choose,
	.create_owner = memfd_create_owner,
	.reserve = memfd_reserve,
	.export_handle = memfd_export,
	.serve = memfd_serve,
	.import_and_map = memfd_import,
	.settle = memfd_settle,
	.describe = memfd_describe,
	.forget_in_child = memfd_forget_in_child,
	.resident = memfd_resident,
	.release = memfd_release,
};
