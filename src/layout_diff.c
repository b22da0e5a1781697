/* SPDX-License-Identifier: Apache-2.0 */
/* Naming how two layouts differ, from their canonical descriptions:
 * "v1;order=O;align=A;size=S;NAME:count=C,bytes=B,align=A,offset=F,shape=T;..."
 * Items are compared in order; within a block, the fields a caller sets
 * (count, shape, then the bytes and alignment a shape implies) before the
 * offset that follows from them. */
#include <stdio.h>
#include <string.h>

#include "layout.h"

struct span {
	const char *p;
	size_t n;
};

/* The next item of [*at, end) up to sep; false at the end. */
static bool next_item(const char **at, const char *end, char sep, struct span *item)
{
	const char *s = *at, *e;

	if (s >= end)
		return false;
	e = memchr(s, sep, (size_t)(end - s));
	if (!e)
		e = end;
	item->p = s;
	item->n = (size_t)(e - s);
	*at = e < end ? e + 1 : end;
	return true;
}

static bool same(const struct span *a, const struct span *b)
{
	return a->n == b->n && (a->n == 0 || !memcmp(a->p, b->p, a->n));
}

/* One block "NAME:f=v,f=v": the name and the fields in their order. */
static void split_block(const struct span *blk, struct span *name, struct span *fields)
{
	const char *colon = memchr(blk->p, ':', blk->n);

	name->p = blk->p;
	name->n = colon ? (size_t)(colon - blk->p) : blk->n;
	fields->p = colon ? colon + 1 : blk->p + blk->n;
	fields->n = blk->n - (size_t)(fields->p - blk->p);
}

/* The field named key ("count") in "f=v,f=v,shape=TEXT"; n = 0 when
 * absent. The shape comes last and may itself hold commas. */
static struct span field(const struct span *fields, const char *key)
{
	const char *at = fields->p, *end = fields->p + fields->n;
	size_t klen = strlen(key);
	struct span f = { NULL, 0 };

	while (next_item(&at, end, ',', &f)) {
		if (f.n < klen + 1 || memcmp(f.p, key, klen) || f.p[klen] != '=')
			continue;
		if (!strcmp(key, "shape"))
			f.n = (size_t)(end - f.p);
		return f;
	}
	f.n = 0;
	return f;
}

struct labels {
	const char *a, *b;
};

static int diff_block(const struct span *a, const struct span *b, int index,
		      const struct labels *l, char *out, size_t len)
{
	static const char *const keys[] = { "count", "shape", "bytes", "align", "offset" };
	struct span an, af, bn, bf;

	split_block(a, &an, &af);
	split_block(b, &bn, &bf);
	if (!same(&an, &bn)) {
		snprintf(out, len, "block %d: %s declared '%.*s', %s declared '%.*s'", index, l->a,
			 (int)an.n, an.p, l->b, (int)bn.n, bn.p);
		return 0;
	}
	for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
		struct span x = field(&af, keys[k]), y = field(&bf, keys[k]);

		if (!same(&x, &y)) {
			snprintf(out, len, "block '%.*s': %s declared %.*s, %s declared %.*s",
				 (int)an.n, an.p, l->a, (int)x.n, x.p, l->b, (int)y.n, y.p);
			return 0;
		}
	}
	snprintf(out, len, "block '%.*s': %s declared %.*s, %s declared %.*s", (int)an.n, an.p,
		 l->a, (int)af.n, af.p, l->b, (int)bf.n, bf.p);
	return 0;
}

/* The header items: v1, order=, align=, size=. */
#define HEADER_ITEMS 4

static bool is_size(const struct span *item)
{
	return item->n > 5 && !memcmp(item->p, "size=", 5);
}

/* The size follows from the blocks: it is named only when they agree. */
int sseg_layout_diff(const char *a, size_t a_len, const char *la, const char *b, size_t b_len,
		     const char *lb, char *out, size_t len)
{
	const struct labels l = { la, lb };
	const char *pa = a, *pb = b, *ea = a + a_len, *eb = b + b_len;
	struct span x, y, size_x = { NULL, 0 }, size_y = { NULL, 0 };
	int index = 0;

	for (int i = 0;; i++) {
		bool hx = next_item(&pa, ea, ';', &x), hy = next_item(&pb, eb, ';', &y);

		if (!hx && !hy)
			break;
		if (hx != hy) {
			const struct span *extra = hx ? &x : &y;
			struct span name, fields;

			split_block(extra, &name, &fields);
			snprintf(out, len, "%s declared a block '%.*s' that %s did not", hx ? la : lb,
				 (int)name.n, name.p, hx ? lb : la);
			return 0;
		}
		if (i < HEADER_ITEMS && is_size(&x)) {
			size_x = x;
			size_y = y;
			continue;
		}
		if (same(&x, &y)) {
			index += i >= HEADER_ITEMS;
			continue;
		}
		if (i < HEADER_ITEMS) {
			snprintf(out, len, "%s declared %.*s, %s declared %.*s", la, (int)x.n, x.p, lb,
				 (int)y.n, y.p);
			return 0;
		}
		return diff_block(&x, &y, index, &l, out, len);
	}
	if (same(&size_x, &size_y))
		return -ENOENT;
	snprintf(out, len, "%s declared %.*s, %s declared %.*s", la, (int)size_x.n, size_x.p, lb,
		 (int)size_y.n, size_y.p);
	return 0;
}
