/* SPDX-License-Identifier: Apache-2.0 */
/* A tiny JSON writer: enough for one pretty-printed document of objects,
 * arrays, strings and numbers. The caller nests begin/end correctly. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void json_init(struct json *j, FILE *out)
{
	memset(j, 0, sizeof(*j));
	j->out = out;
	j->first[0] = true;
}

static void indent(struct json *j)
{
	fputc('\n', j->out);
	for (int i = 0; i < j->depth; i++)
		fputs("  ", j->out);
}

static void put_escaped(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", out);
			break;
		case '\\':
			fputs("\\\\", out);
			break;
		case '\n':
			fputs("\\n", out);
			break;
		case '\r':
			fputs("\\r", out);
			break;
		case '\t':
			fputs("\\t", out);
			break;
		default:
			if (*p < 0x20)
				fprintf(out, "\\u%04x", *p);
			else
				fputc(*p, out);
		}
	}
	fputc('"', out);
}

/* The separator, indentation and key in front of every value. */
static void begin_value(struct json *j, const char *key)
{
	if (j->depth > 0) {
		if (!j->first[j->depth])
			fputc(',', j->out);
		indent(j);
	}
	j->first[j->depth] = false;
	if (key) {
		put_escaped(j->out, key);
		fputs(": ", j->out);
	}
}

static void open_container(struct json *j, const char *key, char bracket)
{
	begin_value(j, key);
	fputc(bracket, j->out);
	if (j->depth + 1 < JSON_MAX_DEPTH)
		j->depth++;
	j->first[j->depth] = true;
}

static void close_container(struct json *j, char bracket)
{
	bool empty = j->first[j->depth];

	if (j->depth > 0)
		j->depth--;
	if (!empty)
		indent(j);
	fputc(bracket, j->out);
}

void json_object_begin(struct json *j, const char *key)
{
	open_container(j, key, '{');
}

void json_object_end(struct json *j)
{
	close_container(j, '}');
}

void json_array_begin(struct json *j, const char *key)
{
	open_container(j, key, '[');
}

void json_array_end(struct json *j)
{
	close_container(j, ']');
}

void json_string(struct json *j, const char *key, const char *value)
{
	begin_value(j, key);
	if (value)
		put_escaped(j->out, value);
	else
		fputs("null", j->out);
}

void json_u64(struct json *j, const char *key, uint64_t value)
{
	begin_value(j, key);
	fprintf(j->out, "%llu", (unsigned long long)value);
}

void json_i64(struct json *j, const char *key, int64_t value)
{
	begin_value(j, key);
	fprintf(j->out, "%lld", (long long)value);
}

void json_double(struct json *j, const char *key, double value)
{
	begin_value(j, key);
	if (isfinite(value))
		fprintf(j->out, "%.9g", value);
	else
		fputs("null", j->out);
}

void json_bool(struct json *j, const char *key, bool value)
{
	begin_value(j, key);
	fputs(value ? "true" : "false", j->out);
}

void json_finish(struct json *j)
{
	fputc('\n', j->out);
	fflush(j->out);
}

/* Indents a compact JSON text (the library's) two spaces a level. */
void json_pretty(FILE *out, const char *text)
{
	bool in_string = false, escaped = false;
	int depth = 0;

	for (const char *p = text; *p; p++) {
		char c = *p;

		if (in_string) {
			fputc(c, out);
			escaped = !escaped && c == '\\';
			in_string = escaped || c != '"';
			continue;
		}
		if (c == '"') {
			in_string = true;
			fputc(c, out);
		} else if ((c == '{' || c == '[') && (p[1] == '}' || p[1] == ']')) {
			fputc(c, out);
			fputc(*++p, out);
		} else if (c == '{' || c == '[') {
			fputc(c, out);
			fprintf(out, "\n%*s", 2 * ++depth, "");
		} else if (c == '}' || c == ']') {
			fprintf(out, "\n%*s%c", 2 * --depth, "", c);
		} else if (c == ',') {
			fprintf(out, ",\n%*s", 2 * depth, "");
		} else if (c == ':') {
			fputs(": ", out);
		} else {
			fputc(c, out);
		}
	}
	fputc('\n', out);
}

char *json_library_text(int (*write)(const void *ctx, char *buf, size_t len), const void *ctx)
{
	char *text = NULL;
	int n, need = 0;

	do {
		free(text);
		need = need ? need * 2 : 65536;
		text = malloc((size_t)need);
		if (!text)
			return NULL;
		n = write(ctx, text, (size_t)need);
	} while (n >= need);
	if (n < 0) {
		free(text);
		errno = -n;
		return NULL;
	}
	return text;
}
