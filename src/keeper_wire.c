/* SPDX-License-Identifier: Apache-2.0 */
/* The keeper's frames: the one frame's head (frame.h: kind KEEPER, arg the
 * op, aux the flags), then a body of fixed size: the library's version,
 * what the owner obtained, the declaration (decl.h's encoding), a
 * sentence; every field at its own offset, little-endian. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "keeper_wire.h"
#include "util.h"

/* Offsets in the frame, after the head. */
enum {
	AT_VERSION = SSEG_FRAME_HEAD,       /* 16 */
	AT_MAPPED = AT_VERSION + 16,
	AT_PAGE = AT_MAPPED + 8,
	AT_PAGES = AT_PAGE + 8,
	AT_DECL = AT_PAGES + 4,             /* SSEG_DECL_WIRE */
	AT_WHY = AT_DECL + SSEG_DECL_WIRE,
	AT_END = AT_WHY + SSEG_KEEP_WHY,
};
_Static_assert(AT_END <= SSEG_KEEP_FRAME, "a keeper frame holds its fields");
_Static_assert(SSEG_KEEP_FRAME - SSEG_FRAME_HEAD == SSEG_FRAME_KEEPER_BODY,
	       "frame.h bounds a keeper's body at its size");

static void put_text(uint8_t *at, const char *s, size_t len)
{
	size_t n = strnlen(s, len - 1);

	memcpy(at, s, n);
	memset(at + n, 0, len - n);
}

static void get_text(char *s, const uint8_t *at, size_t len)
{
	memcpy(s, at, len - 1);
	s[len - 1] = '\0';
}

void sseg_keep_encode(const struct sseg_keep_msg *m, uint8_t out[SSEG_KEEP_FRAME])
{
	struct sseg_frame f = { .kind = SSEG_FRAME_KEEPER, .arg = m->op, .aux = m->flags,
				.len = SSEG_FRAME_KEEPER_BODY };

	memset(out, 0, SSEG_KEEP_FRAME);
	sseg_frame_encode(out, &f);
	put_text(out + AT_VERSION, m->decl.version, sizeof(m->decl.version));
	sseg_put64(out + AT_MAPPED, m->decl.mapped_size);
	sseg_put64(out + AT_PAGE, m->decl.page_size);
	sseg_put32(out + AT_PAGES, m->decl.pages);
	sseg_decl_encode(&m->decl.d, out + AT_DECL);
	put_text(out + AT_WHY, m->why, sizeof(m->why));
}

int sseg_keep_decode(const uint8_t in[SSEG_KEEP_FRAME], struct sseg_keep_msg *m)
{
	struct sseg_frame f;
	int rc;

	memset(m, 0, sizeof(*m));
	rc = sseg_frame_decode(in, SSEG_FRAME_KEEPER, &f);
	if (rc)
		return rc;
	if (f.len != SSEG_FRAME_KEEPER_BODY)
		return sseg_err(-EPROTO, "a keeper's message of %" PRIu32 " bytes, %u expected",
				f.len, (unsigned)SSEG_FRAME_KEEPER_BODY);
	m->op = f.arg;
	m->flags = f.aux;
	get_text(m->decl.version, in + AT_VERSION, sizeof(m->decl.version));
	m->decl.mapped_size = sseg_get64(in + AT_MAPPED);
	m->decl.page_size = sseg_get64(in + AT_PAGE);
	m->decl.pages = sseg_get32(in + AT_PAGES);
	sseg_decl_decode(in + AT_DECL, &m->decl.d);
	get_text(m->why, in + AT_WHY, sizeof(m->why));
	return 0;
}

bool sseg_keep_differs(const struct sseg_keep_decl *k, const struct sseg_keep_decl *a, char *why,
		       size_t len)
{
	struct sseg_decl_diff d;

	if (strcmp(k->version, a->version)) {
		snprintf(why, len, "sharedseg version: kept %s, declared now %s", k->version,
			 a->version);
		return true;
	}
	if (!sseg_decl_differs(&k->d, &a->d, SSEG_DECL_KEPT, &d))
		return false;
	if (d.field == SSEG_DECL_layout) {
		/* A keeper holds no layout text to tell blocks apart by (a group
		 * does: verify.c): a field that differs besides the layout's hash
		 * says more ("size: kept 8 MiB, declared now 16 MiB"). */
		struct sseg_decl same = a->d;
		struct sseg_decl_diff other;

		same.layout = k->d.layout;
		if (sseg_decl_differs(&k->d, &same, SSEG_DECL_KEPT, &other))
			d = other;
	}
	snprintf(why, len, "%s: kept %s, declared now %s", d.name, d.a, d.b);
	return true;
}

void sseg_keep_socket(const char *keeper, char *buf, size_t len)
{
	snprintf(buf, len, "keep-%s", keeper);
}

int sseg_keep_check_name(const char *keeper)
{
	size_t n = keeper ? strlen(keeper) : 0;

	if (n == 0 || n > SSEG_NAME_MAX)
		return sseg_err(-EINVAL, "a keeper's name must be 1 to %u bytes, got %zu",
				SSEG_NAME_MAX, n);
	for (size_t i = 0; i < n; i++) {
		char c = keeper[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return sseg_err(-EINVAL,
					"a keeper's name is made of A-Z a-z 0-9 . _ -: byte %zu is "
					"0x%02x",
					i, (unsigned char)c);
	}
	return 0;
}
