/* SPDX-License-Identifier: Apache-2.0 */
/* The blob each rank contributes to the exchange, decoded. On the wire it is
 * SSEG_BLOB_SIZE bytes of explicit little-endian fields (see blob.c for the
 * offsets), never a raw struct. */
#ifndef SSEG_BLOB_H
#define SSEG_BLOB_H

#include <string.h>

#include "decl.h"
#include "internal.h"
#include "os/host.h"

#define SSEG_BLOB_MAGIC 0x47455353u /* "SSEG" */
#define SSEG_BLOB_VERSION 3u
#define SSEG_TOKEN_LEN 16
#define SSEG_SOCK_NAME_MAX 47
#define SSEG_HANDLE_DATA_LEN 128
#define SSEG_BLOB_ERROR_MAX 320
/* The layout description a blob carries (cut beyond this). */
#define SSEG_BLOB_LAYOUT_MAX 3060

/* How the owner's peers reach its pages. data is the backend's own. */
enum sseg_handle_kind {
	SSEG_HANDLE_NONE = 0,       /* a peer's blob */
	SSEG_HANDLE_FD_CHANNEL = 1, /* the owner's fd channel: socket name + token */
	SSEG_HANDLE_FABRIC = 2,     /* a driver handle in data that ranks on other
				     * hosts import; local peers still use the channel */
};

struct sseg_blob_handle {
	uint32_t kind;        /* enum sseg_handle_kind */
	uint32_t pages;       /* enum sseg_pages obtained by the owner */
	uint64_t page_size;   /* obtained */
	uint64_t mapped_size; /* size rounded up to page_size */
	char sock[SSEG_SOCK_NAME_MAX + 1];
	uint8_t token[SSEG_TOKEN_LEN];
	uint8_t data[SSEG_HANDLE_DATA_LEN];
};

struct sseg_blob {
	int32_t status; /* 0, or the negative errno of a rank whose create failed */
	uint32_t rank;
	/* the declaration (decl.h): what every rank must agree on, and the
	 * rank's owner; the fingerprint over its GROUP fields */
	struct sseg_decl decl;
	uint64_t fingerprint;
	/* where this rank runs */
	struct sseg_os_host_id host;
	uint32_t pid;
	uint32_t nonce; /* random per create: tells this create's blob from an earlier one */
	/* the owner's handle section (all zero in a peer's blob) */
	struct sseg_blob_handle handle;
	/* a failure blob's message (status != 0) */
	char error[SSEG_BLOB_ERROR_MAX];
	/* the layout's canonical description, maybe cut (decoded: points into
	 * the raw blob, valid while it is) */
	const char *layout;
	uint32_t layout_len;
};

/* Two ranks can share an fd (and reach each other's abstract sockets): the
 * same boot of one host, the same network namespace. */
static inline bool sseg_blob_same_host(const struct sseg_blob *a, const struct sseg_blob *b)
{
	return !memcmp(a->host.boot_id, b->host.boot_id, sizeof(a->host.boot_id)) &&
	       a->host.netns == b->host.netns;
}

/* Fingerprint over the declaration's GROUP fields (decl.h) and the blob's
 * format: rank and owner do not enter it. */
SSEG_HIDDEN uint64_t sseg_blob_fingerprint(const struct sseg_blob *b);
/* Writes SSEG_BLOB_SIZE bytes, checksum included; b->layout (NUL-ended or
 * NULL) is cut to SSEG_BLOB_LAYOUT_MAX bytes. */
SSEG_HIDDEN void sseg_blob_encode(const struct sseg_blob *b, void *out);
/* Decodes and checks length, magic, version and checksum; the message names
 * the index the blob was found at. */
SSEG_HIDDEN int sseg_blob_decode(const void *in, int index, struct sseg_blob *b);
/* Fills a failure blob for a rank whose create failed with err. */
SSEG_HIDDEN void sseg_blob_failure(void *out, const struct sseg_opts *opts, int err,
				   const char *message);

#endif
