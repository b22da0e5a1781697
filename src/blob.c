/* SPDX-License-Identifier: Apache-2.0 */
/* Blob encoding. Offsets (bytes, little-endian):
 *   0 magic u32      4 version u16     6 blob size u16    8 status i32
 *  12 rank u32      16 fingerprint u64
 *  24 boot id[16]   40 netns u64      48 pidns u64       56 uid u32
 *  60 pid u32
 *  64 the declaration (decl.h: the name[64], then each number as a u64, in
 *     the table's order; SSEG_DECL_WIRE bytes)
 * 256 handle section (owner): kind u32, pages u32, page size u64,
 *     mapped size u64, socket name[48], token[16], backend data[128]
 * 480 a failure blob's error message[320]
 * 1024 layout description: length u16, text (at most 3060 bytes)
 * 4088 nonce u32 (random per create)
 * 4092 checksum u32 (FNV-1a over bytes 0..4091, folded to 32 bits) */
#include <stdio.h>
#include <string.h>

#include "blob.h"

#define OFF_DECL 64
#define OFF_HANDLE 256
#define OFF_ERROR 480
#define OFF_LAYOUT 1024
#define OFF_NONCE 4088
#define OFF_CHECKSUM 4092

_Static_assert(OFF_CHECKSUM + 4 == SSEG_BLOB_SIZE, "the blob ends with its checksum");
_Static_assert(OFF_DECL + SSEG_DECL_WIRE <= OFF_HANDLE, "the declaration overflows the blob");
_Static_assert(OFF_LAYOUT + 2 + SSEG_BLOB_LAYOUT_MAX <= OFF_NONCE, "layout overflows the blob");

_Static_assert(OFF_HANDLE + 8 + 16 + SSEG_SOCK_NAME_MAX + 1 + SSEG_TOKEN_LEN +
			       SSEG_HANDLE_DATA_LEN <= OFF_ERROR,
	       "handle section overflows the blob");
_Static_assert(OFF_ERROR + SSEG_BLOB_ERROR_MAX <= OFF_LAYOUT, "error overflows the blob");

static uint32_t checksum(const uint8_t *p)
{
	uint64_t h = sseg_hash64(p, OFF_CHECKSUM, 0x5353);

	return (uint32_t)(h ^ (h >> 32));
}

uint64_t sseg_blob_fingerprint(const struct sseg_blob *b)
{
	return sseg_decl_fingerprint(&b->decl, SSEG_DECL_GROUP) ^ SSEG_BLOB_VERSION;
}

static void encode_handle(const struct sseg_blob_handle *h, uint8_t *p)
{
	sseg_put32(p + 0, h->kind);
	sseg_put32(p + 4, h->pages);
	sseg_put64(p + 8, h->page_size);
	sseg_put64(p + 16, h->mapped_size);
	memcpy(p + 24, h->sock, sizeof(h->sock));
	memcpy(p + 24 + sizeof(h->sock), h->token, sizeof(h->token));
	memcpy(p + 24 + sizeof(h->sock) + sizeof(h->token), h->data, sizeof(h->data));
}

static void decode_handle(const uint8_t *p, struct sseg_blob_handle *h)
{
	h->kind = sseg_get32(p + 0);
	h->pages = sseg_get32(p + 4);
	h->page_size = sseg_get64(p + 8);
	h->mapped_size = sseg_get64(p + 16);
	memcpy(h->sock, p + 24, sizeof(h->sock));
	h->sock[sizeof(h->sock) - 1] = '\0';
	memcpy(h->token, p + 24 + sizeof(h->sock), sizeof(h->token));
	memcpy(h->data, p + 24 + sizeof(h->sock) + sizeof(h->token), sizeof(h->data));
}

static void encode_layout(const char *text, uint8_t *p)
{
	size_t n = text ? strlen(text) : 0;

	if (n > SSEG_BLOB_LAYOUT_MAX)
		n = SSEG_BLOB_LAYOUT_MAX;
	p[0] = (uint8_t)n;
	p[1] = (uint8_t)(n >> 8);
	if (n)
		memcpy(p + 2, text, n);
}

void sseg_blob_encode(const struct sseg_blob *b, void *out)
{
	uint8_t *p = out;

	memset(p, 0, SSEG_BLOB_SIZE);
	sseg_put32(p + 0, SSEG_BLOB_MAGIC);
	p[4] = SSEG_BLOB_VERSION & 0xff;
	p[5] = SSEG_BLOB_VERSION >> 8;
	p[6] = SSEG_BLOB_SIZE & 0xff;
	p[7] = SSEG_BLOB_SIZE >> 8;
	sseg_put32(p + 8, (uint32_t)b->status);
	sseg_put32(p + 12, b->rank);
	sseg_put64(p + 16, b->fingerprint);
	memcpy(p + 24, b->host.boot_id, 16);
	sseg_put64(p + 40, b->host.netns);
	sseg_put64(p + 48, b->host.pidns);
	sseg_put32(p + 56, b->host.uid);
	sseg_put32(p + 60, b->pid);
	sseg_decl_encode(&b->decl, p + OFF_DECL);
	if (b->status)
		memcpy(p + OFF_ERROR, b->error, sizeof(b->error));
	else
		encode_handle(&b->handle, p + OFF_HANDLE);
	encode_layout(b->layout, p + OFF_LAYOUT);
	sseg_put32(p + OFF_NONCE, b->nonce);
	sseg_put32(p + OFF_CHECKSUM, checksum(p));
}

int sseg_blob_decode(const void *in, int index, struct sseg_blob *b)
{
	const uint8_t *p = in;
	uint32_t magic = sseg_get32(p);
	unsigned version = p[4] | (unsigned)p[5] << 8;
	unsigned size = p[6] | (unsigned)p[7] << 8;
	uint32_t sum = sseg_get32(p + OFF_CHECKSUM);

	memset(b, 0, sizeof(*b));
	if (magic != SSEG_BLOB_MAGIC)
		return sseg_err(-EBADMSG,
				"blob at index %d is not a sharedseg blob (magic 0x%08x, expected 0x%08x): "
				"the exchange passed other bytes",
				index, magic, SSEG_BLOB_MAGIC);
	if (version != SSEG_BLOB_VERSION)
		return sseg_err(-EPROTO,
				"blob at index %d has format version %u, this build speaks %u: "
				"every rank must run the same sharedseg",
				index, version, SSEG_BLOB_VERSION);
	if (size != SSEG_BLOB_SIZE)
		return sseg_err(-EBADMSG, "blob at index %d declares %u bytes, expected %u", index,
				size, SSEG_BLOB_SIZE);
	if (sum != checksum(p))
		return sseg_err(-EBADMSG,
				"blob at index %d fails its checksum (0x%08x, computed 0x%08x): "
				"it was corrupted or cut in the exchange",
				index, sum, checksum(p));
	b->status = (int32_t)sseg_get32(p + 8);
	b->rank = sseg_get32(p + 12);
	b->fingerprint = sseg_get64(p + 16);
	memcpy(b->host.boot_id, p + 24, 16);
	b->host.netns = sseg_get64(p + 40);
	b->host.pidns = sseg_get64(p + 48);
	b->host.uid = sseg_get32(p + 56);
	b->pid = sseg_get32(p + 60);
	b->nonce = sseg_get32(p + OFF_NONCE);
	sseg_decl_decode(p + OFF_DECL, &b->decl);
	b->layout_len = p[OFF_LAYOUT] | (unsigned)p[OFF_LAYOUT + 1] << 8;
	if (b->layout_len > SSEG_BLOB_LAYOUT_MAX)
		return sseg_err(-EBADMSG, "blob at index %d declares a layout description of %u "
				"bytes, at most %u fit", index, b->layout_len, SSEG_BLOB_LAYOUT_MAX);
	b->layout = (const char *)p + OFF_LAYOUT + 2;
	if (b->status) {
		memcpy(b->error, p + OFF_ERROR, sizeof(b->error));
		b->error[sizeof(b->error) - 1] = '\0';
	} else {
		decode_handle(p + OFF_HANDLE, &b->handle);
	}
	return 0;
}

void sseg_blob_failure(void *out, const struct sseg_opts *opts, int err, const char *message)
{
	struct sseg_blob b;

	memset(&b, 0, sizeof(b));
	b.status = err ? err : -EIO;
	if (opts && opts->sz >= offsetof(struct sseg_opts, owner_rank)) {
		b.rank = opts->rank >= 0 ? (uint32_t)opts->rank : UINT32_MAX;
		b.decl.world_size = opts->world_size >= 0 ? (uint64_t)opts->world_size : 0;
		if (opts->name)
			snprintf(b.decl.name, sizeof(b.decl.name), "%s", opts->name);
	}
	snprintf(b.error, sizeof(b.error), "%s", message);
	sseg_blob_encode(&b, out);
}
