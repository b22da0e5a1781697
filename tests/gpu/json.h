/* SPDX-License-Identifier: Apache-2.0 */
/* JSON lines: j_begin, keys and values, then j_end prints the line. */
#ifndef SSEG_GPU_JSON_H
#define SSEG_GPU_JSON_H

#include <stddef.h>

struct json {
	char buf[8192];
	size_t len;
};

void j_put(struct json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void j_key(struct json *j, const char *key);
void j_str(struct json *j, const char *key, const char *value);
void j_int(struct json *j, const char *key, long long value);
/* A number, or null when it is not finite. */
void j_num(struct json *j, const char *key, double value);
/* A new line; a "check" key first unless check is NULL. */
void j_begin(struct json *j, const char *check);
void j_end(struct json *j);

#endif
