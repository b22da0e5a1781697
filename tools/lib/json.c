/* SPDX-License-Identifier: Apache-2.0 */
/* The one JSON writer (json.h): compact, one line, or indented; or the
 * same values, to a sink. */
#include <math.h>
#include <string.h>

#include "json.h"

void sseg_json_init(struct sseg_json *j, FILE *out, enum sseg_json_style style)
{
	memset(j, 0, sizeof(*j));
	j->out = out;
	j->style = style;
	j->first[0] = true;
}

void sseg_json_init_sink(struct sseg_json *j, const struct sseg_json_sink *sink)
{
	sseg_json_init(j, NULL, SSEG_JSON_COMPACT);
	j->sink = sink;
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

size_t sseg_json_utf8(const char *s, char *out, size_t len)
{
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		unsigned cp;
		int seq = utf8_sequence(p, &cp);
		const char *bytes = seq ? (const char *)p : "\xef\xbf\xbd";
		size_t take = seq ? (size_t)seq : 3;

		for (size_t i = 0; i < take; i++, n++)
			if (n + 1 < len)
				out[n] = bytes[i];
		p += seq ? seq : 1;
	}
	if (len)
		out[n < len ? n : len - 1] = '\0';
	return n;
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

/* What goes before a value or a key: the comma, and the style's space or
 * new line and indentation. */
static void item(struct sseg_json *j)
{
	bool first = j->first[j->depth];

	j->first[j->depth] = false;
	if (!first)
		fputc(',', j->out);
	if (j->style == SSEG_JSON_PRETTY && j->depth > 0)
		fprintf(j->out, "\n%*s", 2 * j->depth, "");
	else if (j->style == SSEG_JSON_LINE && !first)
		fputc(' ', j->out);
}

static void colon(struct sseg_json *j)
{
	fputs(j->style == SSEG_JSON_COMPACT ? ":" : ": ", j->out);
}

static void key(struct sseg_json *j, const char *k)
{
	item(j);
	if (k) {
		put_string(j->out, k);
		colon(j);
	}
}

static void open_container(struct sseg_json *j, char bracket)
{
	fputc(bracket, j->out);
	if (j->depth + 1 < SSEG_JSON_MAX_DEPTH)
		j->depth++;
	j->first[j->depth] = true;
}

static bool sunk(struct sseg_json *j, const char *k, struct sseg_json_value v)
{
	if (!j->sink)
		return false;
	j->sink->value(j->sink->ctx, k, &v);
	return true;
}

#define VALUE(kind_, field, x) ((struct sseg_json_value){ .kind = (kind_), .field = (x) })
#define NULL_VALUE ((struct sseg_json_value){ .kind = SSEG_JSON_NULL })

void sseg_json_begin(struct sseg_json *j, const char *k, char bracket)
{
	if (j->sink) {
		j->sink->begin(j->sink->ctx, k, bracket);
		return;
	}
	key(j, k);
	open_container(j, bracket);
}

void sseg_json_end(struct sseg_json *j, char bracket)
{
	bool empty = j->first[j->depth];

	if (j->sink) {
		j->sink->end(j->sink->ctx, bracket);
		return;
	}
	if (j->depth > 0)
		j->depth--;
	if (j->style == SSEG_JSON_PRETTY && !empty)
		fprintf(j->out, "\n%*s", 2 * j->depth, "");
	fputc(bracket, j->out);
}

void sseg_json_str(struct sseg_json *j, const char *k, const char *value)
{
	if (sunk(j, k, value ? VALUE(SSEG_JSON_STRING, s, value) : NULL_VALUE))
		return;
	key(j, k);
	if (value)
		put_string(j->out, value);
	else
		fputs("null", j->out);
}

void sseg_json_int(struct sseg_json *j, const char *k, long long value)
{
	if (sunk(j, k, VALUE(SSEG_JSON_INT, i, value)))
		return;
	key(j, k);
	fprintf(j->out, "%lld", value);
}

void sseg_json_u64(struct sseg_json *j, const char *k, uint64_t value)
{
	if (sunk(j, k, VALUE(SSEG_JSON_U64, u, value)))
		return;
	key(j, k);
	fprintf(j->out, "%llu", (unsigned long long)value);
}

void sseg_json_double(struct sseg_json *j, const char *k, double value)
{
	if (sunk(j, k, isfinite(value) ? VALUE(SSEG_JSON_DOUBLE, d, value) : NULL_VALUE))
		return;
	key(j, k);
	if (isfinite(value))
		fprintf(j->out, "%.9g", value);
	else
		fputs("null", j->out);
}

void sseg_json_bool(struct sseg_json *j, const char *k, bool value)
{
	if (sunk(j, k, VALUE(SSEG_JSON_BOOL, b, value)))
		return;
	key(j, k);
	fputs(value ? "true" : "false", j->out);
}

void sseg_json_tristate(struct sseg_json *j, const char *k, int value)
{
	if (sunk(j, k, value < 0 ? NULL_VALUE : VALUE(SSEG_JSON_BOOL, b, value != 0)))
		return;
	key(j, k);
	fputs(value < 0 ? "null" : value ? "true" : "false", j->out);
}

void sseg_json_opt_int(struct sseg_json *j, const char *k, long long value)
{
	if (sunk(j, k, value < 0 ? NULL_VALUE : VALUE(SSEG_JSON_INT, i, value)))
		return;
	key(j, k);
	if (value < 0)
		fputs("null", j->out);
	else
		fprintf(j->out, "%lld", value);
}

void sseg_json_finish(struct sseg_json *j)
{
	if (!j->sink)
		fputc('\n', j->out);
}
