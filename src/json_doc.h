/* SPDX-License-Identifier: Apache-2.0 */
/* The library's JSON documents (json_doc.c): one compact document, written
 * by the one writer (json.h) into memory, with the library's errors. */
#ifndef SSEG_JSON_DOC_H
#define SSEG_JSON_DOC_H

#include "internal.h"
#include "json.h"

/* The document doc(j, ctx) writes, in *text (malloc'd, NUL-ended) of *len
 * bytes; 0 or -ENOMEM. */
SSEG_HIDDEN int sseg_json_text(void (*doc)(struct sseg_json *j, const void *ctx),
			       const void *ctx, char **text, size_t *len);
/* Writes the document doc(j, ctx) writes into buf as snprintf does: at
 * most len bytes, NUL included; returns the whole length or -errno. */
SSEG_HIDDEN int sseg_json_render(void (*doc)(struct sseg_json *j, const void *ctx),
				 const void *ctx, char *buf, size_t len);

#endif
