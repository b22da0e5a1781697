/* SPDX-License-Identifier: Apache-2.0 */
/* A small JSON writer (json.c): one compact document into a memory stream,
 * for the machine-readable facts the library gives (sseg_probe_json). The
 * caller nests begin/end correctly; keys are NULL inside arrays. Strings
 * may hold any bytes (names and commands other processes chose): the text
 * is always valid UTF-8, with C0, DEL and C1 controls as \u00XX escapes
 * and each byte of an ill-formed sequence replaced by U+FFFD. */
#ifndef SSEG_JSON_H
#define SSEG_JSON_H

#include <stdio.h>

#include "internal.h"

#define SSEG_JSON_MAX_DEPTH 16

struct sseg_json {
	FILE *out;
	int depth;
	bool first[SSEG_JSON_MAX_DEPTH];
};

SSEG_HIDDEN void sseg_json_init(struct sseg_json *j, FILE *out);
SSEG_HIDDEN void sseg_json_begin(struct sseg_json *j, const char *key, char bracket);
SSEG_HIDDEN void sseg_json_end(struct sseg_json *j, char bracket);
SSEG_HIDDEN void sseg_json_str(struct sseg_json *j, const char *key, const char *value);
SSEG_HIDDEN void sseg_json_int(struct sseg_json *j, const char *key, long long value);
SSEG_HIDDEN void sseg_json_u64(struct sseg_json *j, const char *key, uint64_t value);
SSEG_HIDDEN void sseg_json_bool(struct sseg_json *j, const char *key, bool value);
/* -1 (unknown) as null, else true/false. */
SSEG_HIDDEN void sseg_json_tristate(struct sseg_json *j, const char *key, int value);
/* A negative value (unknown) as null. */
SSEG_HIDDEN void sseg_json_opt_int(struct sseg_json *j, const char *key, long long value);

/* The document doc(j, ctx) writes, in *text (malloc'd, NUL-ended) of *len
 * bytes; 0 or -ENOMEM. */
SSEG_HIDDEN int sseg_json_text(void (*doc)(struct sseg_json *j, const void *ctx),
			       const void *ctx, char **text, size_t *len);
/* Writes the document doc(j, ctx) writes into buf as snprintf does: at
 * most len bytes, NUL included; returns the whole length or -errno. */
SSEG_HIDDEN int sseg_json_render(void (*doc)(struct sseg_json *j, const void *ctx),
				 const void *ctx, char *buf, size_t len);

#endif
