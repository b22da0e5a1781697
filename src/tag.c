/* SPDX-License-Identifier: Apache-2.0 */
/* Tags for `sharedseg ls`: memfd segments are named in /proc by their
 * memfd and window; a driver's memory is not, so each rank maps one page
 * whose name says what it holds. */
#include <inttypes.h>
#include <stdio.h>

#include "backend/backend.h"
#include "object.h"
#include "os/window.h"
#include "tag.h"

void sseg_tag_place(struct sseg *seg)
{
	char tag[SSEG_NAME_MAX + 192];

	if (seg->tag || (seg->ops->caps & SSEG_CAP_TAGGED))
		return;
	snprintf(tag, sizeof(tag),
		 "sseg-tag:%s rank=%d world=%d owner=%d backend=%s size=%" PRIu64
		 " pages=%s page=%" PRIu64,
		 seg->name, seg->opts.rank, seg->opts.world_size, seg->opts.owner_rank,
		 seg->ops->name, seg->size, sseg_pages_name(seg->pages), seg->page_size);
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
