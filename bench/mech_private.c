/* SPDX-License-Identifier: Apache-2.0 */
/* One private buffer a rank, what serving stacks allocate today: an
 * anonymous mapping (what malloc returns for a large size) of the page
 * kind, first-touched by the rank one byte a 4 KiB page. */
#include "case.h"
#include "kernels.h"

static const char *private_refuses(enum sseg_pages kind)
{
	return kind == SSEG_PAGES_AUTO ? "pages=auto has no meaning for a private buffer" : NULL;
}

static int private_open(const struct mech_ctx *c, struct mech_map *m)
{
	double t0 = now_s();
	int rc = map_private(c->bc->pages, c->bc->size, &m->map);

	if (rc)
		return mech_fail(m, "mmap of the private buffer", rc);
	touch_write(m->map.base, m->map.len);
	m->create_s = now_s() - t0;
	m->base = m->map.base;
	m->len = c->bc->size;
	return 0;
}

static void private_close(const struct mech_ctx *c, struct mech_map *m)
{
	unmap(&m->map);
}

const struct mech_ops mech_private = {
	.name = "private",
	.label = "private-malloc",
	.shared = false,
	.attach = "",
	.refuses = private_refuses,
	.open = private_open,
	.close = private_close,
};
