/* SPDX-License-Identifier: Apache-2.0 */
/* Tags for `sharedseg ls`: memfd segments are named in /proc by their
 * memfd and window; a driver's memory is not, so each rank maps one page
 * whose name says what it holds. */
#include <inttypes.h>
#include <stdio.h>

#include "backend/backend.h"
#include "os/window.h"
#include "segment_types.h"
#include "tag.h"

void sseg_tag_name(const struct sseg *seg, bool tag_page, char *buf, size_t len)
{
	int n = snprintf(buf, len, SSEG_TAG_LABEL "%s rank=%d world=%d owner=%d", seg->name,
			 seg->opts.rank, seg->opts.world_size, seg->opts.owner_rank);

	if (tag_page && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n,
			 " backend=%s size=%" PRIu64 " pages=%s page=%" PRIu64 " group=%u.%08x",
			 seg->ops->name, seg->size, sseg_pages_name(seg->pages), seg->page_size,
			 seg->group_pid, seg->group_nonce);
}

void sseg_tag_place(struct sseg *seg)
{
	char tag[SSEG_TAG_MAX];

	if (seg->tag || (seg->ops->caps & SSEG_CAP_TAGGED))
		return;
	sseg_tag_name(seg, true, tag, sizeof(tag));
	if (sseg_os_tag_page(tag, &seg->tag))
		seg->tag = NULL;
}

void sseg_tag_release(struct sseg *seg)
{
	sseg_os_untag_page(seg->tag);
	seg->tag = NULL;
}

void sseg_tag_forget(struct sseg *seg)
{
	seg->tag = NULL;
}
