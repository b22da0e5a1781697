/* SPDX-License-Identifier: Apache-2.0 */
/* The one JSON writer (json.h): compact, one line, or indented. */
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

void sseg_json_begin(struct sseg_json *j, const char *k, char bracket)
{
	key(j, k);
	open_container(j, bracket);
}

void sseg_json_end(struct sseg_json *j, char bracket)
{
	bool empty = j->first[j->depth];

	if (j->depth > 0)
		j->depth--;
	if (j->style == SSEG_JSON_PRETTY && !empty)
		fprintf(j->out, "\n%*s", 2 * j->depth, "");
	fputc(bracket, j->out);
}

void sseg_json_str(struct sseg_json *j, const char *k, const char *value)
{
	key(j, k);
	if (value)
		put_string(j->out, value);
	else
		fputs("null", j->out);
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

void sseg_json_double(struct sseg_json *j, const char *k, double value)
{
	key(j, k);
	if (isfinite(value))
		fprintf(j->out, "%.9g", value);
	else
		fputs("null", j->out);
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

/* Past the string token at p (its opening quote): a backslash escapes the
 * next byte, whatever it is. */
static const char *string_end(const char *p)
{
	for (p++; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p ? p + 1 : p;
}

void sseg_json_copy(struct sseg_json *j, const char *k, const char *text)
{
	bool keyed = k != NULL; /* the next value follows its key */
	const char *p = text, *end;

	if (k)
		key(j, k);
	while (*p) {
		if (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') {
			p++; /* the writer puts its own separators */
			continue;
		}
		if (*p == '}' || *p == ']') {
			sseg_json_end(j, *p++);
			continue;
		}
		if (!keyed)
			item(j);
		keyed = false;
		if (*p == '{' || *p == '[') {
			open_container(j, *p++);
			continue;
		}
		end = *p == '"' ? string_end(p) : p + strcspn(p, ",:]} \n\t\r");
		fwrite(p, 1, (size_t)(end - p), j->out);
		p = end;
		if (*p == ':') {
			colon(j);
			keyed = true;
			p++;
		}
	}
}

void sseg_json_finish(struct sseg_json *j)
{
	fputc('\n', j->out);
}
