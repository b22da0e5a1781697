/* SPDX-License-Identifier: Apache-2.0 */
/* The project's one JSON writer (json.c): the library's documents
 * (sseg_probe_json, sseg_list_json), the tool's output and the bench's
 * rows. The caller nests begin/end correctly; keys are NULL inside arrays
 * and for the top-level value. Strings may hold any bytes (names and
 * commands other processes chose): the text is always valid UTF-8, with
 * C0, DEL and C1 controls as \u00XX escapes (\n as \n) and each byte of an
 * ill-formed sequence replaced by U+FFFD.
 *
 * It needs nothing of the library but this header, so the tool and the
 * bench, which link only the public API, link its object as well (it is
 * hidden: no second implementation, and nothing more exported). */
#ifndef SSEG_JSON_H
#define SSEG_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hidden.h"

#define SSEG_JSON_MAX_DEPTH 16

enum sseg_json_style {
	SSEG_JSON_COMPACT, /* {"a":1,"b":[2,3]}: the library's documents */
	SSEG_JSON_LINE,    /* {"a": 1, "b": [2, 3]}: one object a line */
	SSEG_JSON_PRETTY,  /* two spaces a level, for people */
};

struct sseg_json {
	FILE *out;
	enum sseg_json_style style;
	int depth;
	bool first[SSEG_JSON_MAX_DEPTH]; /* nothing written yet at this depth */
};

SSEG_HIDDEN void sseg_json_init(struct sseg_json *j, FILE *out, enum sseg_json_style style);
SSEG_HIDDEN void sseg_json_begin(struct sseg_json *j, const char *key, char bracket);
SSEG_HIDDEN void sseg_json_end(struct sseg_json *j, char bracket);
/* NULL as null. */
SSEG_HIDDEN void sseg_json_str(struct sseg_json *j, const char *key, const char *value);
SSEG_HIDDEN void sseg_json_int(struct sseg_json *j, const char *key, long long value);
SSEG_HIDDEN void sseg_json_u64(struct sseg_json *j, const char *key, uint64_t value);
/* Nine significant digits; a value that is not finite as null. */
SSEG_HIDDEN void sseg_json_double(struct sseg_json *j, const char *key, double value);
SSEG_HIDDEN void sseg_json_bool(struct sseg_json *j, const char *key, bool value);
/* -1 (unknown) as null, else true/false. */
SSEG_HIDDEN void sseg_json_tristate(struct sseg_json *j, const char *key, int value);
/* A negative value (unknown) as null. */
SSEG_HIDDEN void sseg_json_opt_int(struct sseg_json *j, const char *key, long long value);
/* One JSON value as text, written in j's style: its strings and numbers
 * byte for byte, its layout j's. For documents this writer made (the
 * library's compact text, which the tool prints indented). */
SSEG_HIDDEN void sseg_json_copy(struct sseg_json *j, const char *key, const char *text);
/* Ends a document that is a line of its own (the caller flushes: a
 * command checks its output once, at the end). */
SSEG_HIDDEN void sseg_json_finish(struct sseg_json *j);

#endif
