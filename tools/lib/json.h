/* SPDX-License-Identifier: Apache-2.0 */
/* The project's one JSON writer (json.c), in the tools' helper library: the
 * tools' documents (a listing, the probe's facts), the tool's output and
 * the bench's rows. The caller nests begin/end correctly; keys are NULL
 * inside arrays and for the top-level value. Strings may hold any bytes
 * (names and commands other processes chose): the text is always valid
 * UTF-8, with C0, DEL and C1 controls as \u00XX escapes (\n as \n) and each
 * byte of an ill-formed sequence replaced by U+FFFD.
 *
 * A document may go to a sink instead of text: the Python extension builds
 * its objects from the same calls (the documents are written once, and no
 * process parses the JSON it wrote). */
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

/* One value as a sink receives it; a string is as the document gave it
 * (sseg_json_utf8 makes it what the text would hold). */
struct sseg_json_value {
	enum { SSEG_JSON_NULL, SSEG_JSON_BOOL, SSEG_JSON_INT, SSEG_JSON_U64, SSEG_JSON_DOUBLE,
	       SSEG_JSON_STRING } kind;
	union {
		bool b;
		long long i;
		uint64_t u;
		double d; /* finite: a value that is not is NULL */
		const char *s;
	};
};

/* Where a document's values go instead of text, in order; key is NULL in
 * an array and for the top-level value. */
struct sseg_json_sink {
	void (*begin)(void *ctx, const char *key, char bracket);
	void (*end)(void *ctx, char bracket);
	void (*value)(void *ctx, const char *key, const struct sseg_json_value *v);
	void *ctx;
};

struct sseg_json {
	FILE *out;
	enum sseg_json_style style;
	const struct sseg_json_sink *sink; /* instead of out, when set */
	int depth;
	bool first[SSEG_JSON_MAX_DEPTH]; /* nothing written yet at this depth */
};

SSEG_HIDDEN void sseg_json_init(struct sseg_json *j, FILE *out, enum sseg_json_style style);
SSEG_HIDDEN void sseg_json_init_sink(struct sseg_json *j, const struct sseg_json_sink *sink);
/* s as the text holds it: each byte of an ill-formed UTF-8 sequence as
 * U+FFFD. Writes at most len bytes, NUL included; returns the whole length
 * (as snprintf does). */
SSEG_HIDDEN size_t sseg_json_utf8(const char *s, char *out, size_t len);
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
/* Ends a document that is a line of its own (the caller flushes: a
 * command checks its output once, at the end). */
SSEG_HIDDEN void sseg_json_finish(struct sseg_json *j);

#endif
