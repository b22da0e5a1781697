/* SPDX-License-Identifier: Apache-2.0 */
/* The keeper's frames: magic, format version, op, the declaration, a
 * sentence; every field at its own offset, little-endian. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "keeper_wire.h"
#include "util.h"

#define KEEP_MAGIC 0x5045454bu /* "KEEP" */
#define KEEP_FORMAT 2u

/* Offsets in the frame. */
enum {
	AT_MAGIC = 0,
	AT_FORMAT = 4,
	AT_OP = 8,
	AT_NAME = 12,                       /* SSEG_NAME_MAX + 1 */
	AT_VERSION = AT_NAME + SSEG_NAME_MAX + 1, /* 16 */
	AT_SIZE = AT_VERSION + 16,
	AT_LAYOUT = AT_SIZE + 8,
	AT_MAPPED = AT_LAYOUT + 8,
	AT_PAGE = AT_MAPPED + 8,
	AT_U32S = AT_PAGE + 8,              /* the 8 uint32 fields below */
	AT_FLAGS = AT_U32S + 8 * 4,
	AT_WHY = AT_FLAGS + 4,
	AT_END = AT_WHY + SSEG_KEEP_WHY,
};
_Static_assert(AT_END <= SSEG_KEEP_FRAME, "a keeper frame holds its fields");

static uint32_t *u32_field(struct sseg_keep_decl *d, int i)
{
	uint32_t *f[] = { &d->pages_asked, &d->backend,	 &d->flags, &d->world_size,
			  &d->owner_rank,  &d->numa,	 &d->numa_node, &d->pages };
	return f[i];
}

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
	struct sseg_keep_decl d = m->decl;

	memset(out, 0, SSEG_KEEP_FRAME);
	sseg_put32(out + AT_MAGIC, KEEP_MAGIC);
	sseg_put32(out + AT_FORMAT, KEEP_FORMAT);
	sseg_put32(out + AT_OP, m->op);
	sseg_put32(out + AT_FLAGS, m->flags);
	put_text(out + AT_NAME, d.name, sizeof(d.name));
	put_text(out + AT_VERSION, d.version, sizeof(d.version));
	sseg_put64(out + AT_SIZE, d.size);
	sseg_put64(out + AT_LAYOUT, d.layout_hash);
	sseg_put64(out + AT_MAPPED, d.mapped_size);
	sseg_put64(out + AT_PAGE, d.page_size);
	for (int i = 0; i < 8; i++)
		sseg_put32(out + AT_U32S + 4 * i, *u32_field(&d, i));
	put_text(out + AT_WHY, m->why, sizeof(m->why));
}

int sseg_keep_decode(const uint8_t in[SSEG_KEEP_FRAME], struct sseg_keep_msg *m)
{
	struct sseg_keep_decl *d = &m->decl;

	memset(m, 0, sizeof(*m));
	if (sseg_get32(in + AT_MAGIC) != KEEP_MAGIC)
		return sseg_err(-EPROTO, "not a keeper's frame");
	if (sseg_get32(in + AT_FORMAT) != KEEP_FORMAT)
		return sseg_err(-EPROTO, "a keeper's frame of format %" PRIu32 ", this library's is %u",
				sseg_get32(in + AT_FORMAT), KEEP_FORMAT);
	m->op = sseg_get32(in + AT_OP);
	m->flags = sseg_get32(in + AT_FLAGS);
	get_text(d->name, in + AT_NAME, sizeof(d->name));
	get_text(d->version, in + AT_VERSION, sizeof(d->version));
	d->size = sseg_get64(in + AT_SIZE);
	d->layout_hash = sseg_get64(in + AT_LAYOUT);
	d->mapped_size = sseg_get64(in + AT_MAPPED);
	d->page_size = sseg_get64(in + AT_PAGE);
	for (int i = 0; i < 8; i++)
		*u32_field(d, i) = sseg_get32(in + AT_U32S + 4 * i);
	get_text(m->why, in + AT_WHY, sizeof(m->why));
	return 0;
}

static bool differs_u64(const char *field, uint64_t kept, uint64_t asked, bool bytes, char *why,
			size_t len)
{
	char a[32], b[32];

	if (kept == asked)
		return false;
	if (bytes) {
		sseg_format_size(kept, a, sizeof(a));
		sseg_format_size(asked, b, sizeof(b));
	} else {
		snprintf(a, sizeof(a), "%#" PRIx64, kept);
		snprintf(b, sizeof(b), "%#" PRIx64, asked);
	}
	snprintf(why, len, "%s: kept %s, declared now %s", field, a, b);
	return true;
}

static bool differs_named(const char *field, const char *kept, const char *asked, char *why,
			  size_t len)
{
	if (!strcmp(kept, asked))
		return false;
	snprintf(why, len, "%s: kept %s, declared now %s", field, kept, asked);
	return true;
}

static bool differs_int(const char *field, uint32_t kept, uint32_t asked, char *why, size_t len)
{
	if (kept == asked)
		return false;
	snprintf(why, len, "%s: kept %" PRIu32 ", declared now %" PRIu32, field, kept, asked);
	return true;
}

bool sseg_keep_differs(const struct sseg_keep_decl *k, const struct sseg_keep_decl *a, char *why,
		       size_t len)
{
	return differs_named("sharedseg version", k->version, a->version, why, len) ||
	       differs_u64("size", k->size, a->size, true, why, len) ||
	       differs_u64("layout (its hash)", k->layout_hash, a->layout_hash, false, why, len) ||
	       differs_named("pages", sseg_pages_name((enum sseg_pages)k->pages_asked),
			     sseg_pages_name((enum sseg_pages)a->pages_asked), why, len) ||
	       differs_named("backend", sseg_backend_name((enum sseg_backend)k->backend),
			     sseg_backend_name((enum sseg_backend)a->backend), why, len) ||
	       differs_u64("flags", k->flags, a->flags, false, why, len) ||
	       differs_int("world_size", k->world_size, a->world_size, why, len) ||
	       differs_int("owner_rank", k->owner_rank, a->owner_rank, why, len) ||
	       differs_named("numa", sseg_numa_name((enum sseg_numa)k->numa),
			     sseg_numa_name((enum sseg_numa)a->numa), why, len) ||
	       differs_int("numa_node", k->numa_node, a->numa_node, why, len);
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
