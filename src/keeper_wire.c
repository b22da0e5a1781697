/* SPDX-License-Identifier: Apache-2.0 */
/* The keeper's frames: magic, format version, op, flags, the library's
 * version, what the owner obtained, the declaration (decl.h's encoding), a
 * sentence; every field at its own offset, little-endian. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "keeper_wire.h"
#include "util.h"

#define KEEP_MAGIC 0x5045454bu /* "KEEP" */
#define KEEP_FORMAT 3u

/* Offsets in the frame. */
enum {
	AT_MAGIC = 0,
	AT_FORMAT = 4,
	AT_OP = 8,
	AT_FLAGS = 12,
	AT_VERSION = 16,                    /* 16 */
	AT_MAPPED = AT_VERSION + 16,
	AT_PAGE = AT_MAPPED + 8,
	AT_PAGES = AT_PAGE + 8,
	AT_DECL = AT_PAGES + 4,             /* SSEG_DECL_WIRE */
	AT_WHY = AT_DECL + SSEG_DECL_WIRE,
	AT_END = AT_WHY + SSEG_KEEP_WHY,
};
_Static_assert(AT_END <= SSEG_KEEP_FRAME, "a keeper frame holds its fields");

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
	memset(out, 0, SSEG_KEEP_FRAME);
	sseg_put32(out + AT_MAGIC, KEEP_MAGIC);
	sseg_put32(out + AT_FORMAT, KEEP_FORMAT);
	sseg_put32(out + AT_OP, m->op);
	sseg_put32(out + AT_FLAGS, m->flags);
	put_text(out + AT_VERSION, m->decl.version, sizeof(m->decl.version));
	sseg_put64(out + AT_MAPPED, m->decl.mapped_size);
	sseg_put64(out + AT_PAGE, m->decl.page_size);
	sseg_put32(out + AT_PAGES, m->decl.pages);
	sseg_decl_encode(&m->decl.d, out + AT_DECL);
	put_text(out + AT_WHY, m->why, sizeof(m->why));
}

int sseg_keep_decode(const uint8_t in[SSEG_KEEP_FRAME], struct sseg_keep_msg *m)
{
	memset(m, 0, sizeof(*m));
	if (sseg_get32(in + AT_MAGIC) != KEEP_MAGIC)
		return sseg_err(-EPROTO, "not a keeper's frame");
	if (sseg_get32(in + AT_FORMAT) != KEEP_FORMAT)
		return sseg_err(-EPROTO, "a keeper's frame of format %" PRIu32 ", this library's is %u",
				sseg_get32(in + AT_FORMAT), KEEP_FORMAT);
	m->op = sseg_get32(in + AT_OP);
	m->flags = sseg_get32(in + AT_FLAGS);
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
