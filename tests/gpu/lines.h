/* SPDX-License-Identifier: Apache-2.0 */
/* JSON lines, written by the library's JSON writer (src/json.h): j_begin,
 * keys and values, then j_end prints the line with one write, so lines of
 * ranks that print at once do not mix. */
#ifndef SSEG_GPU_LINES_H
#define SSEG_GPU_LINES_H

#include <stddef.h>

#include "json.h"

struct json {
	struct sseg_json w;
	char *text;
	size_t len;
};

void j_str(struct json *j, const char *key, const char *value);
void j_int(struct json *j, const char *key, long long value);
/* A number, or null when it is not finite. */
void j_num(struct json *j, const char *key, double value);
void j_bool(struct json *j, const char *key, bool value);
/* An array as the value of key (NULL inside an array), then its items. */
void j_array_begin(struct json *j, const char *key);
void j_array_end(struct json *j);
/* A new line; a "check" key first unless check is NULL. */
void j_begin(struct json *j, const char *check);
void j_end(struct json *j);

#endif
