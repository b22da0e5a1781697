/* SPDX-License-Identifier: Apache-2.0 */
/* The one JSON writer (src/json.c) in its three styles: strings of any
 * bytes come out escaped and valid UTF-8; a compact document copied into
 * the indented style (what `sharedseg ls --json` and `probe --json` print)
 * keeps every string and number byte for byte, whatever quotes,
 * backslashes and punctuation its strings hold, and only its layout
 * changes. */
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

/* What a writer of that style makes: by hand (write), or by copying text. */
static char *written(enum sseg_json_style style, const char *text)
{
	struct sseg_json j;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	CHECK(f);
	sseg_json_init(&j, f, style);
	if (text)
		sseg_json_copy(&j, NULL, text);
	else
		document(&j);
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
	char *compact = written(SSEG_JSON_COMPACT, NULL);

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

/* Each style's layout, on a small document. */
static void styles(void)
{
	const char *compact = "{\"a\":1,\"b\":[2,{\"c\":\"x\\\":[y\"}],\"d\":{},\"e\":[]}";
	char *line = written(SSEG_JSON_LINE, compact);
	char *pretty = written(SSEG_JSON_PRETTY, compact);
	char *again = written(SSEG_JSON_COMPACT, pretty);

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
	CHECK(!strcmp(again, compact)); /* and back */
	free(line);
	free(pretty);
	free(again);
}

/* The hostile document indented: its strings and numbers untouched. */
static void copies(void)
{
	char *compact = written(SSEG_JSON_COMPACT, NULL);
	char *by_hand = written(SSEG_JSON_PRETTY, NULL);
	char *pretty = written(SSEG_JSON_PRETTY, compact);
	char *back = squeezed(pretty);

	CHECK(!strcmp(pretty, by_hand)); /* the same text as written in that style */
	CHECK(!strcmp(back, compact));
	CHECK(strstr(pretty, "\n    \"x\\\":y\",\n"));
	CHECK(strstr(pretty, "\n    \"x\\\":y\": 18446744073709551614,\n"));
	free(back);
	free(pretty);
	free(by_hand);
	free(compact);
}

int main(void)
{
	escapes();
	styles();
	copies();
	printf("json: ok\n");
	return 0;
}
