/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg probe: the facts sseg_probe() gathers, as a table or JSON. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "probe_doc.h"

enum { OPT_JSON = 1, OPT_SIZE };

static const struct cli_opt probe_opts[] = {
	{ "json", false, OPT_JSON },
	{ "size", true, OPT_SIZE },
	{ NULL, false, 0 },
};

void probe_help(FILE *out)
{
	fprintf(out,
		"usage: sharedseg probe [--json] [--size SIZE]\n"
		"\n"
		"Shows what this host offers a shared segment: the kernel, memfd and\n"
		"sealing, HugeTLB memfds, THP for shmem (the global and the 2 MiB\n"
		"shmem_enabled knobs, and whether MADV_HUGEPAGE on a memfd really gets\n"
		"2 MiB pages), the HugeTLB pools (total/free/reserved per page size),\n"
		"the NUMA nodes with memory, what pages=auto would pick for SIZE and\n"
		"why, whether each backend (%s) is available and why\n"
		"not, and advice: the knobs to change for huge pages. Changes nothing.\n"
		"\n"
		"options:\n"
		"  --size SIZE  segment size pages=auto is decided for (default 1GiB);\n"
		"               SIZE is bytes or a binary unit: 4096, 256MiB, 256M, 4G, 1.5GiB\n"
		"  --json       one JSON object (the same as Python's sharedseg.probe()):\n"
		"               schema (its version), kernel, memfd, sealing, memfd_hugetlb,\n"
		"               thp {shmem_enabled, shmem_2m_enabled, usable},\n"
		"               hugetlb_pools [{page_size, total, free, reserved}],\n"
		"               numa {nodes}, memory {available, cgroup_limit, cgroup_usage},\n"
		"               auto {size, pages, reason},\n"
		"               backends {%s: {available, reason, driver,\n"
		"                 driver_version, pinned, crosses_hosts, host_register,\n"
		"                 devices [{ordinal, uuid, vmm, host_vmm, host_vmm_works,\n"
		"                 ipc_fd, fabric_claimed, fabric_works, host_register,\n"
		"                 host_register_readonly, host_numa_id}]}},\n"
		"               advice [lines]; device facts are true, false or null (unknown)\n"
		"  -h, --help   this text\n"
		"\n"
		"examples:\n"
		"  sharedseg probe\n"
		"  sharedseg probe --size 64GiB --json\n",
		cli_names(CLI_DEVICE_BACKENDS), cli_names(CLI_DEVICE_BACKENDS));
}

static const char *yes_no(int v)
{
	return v ? "yes" : "no";
}

static void print_pools(const struct sseg_probe *p)
{
	char ps[32];

	if (p->npools == 0) {
		printf("  HugeTLB pools    none\n");
		return;
	}
	for (int i = 0; i < p->npools; i++) {
		cli_format_size(p->pools[i].page_size, ps, sizeof(ps));
		printf("  HugeTLB %-8s %llu total, %llu free, %llu reserved\n", ps,
		       (unsigned long long)p->pools[i].total, (unsigned long long)p->pools[i].free,
		       (unsigned long long)p->pools[i].reserved);
	}
}

static void print_nodes(const struct sseg_probe *p)
{
	const char *sep = "";

	printf("  NUMA nodes       %d with memory:", p->nnodes);
	for (int n = 0; n < 64; n++)
		if (p->node_mask & (1ull << n)) {
			printf("%s %d", sep, n);
			sep = ",";
		}
	printf("\n");
}

static const char *tri(int v)
{
	return v < 0 ? "?" : v ? "yes" : "no";
}

/* The fabric attribute can claim support that a real create-and-export
 * then refuses (no IMEX channel): both are shown. */
static void print_devices(const struct sseg_probe_backend *b)
{
	for (int d = 0; d < b->ndevices; d++) {
		struct sseg_probe_device g = { .sz = sizeof(g) };

		if (sseg_probe_device(b->backend, d, &g))
			continue;
		printf("    device %d  vmm %s, host vmm claimed %s, works %s, ipc fd %s, "
		       "fabric claimed %s, works %s, host register %s (read-only %s), "
		       "host node %d%s%s\n",
		       d, tri(g.vmm), tri(g.host_vmm), tri(g.host_vmm_works), tri(g.ipc_fd),
		       tri(g.fabric_claimed), tri(g.fabric_works), tri(g.host_register),
		       tri(g.host_register_readonly), g.host_numa_id, g.uuid[0] ? ", " : "",
		       g.uuid);
	}
}

static void print_backends(void)
{
	printf("\nbackends\n");
	for (int b = SSEG_BACKEND_MEMFD;; b++) {
		struct sseg_probe_backend f = { .sz = sizeof(f) };

		if (sseg_probe_backend((enum sseg_backend)b, &f))
			break;
		printf("  %-7s %-3s  %s\n", f.name, yes_no(f.available), f.reason);
		if (f.driver[0])
			printf("    driver %s, version %d, %d device(s)\n", f.driver,
			       f.driver_version, f.ndevices);
		print_devices(&f);
	}
}

/* memfd_hugetlb_ok is only tried when a 2 MiB page is free to try it on. */
static bool has_free_2m(const struct sseg_probe *p)
{
	for (int i = 0; i < p->npools; i++)
		if (p->pools[i].page_size == (2u << 20) && p->pools[i].free > 0)
			return true;
	return false;
}

static void print_advice(const char *advice)
{
	const char *line = advice;

	printf("\nadvice:\n");
	while (*line) {
		const char *nl = strchr(line, '\n');
		int n = nl ? (int)(nl - line) : (int)strlen(line);

		printf("  - %.*s\n", n, line);
		line += n + (nl ? 1 : 0);
	}
}

static void print_table(const struct sseg_probe *p)
{
	char sz[32];

	printf("host\n");
	printf("  kernel           %s\n", p->kernel[0] ? p->kernel : "unknown");
	printf("  memfd            %s, sealing %s\n", yes_no(p->memfd_ok), yes_no(p->sealing_ok));
	printf("  memfd HugeTLB    %s\n", p->memfd_hugetlb_ok ? "yes"
					: has_free_2m(p) ? "no"
							 : "not tried (no free 2 MiB HugeTLB page)");
	printf("  THP for shmem    shmem_enabled=%s, 2 MiB shmem_enabled=%s: %s\n",
	       p->thp_shmem_enabled[0] ? p->thp_shmem_enabled : "?",
	       p->thp_shmem_2m_enabled[0] ? p->thp_shmem_2m_enabled : "(no per-size knob)",
	       p->thp_shmem_usable ? "usable" : "not usable");
	print_pools(p);
	print_nodes(p);
	cli_format_size(p->auto_size, sz, sizeof(sz));
	printf("\npages=auto for %s: %s\n  because %s\n", sz, sseg_pages_name(p->auto_pages),
	       p->auto_reason);
	print_backends();
	if (p->advice[0])
		print_advice(p->advice);
}

/* The helper library writes the document: one schema for the CLI and
 * Python, from the library's structs. */
static int print_json(uint64_t size)
{
	struct sseg_json j;
	int rc;

	sseg_json_init(&j, stdout, SSEG_JSON_PRETTY);
	rc = sseg_probe_document(&j, size);
	if (!rc)
		sseg_json_finish(&j);
	return rc;
}

int probe_main(int argc, char **argv)
{
	struct cli_args a = { "probe", argc, argv, 1 };
	struct sseg_probe p = { .sz = sizeof(p) };
	uint64_t size = 0;
	bool as_json = false;
	const char *v;
	int id;

	while ((id = cli_next(&a, probe_opts, &v)) != CLI_OPT_END) {
		if (id == CLI_OPT_HELP) {
			probe_help(stdout);
			return CLI_OK;
		}
		if (id == CLI_OPT_BAD)
			return CLI_USAGE;
		if (id == OPT_JSON)
			as_json = true;
		else if (id == OPT_SIZE && cli_parse_size("probe", "--size", v, &size))
			return CLI_USAGE;
	}
	if (as_json ? print_json(size) : sseg_probe(size, &p)) {
		fprintf(stderr, "sharedseg probe: %s\n", sseg_last_error());
		return CLI_FAIL;
	}
	if (!as_json)
		print_table(&p);
	return CLI_OK;
}
