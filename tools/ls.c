/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg ls: the segments live on this host, from /proc (the helper
 * library's scan, tools/lib/list.c), as a table or as its document. */
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "list_doc.h"

enum { OPT_JSON = 1 };

static const struct cli_opt ls_opts[] = {
	{ "json", false, OPT_JSON },
	{ NULL, false, 0 },
};

void ls_help(FILE *out)
{
	fprintf(out,
		"usage: sharedseg ls [--json]\n"
		"\n"
		"Lists every sharedseg segment live on this host that this user can see\n"
		"(root: every user's), from what the kernel shows: the memfd each owner\n"
		"names sseg:NAME, the tag each rank's window carries, the descriptors\n"
		"that still hold a memfd, and numa_maps. No daemon, nothing to clean up.\n"
		"The cuda and ascend backends' memory is the driver's, which /proc does not\n"
		"name: each rank maps a tag page instead, whose name declares the size, the\n"
		"pages and the rank (\"declared\" in the table and the JSON: a page of that\n"
		"name is all /proc shows), and what they map and hold resident is unknown\n"
		"(null).\n"
		"For each segment: name, whose it is (the user its owner runs as), size,\n"
		"page kind, NUMA nodes, host bytes resident, the owner's pid, and each\n"
		"process that maps it (pid, rank, command, mapped and resident bytes, and\n"
		"its user where that is another) or holds its memfd. A segment that no\n"
		"process maps any more but a descriptor keeps alive is marked UNMAPPED,\n"
		"unless the descriptor is a keeper's (sharedseg keep): \"kept by keeper\n"
		"NAME\", and the keeper's row reads rank \"keeper\".\n"
		"Then this user's host pools (sseg_pool_open; each found by its record in\n"
		"this user's runtime directory and read without taking a slot, or asked of\n"
		"this user's keepers when no process has it open): name, meaning, chunks\n"
		"and their size, pages, chunks used, being filled, free and pinned, hits,\n"
		"misses, stores, evictions, reclaims (slots of processes that died, freed)\n"
		"and resets (broken records found), the keeper that holds it, and each\n"
		"process that holds a slot (pid, slot, command).\n"
		"Names and commands are whatever bytes their processes chose: in the JSON\n"
		"each byte that is not UTF-8 reads as U+FFFD and controls as \\u00XX; the\n"
		"table shows every control as an escape (\\x1b, \\u202e) and \\ as \\\\.\n"
		"\n"
		"options:\n"
		"  --json       one JSON object: schema, segments [{name, uid, inode,\n"
		"               backend, size, declared, pages, page_size, resident_bytes,\n"
		"               numa_nodes [], world_size, owner_rank, owner_pid, unmapped,\n"
		"               kept_by, processes [{pid, uid, comm, rank, mapped_bytes,\n"
		"               resident_bytes, holds_fd, readonly, keeper}]}], pools\n"
		"               [{name, meaning, inode, chunk_size, chunks, size, pages,\n"
		"               page_size, used, filling, free, pinned, hits, misses, stores,\n"
		"               evictions, reclaims, duplicates, resets, last_reset, kept_by,\n"
		"               processes [{pid, slot, comm}]}], truncated (a cap was\n"
		"               reached: the rest are left out); unknown values are null\n"
		"  -h, --help   this text\n"
		"\n"
		"examples:\n"
		"  sharedseg ls\n"
		"  sharedseg ls --json | python3 -m json.tool\n");
}

/* A name or command another process chose, for the table: as the JSON
 * holds it (each ill-formed byte as U+FFFD), then every control escaped. */
static const char *shown(const char *raw, char *buf, size_t len)
{
	char text[1024];

	sseg_json_utf8(raw, text, sizeof(text));
	return cli_visible(text, buf, len);
}

/* "user NAME" for a uid ("user 1234" without a passwd entry, "user ?"
 * unknown): another user's segment of a name must not read as one's own. */
static const char *user_of(int64_t uid, char *buf, size_t len)
{
	struct passwd pw, *found = NULL;
	char text[1024], name[128];

	if (uid < 0) {
		snprintf(buf, len, "user ?");
		return buf;
	}
	if (getpwuid_r((uid_t)uid, &pw, text, sizeof(text), &found) || !found)
		snprintf(buf, len, "user %lld", (long long)uid);
	else
		snprintf(buf, len, "user %s", cli_visible(found->pw_name, name, sizeof(name)));
	return buf;
}

/* bytes as a size, when known; "?" when not (driver memory). */
static void known_size(bool known, uint64_t bytes, char *buf, size_t len)
{
	if (known)
		cli_format_size(bytes, buf, len);
	else
		snprintf(buf, len, "?");
}

/* A process that is not the segment's user says whose it is. seen: its
 * mappings are in /proc (a memfd's). */
static void print_process(const struct sseg_list *l, const struct sseg_holder *h, bool seen,
			  const char *seg_user)
{
	const struct sseg_listed_process *p = &l->procs[h->process];
	char mapped[32], resident[32], rank[16] = "?", comm[128], user[160];

	if (h->rank >= 0)
		snprintf(rank, sizeof(rank), "%d", h->rank);
	else if (p->keeper[0] && h->fd)
		snprintf(rank, sizeof(rank), "keeper");
	known_size(seen, h->mapped, mapped, sizeof(mapped));
	known_size(seen, h->resident, resident, sizeof(resident));
	user_of(p->uid, user, sizeof(user));
	printf("    pid %-8d rank %-4s %-16s mapped %-11s resident %-11s%s%s%s%s\n", p->pid, rank,
	       shown(p->comm, comm, sizeof(comm)), mapped, resident, h->fd ? " holds fd" : "",
	       h->mapped && h->readonly ? " read-only" : "", strcmp(user, seg_user) ? " " : "",
	       strcmp(user, seg_user) ? user : "");
}

static void print_segment(const struct sseg_list *l, const struct sseg_listed *s)
{
	char size[48], resident[96], owner[64] = "owner gone or unknown";
	char name[512], pages[128], backend[128], user[160];
	struct sseg_list_facts f;
	bool nodes = false;

	sseg_list_facts(l, s, &f);
	cli_format_size(f.size, size, sizeof(size));
	if (!s->ino) /* driver memory: what its tags say; /proc shows none of it */
		strcat(size, " declared");
	if (s->ino)
		cli_format_size(f.resident, resident, sizeof(resident));
	else
		snprintf(resident, sizeof(resident), "? (%s driver memory)",
			 shown(s->backend, backend, sizeof(backend)));
	if (f.owner_pid >= 0)
		snprintf(owner, sizeof(owner), "owner rank %d pid %d", s->owner_rank, f.owner_pid);
	printf("%s  %s, %s, %s pages, %s resident, nodes", shown(s->name, name, sizeof(name)),
	       user_of(f.uid, user, sizeof(user)), size, shown(f.kind, pages, sizeof(pages)),
	       resident);
	for (int n = 0; n < 64; n++)
		if (s->numa_nodes & (1ull << n)) {
			printf("%s%d", nodes ? "," : " ", n);
			nodes = true;
		}
	if (f.kept_by)
		printf("%s, %s, kept by keeper %s%s\n", nodes ? "" : " ?", owner,
		       shown(f.kept_by, name, sizeof(name)),
		       s->ino && !f.mapped ? " (no group maps it)" : "");
	else
		printf("%s, %s%s\n", nodes ? "" : " ?", owner,
		       s->ino && !f.mapped ? ", UNMAPPED (held by a descriptor only)" : "");
	for (int i = s->first; i >= 0; i = l->holders[i].next)
		print_process(l, &l->holders[i], s->ino != 0, user);
}

static void print_pool(const struct sseg_listed_pool *x)
{
	const struct sseg_pool_info *in = &x->info;
	char name[512], meaning[2048], chunk[32], size[32], comm[128], keeper[256];

	cli_format_size(in->chunk_size, chunk, sizeof(chunk));
	cli_format_size(in->size, size, sizeof(size));
	printf("pool %s  \"%s\", %llu chunks of %s (%s, %s pages)%s%s\n",
	       shown(in->name, name, sizeof(name)), shown(in->meaning, meaning, sizeof(meaning)),
	       (unsigned long long)in->chunks, chunk, size, sseg_pages_name(in->pages),
	       x->kept_by[0] ? ", kept by keeper " : "",
	       x->kept_by[0] ? shown(x->kept_by, keeper, sizeof(keeper)) : "");
	printf("    chunks: %llu used, %llu filling, %llu free, %llu pinned\n",
	       (unsigned long long)in->used, (unsigned long long)in->filling,
	       (unsigned long long)in->free, (unsigned long long)in->pinned);
	printf("    hits %llu, misses %llu, stores %llu, evictions %llu, reclaims %llu, "
	       "resets %llu\n", (unsigned long long)in->hits, (unsigned long long)in->misses,
	       (unsigned long long)in->stores, (unsigned long long)in->evictions,
	       (unsigned long long)in->reclaims, (unsigned long long)in->resets);
	if (in->last_reset[0])
		printf("    last reset: %s\n", shown(in->last_reset, meaning, sizeof(meaning)));
	for (int s = 0; s < (int)SSEG_POOL_SLOTS; s++)
		if (x->pids[s])
			printf("    pid %-8d slot %-3d %s\n", x->pids[s], s,
			       shown(x->comms[s], comm, sizeof(comm)));
}

static void print_table(const struct sseg_list *l)
{
	if (l->n == 0)
		printf("no sharedseg segment is live on this host (that this user can see)\n");
	for (int i = 0; i < l->n; i++)
		print_segment(l, &l->segs[i]);
	for (int i = 0; i < l->npools; i++)
		print_pool(&l->pools[i]);
	if (l->truncated)
		printf("(truncated: this host has more segments or holdings than one listing "
		       "holds; the rest are left out)\n");
}

int ls_main(int argc, char **argv)
{
	struct cli_args a = { "ls", argc, argv, 1 };
	struct sseg_list l;
	bool as_json = false;
	const char *v;
	int id;

	while ((id = cli_next(&a, ls_opts, &v)) != CLI_OPT_END) {
		if (id == CLI_OPT_HELP) {
			ls_help(stdout);
			return CLI_OK;
		}
		if (id == CLI_OPT_BAD)
			return CLI_USAGE;
		as_json = id == OPT_JSON;
	}
	if (sseg_list_scan(&l)) {
		fprintf(stderr, "sharedseg ls: %s\n", sseg_last_error());
		return CLI_FAIL;
	}
	if (as_json) {
		struct sseg_json j;

		sseg_json_init(&j, stdout, SSEG_JSON_PRETTY);
		sseg_list_document(&j, &l);
		sseg_json_finish(&j);
	} else {
		print_table(&l);
	}
	sseg_list_free(&l);
	return CLI_OK;
}
