/* SPDX-License-Identifier: Apache-2.0 */
/* A small JSON writer: compact, escaped, enough for the library's facts. */
#include <stdlib.h>
#include <string.h>

#include "json.h"

void sseg_json_init(struct sseg_json *j, FILE *out)
{
	memset(j, 0, sizeof(*j));
	j->out = out;
	j->first[0] = true;
}

static void put_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", out);
		else if (*p < 0x20)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

static void key(struct sseg_json *j, const char *k)
{
	if (!j->first[j->depth])
		fputc(',', j->out);
	j->first[j->depth] = false;
	if (k) {
		put_string(j->out, k);
		fputc(':', j->out);
	}
}

void sseg_json_begin(struct sseg_json *j, const char *k, char bracket)
{
	key(j, k);
	fputc(bracket, j->out);
	if (j->depth + 1 < SSEG_JSON_MAX_DEPTH)
		j->depth++;
	j->first[j->depth] = true;
}

void sseg_json_end(struct sseg_json *j, char bracket)
{
	if (j->depth > 0)
		j->depth--;
	fputc(bracket, j->out);
}

void sseg_json_str(struct sseg_json *j, const char *k, const char *value)
{
	key(j, k);
	put_string(j->out, value ? value : "");
}

void sseg_json_int(struct sseg_json *j, const char *k, long long value)
{
	key(j, k);
	fprintf(j->out, "%lld", value);
}

void sseg_json_u64(struct sseg_json *j, const char *k, uint64_t value)
{
	key(j, k);
	fprintf(j->out, "%llu", (unsigned long long)value);
}

void sseg_json_bool(struct sseg_json *j, const char *k, bool value)
{
	key(j, k);
	fputs(value ? "true" : "false", j->out);
}

void sseg_json_tristate(struct sseg_json *j, const char *k, int value)
{
	key(j, k);
	fputs(value < 0 ? "null" : value ? "true" : "false", j->out);
}

void sseg_json_opt_int(struct sseg_json *j, const char *k, long long value)
{
	key(j, k);
	if (value < 0)
		fputs("null", j->out);
	else
		fprintf(j->out, "%lld", value);
}

int sseg_json_render(void (*doc)(struct sseg_json *j, const void *ctx), const void *ctx,
		     char *buf, size_t len)
{
	struct sseg_json j;
	char *text = NULL;
	size_t n = 0;
	FILE *f;

	if (!buf && len)
		return sseg_err(-EINVAL, "no buffer for %zu bytes of JSON", len);
	f = open_memstream(&text, &n);
	if (!f)
		return sseg_err(-ENOMEM, "out of memory");
	sseg_json_init(&j, f);
	doc(&j, ctx);
	if (fclose(f) || !text || n > INT32_MAX) {
		free(text);
		return sseg_err(-ENOMEM, "out of memory");
	}
	if (len) {
		size_t copy = n < len ? n : len - 1;

		memcpy(buf, text, copy);
		buf[copy] = '\0';
	}
	free(text);
	return (int)n;
}
