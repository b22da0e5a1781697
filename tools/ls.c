/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg ls: the segments live on this host, from /proc (the library's
 * sseg_list_json), as a table or as the JSON itself. */
#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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
		"Names and commands are whatever bytes their processes chose: in the JSON\n"
		"each byte that is not UTF-8 reads as U+FFFD and controls as \\u00XX; the\n"
		"table shows every control as an escape (\\x1b, \\u202e) and \\ as \\\\.\n"
		"\n"
		"options:\n"
		"  --json       one JSON object: schema, segments [{name, uid, inode,\n"
		"               backend, size, declared, pages, page_size, resident_bytes,\n"
		"               numa_nodes [], world_size, owner_rank, owner_pid, unmapped,\n"
		"               kept_by, processes [{pid, uid, comm, rank, mapped_bytes,\n"
		"               resident_bytes, holds_fd, readonly, keeper}]}], truncated (a cap\n"
		"               was reached: the rest are left out); unknown values are\n"
		"               null\n"
		"  -h, --help   this text\n"
		"\n"
		"examples:\n"
		"  sharedseg ls\n"
		"  sharedseg ls --json | python3 -m json.tool\n");
}

/* The library's document at its exact size: one scan of /proc (the
 * library keeps the text the first, sizing call found too long). */
static char *list_text(void)
{
	char *text = NULL;
	int n = sseg_list_json(NULL, 0), m;

	while (n >= 0) {
		free(text);
		text = malloc((size_t)n + 1);
		if (!text)
			return NULL;
		m = sseg_list_json(text, (size_t)n + 1);
		if (m >= 0 && m <= n)
			return text;
		n = m; /* it grew in between */
	}
	free(text);
	errno = -n;
	return NULL;
}

/* "user NAME" for obj's uid ("user 1234" without a passwd entry, "user ?"
 * unknown): another user's segment of a name must not read as one's own. */
static const char *user_of(const struct jval *obj, char *buf, size_t len)
{
	double uid = json_num(obj, "uid", -1);
	struct passwd pw, *found = NULL;
	char text[1024], name[128];

	if (uid < 0) {
		snprintf(buf, len, "user ?");
		return buf;
	}
	if (getpwuid_r((uid_t)uid, &pw, text, sizeof(text), &found) || !found)
		snprintf(buf, len, "user %.0f", uid);
	else
		snprintf(buf, len, "user %s", cli_visible(found->pw_name, name, sizeof(name)));
	return buf;
}

/* obj's key as a size; "?" when it is unknown (null). */
static void known_size(const struct jval *obj, const char *key, char *buf, size_t len)
{
	if (json_num(obj, key, -1) >= 0)
		cli_format_size((uint64_t)json_num(obj, key, 0), buf, len);
	else
		snprintf(buf, len, "?");
}

/* A process that is not the segment's user says whose it is. */
static void print_process(const struct jval *p, const char *seg_user)
{
	char mapped[32], resident[32], rank[16] = "?", comm[128], user[160];

	if (json_get(p, "rank") && json_get(p, "rank")->type == JSON_NUMBER)
		snprintf(rank, sizeof(rank), "%.0f", json_num(p, "rank", -1));
	else if (json_str(p, "keeper")[0])
		snprintf(rank, sizeof(rank), "keeper");
	known_size(p, "mapped_bytes", mapped, sizeof(mapped));
	known_size(p, "resident_bytes", resident, sizeof(resident));
	user_of(p, user, sizeof(user));
	printf("    pid %-8.0f rank %-4s %-16s mapped %-11s resident %-11s%s%s%s%s\n",
	       json_num(p, "pid", 0), rank, cli_visible(json_str(p, "comm"), comm, sizeof(comm)),
	       mapped, resident,
	       json_num(p, "holds_fd", 0) ? " holds fd" : "",
	       json_num(p, "readonly", 0) ? " read-only" : "",
	       strcmp(user, seg_user) ? " " : "", strcmp(user, seg_user) ? user : "");
}

static void print_segment(const struct jval *s)
{
	const struct jval *procs = json_get(s, "processes"), *nodes = json_get(s, "numa_nodes");
	char size[48], resident[96], owner[64] = "owner gone or unknown";
	char name[512], pages[128], backend[128], user[160];

	cli_format_size((uint64_t)json_num(s, "size", 0), size, sizeof(size));
	if (json_num(s, "declared", 0)) /* what its tags say: /proc shows none of it */
		strcat(size, " declared");
	if (json_num(s, "resident_bytes", -1) >= 0)
		cli_format_size((uint64_t)json_num(s, "resident_bytes", 0), resident,
				sizeof(resident));
	else /* a driver's memory: /proc does not show it */
		snprintf(resident, sizeof(resident), "? (%s driver memory)",
			 cli_visible(json_str(s, "backend"), backend, sizeof(backend)));
	if (json_num(s, "owner_pid", -1) >= 0)
		snprintf(owner, sizeof(owner), "owner rank %.0f pid %.0f", json_num(s, "owner_rank", 0),
			 json_num(s, "owner_pid", 0));
	printf("%s  %s, %s, %s pages, %s resident, nodes",
	       cli_visible(json_str(s, "name"), name, sizeof(name)), user_of(s, user, sizeof(user)),
	       size, cli_visible(json_str(s, "pages"), pages, sizeof(pages)), resident);
	for (int i = 0; nodes && i < nodes->n; i++)
		printf("%s%.0f", i ? "," : " ", nodes->items[i]->num);
	if (json_str(s, "kept_by")[0])
		printf("%s, %s, kept by keeper %s%s\n", nodes && nodes->n ? "" : " ?", owner,
		       cli_visible(json_str(s, "kept_by"), name, sizeof(name)),
		       json_num(s, "unmapped", 0) ? " (no group maps it)" : "");
	else
		printf("%s, %s%s\n", nodes && nodes->n ? "" : " ?", owner,
		       json_num(s, "unmapped", 0) ? ", UNMAPPED (held by a descriptor only)" : "");
	for (int i = 0; procs && i < procs->n; i++)
		print_process(procs->items[i], user);
}

static int print_table(const char *text)
{
	struct jval *doc = json_parse(text);
	const struct jval *segs = json_get(doc, "segments");

	if (!segs) {
		json_value_free(doc);
		fprintf(stderr, "sharedseg ls: the library's list is not JSON\n");
		return CLI_FAIL;
	}
	if (segs->n == 0)
		printf("no sharedseg segment is live on this host (that this user can see)\n");
	for (int i = 0; i < segs->n; i++)
		print_segment(segs->items[i]);
	if (json_num(doc, "truncated", 0))
		printf("(truncated: this host has more segments or holdings than one listing "
		       "holds; the rest are left out)\n");
	json_value_free(doc);
	return CLI_OK;
}

int ls_main(int argc, char **argv)
{
	struct cli_args a = { "ls", argc, argv, 1 };
	bool as_json = false;
	const char *v;
	char *text;
	int id, rc;

	while ((id = cli_next(&a, ls_opts, &v)) != CLI_OPT_END) {
		if (id == CLI_OPT_HELP) {
			ls_help(stdout);
			return CLI_OK;
		}
		if (id == CLI_OPT_BAD)
			return CLI_USAGE;
		as_json = id == OPT_JSON;
	}
	text = list_text();
	if (!text) {
		fprintf(stderr, "sharedseg ls: %s\n", sseg_last_error());
		return CLI_FAIL;
	}
	if (as_json) {
		json_pretty(stdout, text);
		rc = CLI_OK;
	} else {
		rc = print_table(text);
	}
	free(text);
	return rc;
}
