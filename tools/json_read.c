/* SPDX-License-Identifier: Apache-2.0 */
/* A small JSON reader for the documents the library writes (probe, ls):
 * a tree of values, parsed from trusted text; malformed input answers
 * NULL. Strings keep their escapes resolved for the ASCII the library
 * writes (\" \\ \n \uXXXX below 0x80). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct parser {
	const char *p;
	int depth;
};

static void skip_space(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\t' || *ps->p == '\r')
		ps->p++;
}

static struct jval *new_value(enum jtype type)
{
	struct jval *v = calloc(1, sizeof(*v));

	if (v)
		v->type = type;
	return v;
}

static char *parse_string_text(struct parser *ps)
{
	size_t cap = 32, n = 0;
	char *out = malloc(cap);

	if (!out || *ps->p != '"')
		goto fail;
	for (ps->p++; *ps->p && *ps->p != '"'; ps->p++) {
		char c = *ps->p;

		if (c == '\\') {
			c = *++ps->p;
			if (c == 'n')
				c = '\n';
			else if (c == 't')
				c = '\t';
			else if (c == 'u') {
				c = (char)strtol((char[5]){ ps->p[1], ps->p[2], ps->p[3], ps->p[4], 0 },
						 NULL, 16);
				ps->p += 4;
			}
		}
		if (n + 2 > cap) {
			char *more = realloc(out, cap *= 2);

			if (!more)
				goto fail;
			out = more;
		}
		out[n++] = c;
	}
	if (*ps->p != '"')
		goto fail;
	ps->p++;
	out[n] = '\0';
	return out;
fail:
	free(out);
	return NULL;
}

static struct jval *parse_value(struct parser *ps);

static int append(struct jval *parent, struct jval *child, char *key)
{
	struct jval **more = realloc(parent->items, (size_t)(parent->n + 1) * sizeof(*more));

	if (!more)
		return -1;
	parent->items = more;
	child->key = key;
	parent->items[parent->n++] = child;
	return 0;
}

static struct jval *parse_container(struct parser *ps, char open, char close)
{
	struct jval *v = new_value(open == '{' ? JSON_OBJECT : JSON_ARRAY);

	if (!v || ++ps->depth > 64)
		goto fail;
	ps->p++;
	skip_space(ps);
	while (*ps->p && *ps->p != close) {
		char *key = NULL;
		struct jval *child;

		if (open == '{') {
			key = parse_string_text(ps);
			skip_space(ps);
			if (!key || *ps->p++ != ':') {
				free(key);
				goto fail;
			}
		}
		child = parse_value(ps);
		if (!child || append(v, child, key)) {
			free(key);
			json_value_free(child);
			goto fail;
		}
		skip_space(ps);
		if (*ps->p == ',')
			ps->p++;
		skip_space(ps);
	}
	if (*ps->p != close)
		goto fail;
	ps->p++;
	ps->depth--;
	return v;
fail:
	json_value_free(v);
	return NULL;
}

static struct jval *parse_value(struct parser *ps)
{
	struct jval *v;

	skip_space(ps);
	switch (*ps->p) {
	case '{':
		return parse_container(ps, '{', '}');
	case '[':
		return parse_container(ps, '[', ']');
	case '"':
		v = new_value(JSON_STRING);
		if (v && !(v->str = parse_string_text(ps))) {
			free(v);
			return NULL;
		}
		return v;
	case 't':
	case 'f':
	case 'n':
		v = new_value(*ps->p == 'n' ? JSON_NULL : JSON_BOOL);
		if (v)
			v->num = *ps->p == 't';
		ps->p += *ps->p == 'f' ? 5 : 4;
		return v;
	default:
		v = new_value(JSON_NUMBER);
		if (v)
			v->num = strtod(ps->p, (char **)&ps->p);
		return v;
	}
}

struct jval *json_parse(const char *text)
{
	struct parser ps = { text, 0 };

	return parse_value(&ps);
}

void json_value_free(struct jval *v)
{
	if (!v)
		return;
	for (int i = 0; i < v->n; i++)
		json_value_free(v->items[i]);
	free(v->items);
	free(v->key);
	free(v->str);
	free(v);
}

const struct jval *json_get(const struct jval *obj, const char *key)
{
	for (int i = 0; obj && obj->type == JSON_OBJECT && i < obj->n; i++)
		if (!strcmp(obj->items[i]->key, key))
			return obj->items[i];
	return NULL;
}

double json_num(const struct jval *obj, const char *key, double fallback)
{
	const struct jval *v = json_get(obj, key);

	return v && (v->type == JSON_NUMBER || v->type == JSON_BOOL) ? v->num : fallback;
}

const char *json_str(const struct jval *obj, const char *key)
{
	const struct jval *v = json_get(obj, key);

	return v && v->type == JSON_STRING ? v->str : "";
}
