/* The memfd backend: the owner's pages live in a sealed, unnamed memfd that
 * the fd channel hands to the peers on its host. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/backend.h"

static int memfd_probe(char *why, size_t len)
{
	int fd, rc;

	rc = os_memfd_create("sharedseg-probe", 4096, 0, &fd);
	if (rc) {
		snprintf(why, len, "memfd with sealing unavailable: %s", sseg_last_error());
		return rc;
	}
	close(fd);
	snprintf(why, len, "available");
	return 0;
}

static bool is_hugetlb(uint32_t pages)
{
	return pages == SSEG_PAGES_HUGETLB_2M || pages == SSEG_PAGES_HUGETLB_1G;
}

/* Peers advise too: a page faulted through a peer's mapping (populate
 * spread or lazy) is allocated by the rules of that mapping. */
static int advise_pages(struct sseg *seg)
{
	if (seg->pages == SSEG_PAGES_THP)
		return os_madvise_hugepage(seg->window, seg->mapped_size);
	/* Keep shmem_enabled=always from turning a base request into THP. */
	if (seg->pages == SSEG_PAGES_BASE)
		madvise(seg->window, seg->mapped_size, MADV_NOHUGEPAGE);
	return 0;
}

static int memfd_create_owner(struct sseg *seg)
{
	struct sseg_page_choice choice;
	uint64_t hugetlb_size, align;
	char label[SSEG_NAME_MAX + 16];
	int rc;

	rc = sseg_pages_choose(seg->opts.pages, seg->size, &choice);
	if (rc)
		return rc;
	seg->pages = choice.pages;
	seg->page_size = choice.page_size;
	if (seg->opts.pages == SSEG_PAGES_AUTO && choice.pages == SSEG_PAGES_BASE)
		sseg_log(SSEG_LOG_WARN, "pages=auto fell back to 4 KiB pages: %s", choice.reason);
	snprintf(seg->pages_reason, sizeof(seg->pages_reason), "%s", choice.reason);
	if (sseg_round_up(seg->size, seg->page_size, &seg->mapped_size))
		return sseg_err(-EOVERFLOW, "size %llu cannot be rounded up to the page size",
				(unsigned long long)seg->size);
	hugetlb_size = is_hugetlb(seg->pages) ? seg->page_size : 0;
	snprintf(label, sizeof(label), "sharedseg:%s", seg->name);
	rc = os_memfd_create(label, seg->mapped_size, hugetlb_size, &seg->memfd);
	if (rc)
		return rc;
	seg->held |= SSEG_HELD_MEMFD;
	/* 2 MiB alignment at least, so THP can map the pages with PMDs. */
	align = seg->page_size > SSEG_2M ? seg->page_size : SSEG_2M;
	rc = os_window_reserve(seg->mapped_size, align, &seg->window);
	if (rc)
		return rc;
	seg->window_size = seg->mapped_size;
	seg->held |= SSEG_HELD_WINDOW;
	rc = os_window_map(seg->window, seg->mapped_size, seg->memfd, false);
	if (!rc)
		rc = os_memfd_seal(seg->memfd, seg->opts.flags & SSEG_F_READONLY_PEERS);
	if (rc)
		return rc;
	rc = advise_pages(seg);
	if (!rc)
		rc = sseg_place(seg);
	if (rc)
		return rc;
	if (seg->opts.populate == SSEG_POPULATE_OWNER) {
		rc = sseg_populate_range(seg, 0, seg->mapped_size, seg->opts.populate_threads);
		if (rc)
			return rc;
	}
	return sseg_channel_listen(seg);
}

/* A peer does not know the owner's page size yet: the window is aligned and
 * sized for the largest page the owner may pick. */
static int memfd_reserve(struct sseg *seg)
{
	uint64_t align = SSEG_2M;
	int rc;

	if (seg->opts.pages == SSEG_PAGES_AUTO || seg->opts.pages == SSEG_PAGES_HUGETLB_1G)
		align = SSEG_1G;
	if (sseg_round_up(seg->size, align, &seg->window_size))
		return sseg_err(-EOVERFLOW, "size %llu is too large for an address window",
				(unsigned long long)seg->size);
	rc = os_window_reserve(seg->window_size, align, &seg->window);
	if (rc)
		return rc;
	seg->held |= SSEG_HELD_WINDOW;
	return 0;
}

static int memfd_export(struct sseg *seg, struct sseg_blob_handle *handle)
{
	handle->kind = SSEG_HANDLE_FD_CHANNEL;
	sseg_channel_describe(seg, handle);
	return 0;
}

static int memfd_serve(struct sseg *seg, const struct sseg_blob *blobs)
{
	int rc;

	rc = sseg_channel_hand_over(seg, blobs, seg->memfd);
	if (rc)
		return rc;
	/* Every local peer holds a mapping now: no fd needs to stay open. */
	close(seg->memfd);
	seg->memfd = -1;
	seg->held &= ~SSEG_HELD_MEMFD;
	return 0;
}

static int map_received(struct sseg *seg, const struct sseg_blob_handle *h, int fd)
{
	uint64_t page_size;
	int rc;

	rc = os_memfd_check(fd, h->mapped_size, &page_size);
	if (rc)
		return sseg_err_wrap(rc, "the fd received from the owner was refused");
	/* THP lives on tmpfs, whose block size stays the base page. */
	if (is_hugetlb(h->pages) ? page_size != h->page_size : page_size != os_base_page_size())
		return sseg_err(-EPROTO,
				"the owner's blob says %s pages of %llu bytes but its fd has %llu-byte "
				"pages",
				sseg_pages_name(h->pages), (unsigned long long)h->page_size,
				(unsigned long long)page_size);
	if (h->mapped_size > seg->window_size)
		return sseg_err(-EPROTO,
				"the owner mapped %llu bytes, more than this rank's window of %llu",
				(unsigned long long)h->mapped_size,
				(unsigned long long)seg->window_size);
	rc = os_window_map(seg->window, h->mapped_size, fd, seg->readonly);
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
	close(fd);
	ack_rc = sseg_channel_ack(sock, rc, sseg_timeout_ms(seg));
	if (rc)
		return rc;
	/* The mapping holds the pages whatever became of the owner since. */
	if (ack_rc)
		sseg_log(SSEG_LOG_WARN, "segment '%s': could not confirm the mapping to owner rank %u",
			 seg->name, owner->rank);
	return 0;
}

const struct sseg_backend_ops sseg_memfd_ops = {
	.name = "memfd",
	.probe = memfd_probe,
	.create_owner = memfd_create_owner,
	.reserve = memfd_reserve,
	.export_handle = memfd_export,
	.serve = memfd_serve,
	.import_and_map = memfd_import,
};
