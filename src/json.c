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

/* How long the UTF-8 sequence a lead byte starts is; 0 for no lead byte. */
static int utf8_length(unsigned char lead)
{
	if (lead < 0x80)
		return 1;
	if (lead >= 0xc2 && lead <= 0xdf)
		return 2;
	if ((lead & 0xf0) == 0xe0)
		return 3;
	if (lead >= 0xf0 && lead <= 0xf4)
		return 4;
	return 0;
}

/* The code point of the well-formed UTF-8 sequence at p and its length
 * (1-4), or 0: a stray byte, an overlong form, a surrogate, past U+10FFFF. */
static int utf8_sequence(const unsigned char *p, unsigned *cp)
{
	static const unsigned least[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	int len = utf8_length(p[0]);

	*cp = len == 1 ? p[0] : p[0] & (0x7fu >> len);
	for (int i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0; /* the NUL that ends the string too */
		*cp = *cp << 6 | (p[i] & 0x3f);
	}
	if (len > 1 && (*cp < least[len] || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff)))
		return 0;
	return len;
}

/* Always valid UTF-8 out, whatever the bytes in: C0, DEL and C1 controls
 * as \u00XX escapes, each byte of an ill-formed sequence as U+FFFD. */
static void put_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		unsigned cp;
		int len = utf8_sequence(p, &cp);

		if (!len) {
			fputs("\xef\xbf\xbd", out);
			p++;
			continue;
		}
		if (cp == '"' || cp == '\\')
			fprintf(out, "\\%c", (char)cp);
		else if (cp == '\n')
			fputs("\\n", out);
		else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0))
			fprintf(out, "\\u%04x", cp);
		else
			fwrite(p, 1, (size_t)len, out);
		p += len;
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

int sseg_json_text(void (*doc)(struct sseg_json *j, const void *ctx), const void *ctx,
		   char **text, size_t *len)
{
	struct sseg_json j;
	FILE *f;

	*text = NULL;
	*len = 0;
	f = open_memstream(text, len);
	if (!f)
		return sseg_err(-ENOMEM, "out of memory");
	sseg_json_init(&j, f);
	doc(&j, ctx);
	if (fclose(f) || !*text || *len > INT32_MAX) {
		free(*text);
		*text = NULL;
		return sseg_err(-ENOMEM, "out of memory");
	}
	return 0;
}

int sseg_json_render(void (*doc)(struct sseg_json *j, const void *ctx), const void *ctx,
		     char *buf, size_t len)
{
	char *text;
	size_t n;
	int rc;

	if (!buf && len)
		return sseg_err(-EINVAL, "no buffer for %zu bytes of JSON", len);
	rc = sseg_json_text(doc, ctx, &text, &n);
	if (rc)
		return rc;
	if (len) {
		size_t copy = n < len ? n : len - 1;

		memcpy(buf, text, copy);
		buf[copy] = '\0';
	}
	free(text);
	return (int)n;
}
