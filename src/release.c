/* SPDX-License-Identifier: Apache-2.0 */
/* Releasing a segment's stages, last taken first. */
#include "background.h"
#include "backend/backend.h"
#include "fdchannel.h"
#include "hostreg.h"
#include "layout.h"
#include "segment_types.h"
#include "release.h"
#include "tag.h"

int sseg_release(struct sseg *seg)
{
	int rc;

	sseg_background_stop(seg);
	sseg_tag_release(seg);
	rc = sseg_hostreg_release(seg);
	if (!rc)
		rc = sseg_channel_release(seg);
	if (!rc)
		rc = sseg_backend_release(seg);
	if (!rc) {
		sseg_layout_destroy(seg->layout);
		seg->layout = NULL;
	}
	return rc;
}
