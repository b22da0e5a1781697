/* SPDX-License-Identifier: Apache-2.0 */
/* The one JSON writer (tools/lib/json.c) in its three styles, and to a
 * sink: strings of any bytes come out escaped and valid UTF-8; the indented
 * style (what `sharedseg ls --json` and `probe --json` print) holds every
 * string and number of the compact one byte for byte, whatever quotes,
 * backslashes and punctuation its strings hold, and only its layout
 * changes; a sink (the Python extension's) gets the same values, in
 * order, its strings as the text holds them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "testutil.h"

/* Strings that end early, or late, in a reader that gets escapes wrong. */
static const char *const hostile[] = {
	"q\"uote", "x\":y", "q\"a,b", "a\\\"{b", "tail\\", "\"", "\\\\\"", "nl\nx", "t\tx",
	"ctl\x01\x1f\x7f\xc2\x85", "ok \xc3\xbc \xe2\x9c\x93 \xf0\x9f\x98\x80", "bad\xff\xc0\xaf",
	"cut\xe2\x80", "sur\xed\xa0\x80", "[]{}:,", "",
};
#define NHOSTILE (sizeof(hostile) / sizeof(hostile[0]))

static void document(struct sseg_json *j)
{
	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "schema", 1);
	sseg_json_begin(j, "names", '[');
	for (size_t i = 0; i < NHOSTILE; i++)
		sseg_json_str(j, NULL, hostile[i]);
	sseg_json_end(j, ']');
	sseg_json_begin(j, "by key", '{');
	for (size_t i = 0; i < NHOSTILE; i++)
		sseg_json_u64(j, hostile[i], UINT64_MAX - i);
	sseg_json_end(j, '}');
	sseg_json_begin(j, "empty", '[');
	sseg_json_end(j, ']');
	sseg_json_begin(j, "nested", '[');
	sseg_json_begin(j, NULL, '{');
	sseg_json_end(j, '}');
	sseg_json_double(j, NULL, 0.5);
	sseg_json_double(j, NULL, NAN);
	sseg_json_str(j, NULL, NULL);
	sseg_json_tristate(j, NULL, -1);
	sseg_json_opt_int(j, NULL, -2);
	sseg_json_bool(j, NULL, false);
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
}

/* What a writer of that style makes of a document. */
static char *written(enum sseg_json_style style, void (*doc)(struct sseg_json *j))
{
	struct sseg_json j;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	CHECK(f);
	sseg_json_init(&j, f, style);
	doc(&j);
	CHECK(fclose(f) == 0 && out);
	return out;
}

/* text less the white space outside its strings. */
static char *squeezed(const char *text)
{
	char *out = malloc(strlen(text) + 1), *o = out;
	bool in_string = false;

	CHECK(out);
	for (const char *p = text; *p; p++) {
		if (in_string && *p == '\\') {
			*o++ = *p++;
		} else if (*p == '"') {
			in_string = !in_string;
		} else if (!in_string && (*p == ' ' || *p == '\n')) {
			continue;
		}
		*o++ = *p;
	}
	*o = '\0';
	return out;
}

static void escapes(void)
{
	char *compact = written(SSEG_JSON_COMPACT, document);

	/* Every escape the writer makes, and U+FFFD for each bad byte. */
	CHECK(strstr(compact, "\"q\\\"uote\",\"x\\\":y\",\"q\\\"a,b\",\"a\\\\\\\"{b\",\"tail\\\\\""));
	CHECK(strstr(compact, "\"nl\\nx\",\"t\\u0009x\",\"ctl\\u0001\\u001f\\u007f\\u0085\""));
	CHECK(strstr(compact, "\"ok \xc3\xbc \xe2\x9c\x93 \xf0\x9f\x98\x80\""));
	CHECK(strstr(compact, "\"bad\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""));
	CHECK(strstr(compact, "\"cut\xef\xbf\xbd\xef\xbf\xbd\",\"sur\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""));
	CHECK(strstr(compact, "\"empty\":[],\"nested\":[{},0.5,null,null,null,null,false]}"));
	CHECK(strstr(compact, "{\"schema\":1,\"names\":[\"q"));
	free(compact);
}

static void small(struct sseg_json *j)
{
	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "a", 1);
	sseg_json_begin(j, "b", '[');
	sseg_json_int(j, NULL, 2);
	sseg_json_begin(j, NULL, '{');
	sseg_json_str(j, "c", "x\":[y");
	sseg_json_end(j, '}');
	sseg_json_end(j, ']');
	sseg_json_begin(j, "d", '{');
	sseg_json_end(j, '}');
	sseg_json_begin(j, "e", '[');
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
}

/* Each style's layout, on a small document. */
static void styles(void)
{
	char *compact = written(SSEG_JSON_COMPACT, small);
	char *line = written(SSEG_JSON_LINE, small);
	char *pretty = written(SSEG_JSON_PRETTY, small);

	CHECK(!strcmp(compact, "{\"a\":1,\"b\":[2,{\"c\":\"x\\\":[y\"}],\"d\":{},\"e\":[]}"));
	CHECK(!strcmp(line, "{\"a\": 1, \"b\": [2, {\"c\": \"x\\\":[y\"}], \"d\": {}, \"e\": []}"));
	CHECK(!strcmp(pretty, "{\n"
			      "  \"a\": 1,\n"
			      "  \"b\": [\n"
			      "    2,\n"
			      "    {\n"
			      "      \"c\": \"x\\\":[y\"\n"
			      "    }\n"
			      "  ],\n"
			      "  \"d\": {},\n"
			      "  \"e\": []\n"
			      "}"));
	free(compact);
	free(line);
	free(pretty);
}

/* The hostile document indented: its strings and numbers untouched. */
static void indented(void)
{
	char *compact = written(SSEG_JSON_COMPACT, document);
	char *pretty = written(SSEG_JSON_PRETTY, document);
	char *back = squeezed(pretty);

	CHECK(!strcmp(back, compact));
	CHECK(strstr(pretty, "\n    \"x\\\":y\",\n"));
	CHECK(strstr(pretty, "\n    \"x\\\":y\": 18446744073709551614,\n"));
	free(back);
	free(pretty);
	free(compact);
}

/* ---- a sink: the values in order, as the text holds them ---- */

struct heard {
	char text[4096];
	size_t n;
};

static void say(struct heard *h, const char *what)
{
	size_t len = strlen(what);

	CHECK(h->n + len < sizeof(h->text));
	memcpy(h->text + h->n, what, len + 1);
	h->n += len;
}

static void on_begin(void *ctx, const char *key, char bracket)
{
	char what[256];

	snprintf(what, sizeof(what), "%s%c", key ? key : "", bracket);
	say(ctx, what);
}

static void on_end(void *ctx, char bracket)
{
	char what[2] = { bracket, 0 };

	say(ctx, what);
}

static void on_value(void *ctx, const char *key, const struct sseg_json_value *v)
{
	char what[512], clean[256];
	int n = key ? snprintf(what, sizeof(what), "%s=", key) : 0;

	switch (v->kind) {
	case SSEG_JSON_NULL:
		snprintf(what + n, sizeof(what) - (size_t)n, "null;");
		break;
	case SSEG_JSON_BOOL:
		snprintf(what + n, sizeof(what) - (size_t)n, "%s;", v->b ? "true" : "false");
		break;
	case SSEG_JSON_INT:
		snprintf(what + n, sizeof(what) - (size_t)n, "%lld;", v->i);
		break;
	case SSEG_JSON_U64:
		snprintf(what + n, sizeof(what) - (size_t)n, "%llu;", (unsigned long long)v->u);
		break;
	case SSEG_JSON_DOUBLE:
		snprintf(what + n, sizeof(what) - (size_t)n, "%g;", v->d);
		break;
	case SSEG_JSON_STRING:
		CHECK(sseg_json_utf8(v->s, clean, sizeof(clean)) < sizeof(clean));
		snprintf(what + n, sizeof(what) - (size_t)n, "'%s';", clean);
		break;
	}
	say(ctx, what);
}

static void sunk(void)
{
	struct heard h = { .n = 0 };
	struct sseg_json_sink sink = { on_begin, on_end, on_value, &h };
	struct sseg_json j;
	char cut[8];

	sseg_json_init_sink(&j, &sink);
	document(&j);
	sseg_json_finish(&j); /* nothing for a sink */
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", h.text);
	CHECK(!strncmp(h.text, "{schema=1;names['q\"uote';", 25));
	CHECK(strstr(h.text, "'bad\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd';"));
	CHECK(strstr(h.text, "'nl\nx';'t\tx';'ctl\x01\x1f\x7f\xc2\x85';"));
	CHECK(strstr(h.text, "]by key{q\"uote=18446744073709551615;"));
	CHECK(strstr(h.text, "empty[]nested[{}0.5;null;null;null;null;false;]}"));
	/* utf8's length is the whole one, as snprintf's: a short buffer cuts. */
	CHECK(sseg_json_utf8("bad\xff", cut, sizeof(cut)) == 6 && !strcmp(cut, "bad\xef\xbf\xbd"));
	CHECK(sseg_json_utf8("bad\xff", cut, 5) == 6 && strlen(cut) == 4);
}

int main(void)
{
	escapes();
	styles();
	indented();
	sunk();
	printf("json: ok\n");
	return 0;
}
