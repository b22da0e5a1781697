/* SPDX-License-Identifier: Apache-2.0 */
/* What `sharedseg demo` prints: a row per rank and the group's totals, or
 * the same as one JSON object, and the ranks' errors. */
#include <math.h>
#include <string.h>

#include "demo_shared.h"

static const struct rank_report *owner_report(const struct demo_result *r)
{
	return r->reported[0] && r->reports[0].opened ? &r->reports[0] : NULL;
}

bool demo_all_verified(const struct demo_config *c, const struct demo_result *r)
{
	if (r->timed_out)
		return false;
	for (int i = 0; i < c->ranks; i++)
		if (!r->reported[i] || r->exit_note[i] || r->reports[i].failed ||
		    !r->reports[i].verified)
			return false;
	return true;
}

static double max_complete_s(const struct demo_config *c, const struct demo_result *r)
{
	double m = 0;

	for (int i = 0; i < c->ranks; i++)
		if (r->reported[i] && r->reports[i].complete_s > m)
			m = r->reports[i].complete_s;
	return m;
}

/* The host memory the group's mappings hold: every rank's share of the
 * segment's pages (demo_rank.c's measure), summed. A page counts once
 * however many ranks map it, and what other processes allocate or free
 * meanwhile does not move it. -1 when a rank did not measure, or when its
 * pages are in no smaps (a driver's memory). */
static int64_t group_bytes(const struct demo_config *c, const struct demo_result *r)
{
	uint64_t share = 0, resident = 0;

	for (int i = 0; i < c->ranks; i++) {
		if (!r->reported[i] || !r->reports[i].measured)
			return -1;
		share += r->reports[i].pss;
		resident += r->reports[i].rss;
	}
	return resident ? (int64_t)share : -1;
}

static void print_row(const struct rank_report *rr)
{
	char ps[32], pss[32];

	cli_format_size(rr->page_size, ps, sizeof(ps));
	cli_format_size(rr->pss, pss, sizeof(pss));
	printf("%4d  %-5s  %-10s  %9s  %10s  %9.1f  %11.1f  %11.1f  %s\n", rr->rank,
	       rr->rank == 0 ? "owner" : "peer", sseg_pages_name(rr->pages), ps, pss,
	       rr->create_s * 1e3, rr->complete_s * 1e3, rr->populate_s * 1e3,
	       rr->verified ? "yes" : "no");
}

static void print_totals(const struct demo_config *c, const struct demo_result *r,
			 const struct rank_report *owner)
{
	uint64_t private_bytes = c->size * (uint64_t)c->ranks;
	int64_t used = group_bytes(c, r);
	char u[32], p[32];

	cli_format_size(private_bytes, p, sizeof(p));
	if (used < 0) {
		printf("\nhost memory used: unknown (the segment's pages are in no rank's smaps: "
		       "%s memory)\n", sseg_backend_name(owner->backend));
		printf("%d private copies would use: %s\n", c->ranks, p);
		return;
	}
	cli_format_size((uint64_t)used, u, sizeof(u));
	printf("\nhost memory used: %s (the segment's pages in the ranks' smaps, each counted "
	       "once)\n", u);
	printf("%d private copies would use: %s\n", c->ranks, p);
	printf("ratio: %.2f of private copies (%.2f x one copy)\n",
	       (double)used / (double)private_bytes, (double)used / (double)c->size);
}

void demo_print_table(const struct demo_config *c, const struct demo_result *r)
{
	const struct rank_report *owner = owner_report(r);
	char sz[32];

	if (!owner)
		return;
	cli_format_size(c->size, sz, sizeof(sz));
	printf("%d ranks mapped one %s segment: backend %s, pages %s (asked %s), populate %s%s\n",
	       c->ranks, sz, sseg_backend_name(owner->backend), sseg_pages_name(owner->pages),
	       sseg_pages_name(c->pages), sseg_populate_name(c->populate),
	       c->readonly_peers ? ", read-only peers" : "");
	if (owner->pages_reason[0])
		printf("why these pages: %s\n", owner->pages_reason);
	printf("\nrank  role   pages       page size  mapped Pss  create ms  complete ms"
	       "  populate ms  verified\n");
	for (int i = 0; i < c->ranks; i++)
		print_row(&r->reports[i]);
	if (c->populate == SSEG_POPULATE_BACKGROUND)
		printf("\npopulate background: every rank could use the segment when its complete "
		       "returned (slowest %.1f ms); the pages were resident %.1f ms after that "
		       "(the owner's wait)\n",
		       max_complete_s(c, r) * 1e3, owner->resident_s * 1e3);
	print_totals(c, r, owner);
}

static void json_nodes(struct sseg_json *j, uint64_t mask)
{
	sseg_json_begin(j, "numa_nodes", '[');
	for (int n = 0; n < 64; n++)
		if (mask & (1ull << n))
			sseg_json_int(j, NULL, n);
	sseg_json_end(j, ']');
}

static void json_rank(struct sseg_json *j, const struct demo_result *r, int i)
{
	const struct rank_report *rr = &r->reports[i];

	sseg_json_begin(j, NULL, '{');
	sseg_json_int(j, "rank", i);
	sseg_json_str(j, "role", i == 0 ? "owner" : "peer");
	sseg_json_bool(j, "reported", r->reported[i]);
	sseg_json_bool(j, "opened", rr->opened);
	sseg_json_str(j, "pages", rr->opened ? sseg_pages_name(rr->pages) : NULL);
	sseg_json_u64(j, "page_size", rr->page_size);
	sseg_json_int(j, "pages_verified", rr->pages_verified);
	sseg_json_u64(j, "huge_bytes", rr->huge_bytes);
	json_nodes(j, rr->numa_nodes);
	sseg_json_u64(j, "rss", rr->rss);
	sseg_json_u64(j, "pss", rr->pss);
	sseg_json_double(j, "create_s", rr->create_s);
	sseg_json_double(j, "complete_s", rr->complete_s);
	sseg_json_double(j, "populate_s", rr->populate_s);
	sseg_json_double(j, "resident_wait_s", rr->resident_s);
	sseg_json_bool(j, "verified", r->reported[i] && rr->verified && !rr->failed);
	sseg_json_str(j, "error", rr->failed ? rr->error : r->exit_note[i]);
	sseg_json_end(j, '}');
}

static void json_owner(struct sseg_json *j, const struct demo_config *c,
		       const struct demo_result *r, const struct rank_report *owner)
{
	uint64_t private_bytes = c->size * (uint64_t)c->ranks;
	int64_t used = group_bytes(c, r);

	sseg_json_str(j, "backend", owner ? sseg_backend_name(owner->backend) : NULL);
	sseg_json_str(j, "pages", owner ? sseg_pages_name(owner->pages) : NULL);
	sseg_json_u64(j, "page_size", owner ? owner->page_size : 0);
	sseg_json_int(j, "pages_verified", owner ? owner->pages_verified : 0);
	sseg_json_u64(j, "huge_bytes", owner ? owner->huge_bytes : 0);
	sseg_json_str(j, "pages_reason", owner ? owner->pages_reason : NULL);
	sseg_json_opt_int(j, "host_bytes_used", used);
	sseg_json_u64(j, "host_bytes_private_equivalent", private_bytes);
	sseg_json_double(j, "ratio", used >= 0 ? (double)used / (double)private_bytes : NAN);
	sseg_json_double(j, "create_s", owner ? owner->create_s : 0.0);
}

void demo_print_json(const struct demo_config *c, const struct demo_result *r)
{
	const struct rank_report *owner = owner_report(r);
	struct sseg_json j;

	sseg_json_init(&j, stdout, SSEG_JSON_PRETTY);
	sseg_json_begin(&j, NULL, '{');
	sseg_json_int(&j, "schema", 1);
	sseg_json_int(&j, "ranks", c->ranks);
	sseg_json_u64(&j, "size", c->size);
	sseg_json_str(&j, "name", c->name);
	sseg_json_str(&j, "pages_requested", sseg_pages_name(c->pages));
	sseg_json_str(&j, "populate", sseg_populate_name(c->populate));
	sseg_json_str(&j, "numa", sseg_numa_name(c->numa));
	sseg_json_bool(&j, "readonly_peers", c->readonly_peers);
	json_owner(&j, c, r, owner);
	sseg_json_double(&j, "complete_s", max_complete_s(c, r));
	sseg_json_bool(&j, "verified", demo_all_verified(c, r));
	sseg_json_bool(&j, "timed_out", r->timed_out);
	sseg_json_begin(&j, "per_rank", '[');
	for (int i = 0; i < c->ranks; i++)
		json_rank(&j, r, i);
	sseg_json_end(&j, ']');
	sseg_json_end(&j, '}');
	sseg_json_finish(&j);
}

/* Ranks that fail together usually say the same sentence: print it once. */
static bool said_before(const struct demo_result *r, int upto, const char *msg)
{
	for (int i = 0; i < upto; i++)
		if (r->reported[i] && r->reports[i].failed && !strcmp(r->reports[i].error, msg))
			return true;
	return false;
}

void demo_print_errors(const struct demo_config *c, const struct demo_result *r)
{
	if (r->timed_out)
		fprintf(stderr, "sharedseg demo: the ranks did not finish within %.0f s; the rest "
			"were killed\n", demo_run_bound_s(c));
	for (int i = 0; i < c->ranks; i++) {
		const struct rank_report *rr = &r->reports[i];

		if (r->exit_note[i])
			fprintf(stderr, "sharedseg demo: %s\n", r->exit_note[i]);
		else if (!r->reported[i])
			fprintf(stderr, "sharedseg demo: rank %d sent no report\n", i);
		else if (rr->failed && !said_before(r, i, rr->error))
			fprintf(stderr, "sharedseg demo: rank %d: %s\n", i, rr->error);
		else if (!rr->failed && !rr->verified)
			fprintf(stderr, "sharedseg demo: rank %d: not verified\n", i);
	}
}
