/* SPDX-License-Identifier: Apache-2.0 */
/* The declaration's table (decl.h) made into its encoding, fingerprint,
 * comparison and sentences. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "decl.h"

struct row {
	const char *name;
	enum sseg_decl_kind kind;
	unsigned where;
	size_t offset; /* of the member; the name's is the name's */
};

static const struct row rows[SSEG_DECL_NFIELDS] = {
#define SSEG_DECL_ROW(member, k, w)                                                              \
	[SSEG_DECL_##member] = { #member, SSEG_DECL_KIND_##k, (w), offsetof(struct sseg_decl, member) },
	SSEG_DECL_FIELDS(SSEG_DECL_ROW)
#undef SSEG_DECL_ROW
};

_Static_assert(SSEG_DECL_name == 0, "the name is the first row: the others are numbers");

static uint64_t number(const struct sseg_decl *d, int field)
{
	uint64_t v;

	memcpy(&v, (const char *)d + rows[field].offset, sizeof(v));
	return v;
}

static void set_number(struct sseg_decl *d, int field, uint64_t v)
{
	memcpy((char *)d + rows[field].offset, &v, sizeof(v));
}

void sseg_decl_encode(const struct sseg_decl *d, uint8_t *out)
{
	size_t n = strnlen(d->name, SSEG_NAME_MAX);

	memset(out, 0, SSEG_NAME_MAX + 1);
	memcpy(out, d->name, n);
	for (int f = 1; f < SSEG_DECL_NFIELDS; f++)
		sseg_put64(out + SSEG_NAME_MAX + 1 + 8 * (f - 1), number(d, f));
}

void sseg_decl_decode(const uint8_t *in, struct sseg_decl *d)
{
	memset(d, 0, sizeof(*d));
	memcpy(d->name, in, SSEG_NAME_MAX);
	d->name[SSEG_NAME_MAX] = '\0';
	for (int f = 1; f < SSEG_DECL_NFIELDS; f++)
		set_number(d, f, sseg_get64(in + SSEG_NAME_MAX + 1 + 8 * (f - 1)));
}

uint64_t sseg_decl_fingerprint(const struct sseg_decl *d, unsigned where)
{
	uint64_t h = sseg_hash64(d->name, strlen(d->name), 0x46505254);
	uint8_t v[8];

	for (int f = 1; f < SSEG_DECL_NFIELDS; f++) {
		if (!(rows[f].where & where))
			continue;
		sseg_put64(v, number(d, f));
		h = sseg_hash64(v, sizeof(v), h);
	}
	return h;
}

static void flags_text(uint64_t flags, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", flags & SSEG_F_READONLY_PEERS ? "readonly-peers" : "",
		 (flags & SSEG_F_READONLY_PEERS) && (flags & SSEG_F_HOST_REGISTER) ? "|" : "",
		 flags & SSEG_F_HOST_REGISTER ? "host-register" : "");
	if (!buf[0])
		snprintf(buf, len, "%s", flags ? "unknown bits" : "none");
}

/* Sizes as people read them where that is exact ("8 MiB"), else bytes. */
static void bytes_text(uint64_t v, char *buf, size_t len)
{
	uint64_t unit = 1;

	while (unit < (1ull << 40) && v >= unit * 1024 && v % (unit * 1024) == 0)
		unit *= 1024;
	if (unit == 1)
		snprintf(buf, len, "%" PRIu64 " bytes", v);
	else
		sseg_format_size(v, buf, len);
}

static void text(const struct sseg_decl *d, int f, char *buf, size_t len)
{
	uint64_t v = f ? number(d, f) : 0;

	switch (rows[f].kind) {
	case SSEG_DECL_KIND_NAME:
		snprintf(buf, len, "\"%s\"", d->name);
		break;
	case SSEG_DECL_KIND_HASH:
		snprintf(buf, len, "%016" PRIx64, v);
		break;
	case SSEG_DECL_KIND_BYTES:
		bytes_text(v, buf, len);
		break;
	case SSEG_DECL_KIND_PAGES:
		snprintf(buf, len, "%s", sseg_pages_name((enum sseg_pages)v));
		break;
	case SSEG_DECL_KIND_BACKEND:
		snprintf(buf, len, "%s", sseg_backend_name((enum sseg_backend)v));
		break;
	case SSEG_DECL_KIND_FLAGS:
		flags_text(v, buf, len);
		break;
	case SSEG_DECL_KIND_POPULATE:
		snprintf(buf, len, "%s", sseg_populate_name((enum sseg_populate)v));
		break;
	case SSEG_DECL_KIND_NUMA:
		snprintf(buf, len, "%s", sseg_numa_name((enum sseg_numa)v));
		break;
	case SSEG_DECL_KIND_NUMBER:
		snprintf(buf, len, "%" PRIu64, v);
		break;
	}
}

bool sseg_decl_differs(const struct sseg_decl *a, const struct sseg_decl *b, unsigned where,
		       struct sseg_decl_diff *diff)
{
	for (int f = 0; f < SSEG_DECL_NFIELDS; f++) {
		if (!(rows[f].where & where))
			continue;
		if (f ? number(a, f) == number(b, f) : !strcmp(a->name, b->name))
			continue;
		diff->field = (enum sseg_decl_field)f;
		diff->name = rows[f].name;
		text(a, f, diff->a, sizeof(diff->a));
		text(b, f, diff->b, sizeof(diff->b));
		return true;
	}
	return false;
}
