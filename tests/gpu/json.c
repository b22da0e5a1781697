/* SPDX-License-Identifier: Apache-2.0 */
/* JSON lines: one object a line, built in a fixed buffer. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "json.h"

void j_put(struct json *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (j->len >= sizeof(j->buf))
		return;
	va_start(ap, fmt);
	n = vsnprintf(j->buf + j->len, sizeof(j->buf) - j->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		j->len += (size_t)n;
}

void j_key(struct json *j, const char *key)
{
	j_put(j, "%s\"%s\": ", j->len > 1 ? ", " : "", key);
}

void j_str(struct json *j, const char *key, const char *value)
{
	j_key(j, key);
	j_put(j, "\"");
	for (const unsigned char *c = (const unsigned char *)value; *c; c++) {
		if (*c == '"' || *c == '\\')
			j_put(j, "\\%c", *c);
		else if (*c < 0x20)
			j_put(j, "\\u%04x", *c);
		else
			j_put(j, "%c", *c);
	}
	j_put(j, "\"");
}

void j_int(struct json *j, const char *key, long long value)
{
	j_key(j, key);
	j_put(j, "%lld", value);
}

void j_num(struct json *j, const char *key, double value)
{
	j_key(j, key);
	if (isfinite(value))
		j_put(j, "%.6g", value);
	else
		j_put(j, "null");
}

void j_begin(struct json *j, const char *check)
{
	j->len = 0;
	j_put(j, "{");
	if (check)
		j_str(j, "check", check);
}

void j_end(struct json *j)
{
	printf("%s}\n", j->buf);
	fflush(stdout);
}
