/* SPDX-License-Identifier: Apache-2.0 */
/* A scan (list.c) as the document of `sharedseg ls --json` and of Python's
 * sharedseg.list_segments(), and the facts the table shows. */
#include <string.h>

#include "list_doc.h"
#include "list_pools.h"

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

/* A segment's page kind and size, from its mappers; what is resident, and
 * its size where no descriptor gave one. */
static void page_facts(const struct sseg_list *l, const struct sseg_listed *s,
		       struct sseg_list_facts *f)
{
	uint64_t thp = 0;

	f->kind = "base";
	f->page = 4096;
	f->resident = s->allocated;
	f->size = s->size;
	for (int i = s->first; i >= 0; i = l->holders[i].next) {
		const struct sseg_holder *x = &l->holders[i];

		if (x->page_size > f->page)
			f->page = x->page_size;
		if (x->thp > thp)
			thp = x->thp;
		if (!s->allocated && x->resident > f->resident)
			f->resident = x->resident;
		if (!s->size && x->mapped > f->size)
			f->size = x->mapped;
	}
	if (f->page == (2u << 20))
		f->kind = "hugetlb-2M";
	else if (f->page == (1u << 30))
		f->kind = "hugetlb-1G";
	else if (thp)
		f->kind = "thp";
	if (s->pages[0]) /* driver memory: what its tags declare */
		f->kind = s->pages;
	if (s->page_size)
		f->page = s->page_size;
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

void sseg_list_facts(const struct sseg_list *l, const struct sseg_listed *s,
		     struct sseg_list_facts *f)
{
	memset(f, 0, sizeof(*f));
	page_facts(l, s, f);
	for (int i = s->first; i >= 0; i = l->holders[i].next) {
		const struct sseg_holder *h = &l->holders[i];
		const struct sseg_listed_process *p = &l->procs[h->process];

		if (!f->kept_by && p->keeper[0] && h->fd)
			f->kept_by = p->keeper;
		f->mapped |= h->mapped > 0;
		if (!f->owner && s->owner_rank >= 0 && h->rank == s->owner_rank)
			f->owner = h;
	}
	f->uid = segment_uid(l, s, f->owner);
	f->owner_pid = f->owner ? l->procs[f->owner->process].pid : -1;
}

static void segment_facts(struct sseg_json *j, const struct sseg_list *l,
			  const struct sseg_listed *s)
{
	struct sseg_list_facts f;

	sseg_list_facts(l, s, &f);
	sseg_json_begin(j, NULL, '{');
	sseg_json_str(j, "name", s->name);
	sseg_json_opt_int(j, "uid", f.uid);
	/* Driver memory: no inode, and /proc does not show what is resident. */
	sseg_json_opt_int(j, "inode", s->ino ? (long long)s->ino : -1);
	sseg_json_str(j, "backend", s->backend);
	sseg_json_u64(j, "size", f.size);
	/* Driver memory: size, pages and ranks are what its tag pages say. */
	sseg_json_bool(j, "declared", !s->ino);
	sseg_json_str(j, "pages", f.kind);
	sseg_json_u64(j, "page_size", f.page);
	sseg_json_opt_int(j, "resident_bytes", s->ino ? (long long)f.resident : -1);
	sseg_json_begin(j, "numa_nodes", '[');
	for (int n = 0; n < 64; n++)
		if (s->numa_nodes & (1ull << n))
			sseg_json_int(j, NULL, n);
	sseg_json_end(j, ']');
	sseg_json_opt_int(j, "world_size", s->world);
	sseg_json_opt_int(j, "owner_rank", s->owner_rank);
	sseg_json_opt_int(j, "owner_pid", f.owner_pid);
	/* Mapped by nobody, held only by a descriptor: a leak to look at
	 * (driver memory is listed from the tag pages its ranks map). */
	sseg_json_bool(j, "unmapped", s->ino && !f.mapped);
	sseg_json_str(j, "kept_by", f.kept_by);
	sseg_json_begin(j, "processes", '[');
	for (int i = s->first; i >= 0; i = l->holders[i].next)
		process_facts(j, l, &l->holders[i], s->ino != 0);
	sseg_json_end(j, ']');
	sseg_json_end(j, '}');
}

void sseg_list_document(struct sseg_json *j, const struct sseg_list *l)
{
	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "schema", 1);
	/* A cap was reached: segments or holders were left out. */
	sseg_json_bool(j, "truncated", l->truncated);
	sseg_json_begin(j, "segments", '[');
	for (int i = 0; i < l->n; i++)
		segment_facts(j, l, &l->segs[i]);
	sseg_json_end(j, ']');
	sseg_list_pools_document(j, l);
	sseg_json_end(j, '}');
}
