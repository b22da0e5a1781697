/* SPDX-License-Identifier: Apache-2.0 */
/* sseg_list_json: a scan (list.c) as the JSON document of `sharedseg ls
 * --json`, and one scan per document however large. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_doc.h"
#include "list_json.h"

/* seen: its mappings of the segment are in /proc (a memfd's), so what it
 * maps and what is resident are known. */
static void process_facts(struct sseg_json *j, const struct sseg_list *l,
			  const struct sseg_holder *h, bool seen)
{
	const struct sseg_listed_process *p = &l->procs[h->process];

	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "pid", p->pid);
	sseg_json_opt_int(j, "uid", p->uid);
	sseg_json_str(j, "comm", p->comm);
	sseg_json_opt_int(j, "rank", h->rank);
	sseg_json_opt_int(j, "mapped_bytes", seen ? (long long)h->mapped : -1);
	sseg_json_opt_int(j, "resident_bytes", seen ? (long long)h->resident : -1);
	sseg_json_bool(j, "holds_fd", h->fd);
	/* A keeper's own tag says it: what it holds outlives the group. */
	sseg_json_str(j, "keeper", p->keeper[0] && h->fd ? p->keeper : NULL);
	sseg_json_bool(j, "readonly", h->mapped && h->readonly);
	sseg_json_end(j, '}');
}

struct page_facts {
	const char *kind;
	uint64_t page, resident, size;
};

/* What a segment is made of, from its mappers: page kind and size. */
static struct page_facts page_facts(const struct sseg_list *l, const struct sseg_listed *s)
{
	struct page_facts f = { "base", 4096, s->allocated, s->size };
	uint64_t thp = 0;

	for (int i = s->first; i >= 0; i = l->holders[i].next) {
		const struct sseg_holder *x = &l->holders[i];

		if (x->page_size > f.page)
			f.page = x->page_size;
		if (x->thp > thp)
			thp = x->thp;
		if (!s->allocated && x->resident > f.resident)
			f.resident = x->resident;
		if (!s->size && x->mapped > f.size)
			f.size = x->mapped;
	}
	if (f.page == (2u << 20))
		f.kind = "hugetlb-2M";
	else if (f.page == (1u << 30))
		f.kind = "hugetlb-1G";
	else if (thp)
		f.kind = "thp";
	return f;
}

/* Whose it is: driver memory's ranks' uid (its key); else the uid its
 * owner runs as, else the one all its processes share; -1 when unknown or
 * they differ. */
static int64_t segment_uid(const struct sseg_list *l, const struct sseg_listed *s,
			   const struct sseg_holder *owner)
{
	int64_t uid = -1;

	if (!s->ino)
		return s->uid;
	if (owner)
		return l->procs[owner->process].uid;
	for (int i = s->first; i >= 0; i = l->holders[i].next) {
		int64_t u = l->procs[l->holders[i].process].uid;

		if (u < 0 || (uid >= 0 && u != uid))
			return -1;
		uid = u;
	}
	return uid;
}

static void segment_facts(struct sseg_json *j, const struct sseg_list *l,
			  const struct sseg_listed *s)
{
	struct page_facts f = page_facts(l, s);
	const struct sseg_holder *owner = NULL;
	const char *kept_by = NULL;
	bool mapped = false;

	for (int i = s->first; i >= 0; i = l->holders[i].next) {
		const struct sseg_listed_process *p = &l->procs[l->holders[i].process];

		if (!kept_by && p->keeper[0] && l->holders[i].fd)
			kept_by = p->keeper;
		mapped |= l->holders[i].mapped > 0;
		if (!owner && s->owner_rank >= 0 && l->holders[i].rank == s->owner_rank)
			owner = &l->holders[i];
	}
	sseg_json_begin(j, NULL, '{');
	sseg_json_str(j, "name", s->name);
	sseg_json_opt_int(j, "uid", segment_uid(l, s, owner));
	/* Driver memory: no inode, and /proc does not show what is resident. */
	sseg_json_opt_int(j, "inode", s->ino ? (long long)s->ino : -1);
	sseg_json_str(j, "backend", s->backend);
	sseg_json_u64(j, "size", f.size);
	/* Driver memory: size, pages and ranks are what its tag pages say. */
	sseg_json_bool(j, "declared", !s->ino);
	sseg_json_str(j, "pages", s->pages[0] ? s->pages : f.kind);
	sseg_json_u64(j, "page_size", s->page_size ? s->page_size : f.page);
	sseg_json_opt_int(j, "resident_bytes", s->ino ? (long long)f.resident : -1);
	sseg_json_begin(j, "numa_nodes", '[');
	for (int n = 0; n < 64; n++)
		if (s->numa_nodes & (1ull << n))
			sseg_json_int(j, NULL, n);
	sseg_json_end(j, ']');
	sseg_json_opt_int(j, "world_size", s->world);
	sseg_json_opt_int(j, "owner_rank", s->owner_rank);
	sseg_json_opt_int(j, "owner_pid", owner ? l->procs[owner->process].pid : -1);
	/* Mapped by nobody, held only by a descriptor: a leak to look at
	 * (driver memory is listed from the tag pages its ranks map). */
	sseg_json_bool(j, "unmapped", s->ino && !mapped);
	sseg_json_str(j, "kept_by", kept_by);
	sseg_json_begin(j, "processes", '[');
	for (int i = s->first; i >= 0; i = l->holders[i].next)
		process_facts(j, l, &l->holders[i], s->ino != 0);
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
}

static void document(struct sseg_json *j, const void *ctx)
{
	const struct sseg_list *l = ctx;

	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "schema", 1);
	/* A cap was reached: segments or holders were left out. */
	sseg_json_bool(j, "truncated", l->truncated);
	sseg_json_begin(j, "segments", '[');
	for (int i = 0; i < l->n; i++)
		segment_facts(j, l, &l->segs[i]);
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
}

int sseg_list_render(const struct sseg_list *l, char *buf, size_t len)
{
	return sseg_json_render(document, l, buf, len);
}

/* ---- one scan per document ---- */

/* The text of a call whose buffer was too small: the same thread's next
 * call, soon after and with a larger buffer (snprintf's pattern: the
 * length, then the text; or a buffer grown until it fits), gets this
 * document rather than a second scan of /proc. A call with the same buffer
 * again scans afresh. */
#define KEPT_S 5.0

static struct {
	pthread_mutex_t lock;
	char *text;
	size_t len, asked;
	pthread_t thread;
	double when;
} kept = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int copy_out(const char *text, size_t n, char *buf, size_t len)
{
	if (len) {
		size_t copy = n < len ? n : len - 1;

		memcpy(buf, text, copy);
		buf[copy] = '\0';
	}
	return (int)n;
}

/* The kept document into buf, if it is for this call: true. It is dropped
 * once it fits, once stale, or when its thread asks with no larger buffer;
 * another thread's is left alone. */
static bool take_kept(char *buf, size_t len, int *rc)
{
	bool fresh, thread, mine;

	pthread_mutex_lock(&kept.lock);
	fresh = kept.text && sseg_now() - kept.when < KEPT_S;
	thread = fresh && pthread_equal(kept.thread, pthread_self());
	mine = thread && len > kept.asked;
	if (mine) {
		*rc = copy_out(kept.text, kept.len, buf, len);
		kept.asked = len;
	}
	if (kept.text && (!fresh || (thread && !mine) || (mine && len > kept.len))) {
		free(kept.text);
		kept.text = NULL;
	}
	pthread_mutex_unlock(&kept.lock);
	return mine;
}

static void keep(char *text, size_t n, size_t asked)
{
	pthread_mutex_lock(&kept.lock);
	free(kept.text);
	kept.text = text;
	kept.len = n;
	kept.asked = asked;
	kept.thread = pthread_self();
	kept.when = sseg_now();
	pthread_mutex_unlock(&kept.lock);
}

int sseg_list_json(char *buf, size_t len)
{
	struct sseg_list l;
	char *text;
	size_t n;
	int rc;

	if (!buf && len)
		return sseg_err(-EINVAL, "sseg_list_json: buf is NULL but len is %zu", len);
	if (take_kept(buf, len, &rc))
		return rc;
	rc = sseg_list_scan(&l);
	if (rc)
		return rc;
	rc = sseg_json_text(document, &l, &text, &n);
	sseg_list_free(&l);
	if (rc)
		return rc;
	rc = copy_out(text, n, buf, len);
	if (n >= len)
		keep(text, n, len);
	else
		free(text);
	return rc;
}
