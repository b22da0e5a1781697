/* sharedseg probe: the facts sseg_probe() gathers, as a table or JSON. */
#include <string.h>

#include "cli.h"

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
		"why, whether each backend (memfd, cuda, ascend) is available and why\n"
		"not, and advice: the knobs to change for huge pages. Changes nothing.\n"
		"\n"
		"options:\n"
		"  --size SIZE  segment size pages=auto is decided for (default 1GiB);\n"
		"               SIZE is bytes or a binary unit: 4096, 256MiB, 256M, 4G, 1.5GiB\n"
		"  --json       one JSON object: kernel, memfd, sealing, memfd_hugetlb,\n"
		"               thp {shmem_enabled, shmem_2m_enabled, usable},\n"
		"               hugetlb_pools [{page_size, total, free, reserved}],\n"
		"               numa {nodes}, auto {size, pages, reason},\n"
		"               backends {memfd, cuda, ascend: {available, reason}}, advice []\n"
		"  -h, --help   this text\n"
		"\n"
		"examples:\n"
		"  sharedseg probe\n"
		"  sharedseg probe --size 64GiB --json\n");
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

/* Each advice line, indented; the library separates them with '\n'. */
/* The fabric attribute can claim support that a real create-and-export
 * then refuses (no IMEX channel): both are shown. */
static void print_gpus(const struct sseg_probe *p)
{
	if (!p->cuda_driver_version)
		return;
	printf("\ncuda driver %d, %d device(s)\n", p->cuda_driver_version, p->cuda_ndevices);
	for (int d = 0; d < p->cuda_ndevices; d++) {
		const struct sseg_probe_gpu *g = &p->cuda[d];

		printf("  gpu %d  vmm %s, host-numa vmm %s, posix fd %s, fabric attribute %s, "
		       "fabric works %s, host node %d\n",
		       d, yes_no(g->vmm), yes_no(g->host_numa_vmm), yes_no(g->posix_fd),
		       yes_no(g->fabric_attr), yes_no(g->fabric_works), g->host_numa_id);
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
	printf("\nbackends\n");
	for (int b = SSEG_BACKEND_MEMFD; b < SSEG_PROBE_BACKENDS; b++)
		printf("  %-7s %-3s  %s\n", sseg_backend_name((enum sseg_backend)b),
		       yes_no(p->backend_ok[b]), p->backend_reason[b]);
	print_gpus(p);
	if (p->advice[0])
		print_advice(p->advice);
}

static void json_gpus(struct json *j, const struct sseg_probe *p)
{
	json_object_begin(j, "cuda");
	json_i64(j, "driver_version", p->cuda_driver_version);
	json_array_begin(j, "devices");
	for (int d = 0; d < p->cuda_ndevices; d++) {
		const struct sseg_probe_gpu *g = &p->cuda[d];

		json_object_begin(j, NULL);
		json_i64(j, "ordinal", d);
		json_bool(j, "vmm", g->vmm);
		json_bool(j, "host_numa_vmm", g->host_numa_vmm);
		json_bool(j, "posix_fd", g->posix_fd);
		json_bool(j, "fabric_attribute", g->fabric_attr);
		json_bool(j, "fabric_works", g->fabric_works);
		json_i64(j, "host_numa_id", g->host_numa_id);
		json_object_end(j);
	}
	json_array_end(j);
	json_object_end(j);
}

static void json_advice(struct json *j, const char *advice)
{
	char line[sizeof(((struct sseg_probe *)0)->advice)];
	const char *at = advice;

	json_array_begin(j, "advice");
	while (*at) {
		const char *nl = strchr(at, '\n');
		size_t n = nl ? (size_t)(nl - at) : strlen(at);

		snprintf(line, sizeof(line), "%.*s", (int)n, at);
		json_string(j, NULL, line);
		at += n + (nl ? 1 : 0);
	}
	json_array_end(j);
}

static void json_host(struct json *j, const struct sseg_probe *p)
{
	json_string(j, "kernel", p->kernel);
	json_bool(j, "memfd", p->memfd_ok);
	json_bool(j, "sealing", p->sealing_ok);
	json_bool(j, "memfd_hugetlb", p->memfd_hugetlb_ok);
	json_object_begin(j, "thp");
	json_string(j, "shmem_enabled", p->thp_shmem_enabled);
	json_string(j, "shmem_2m_enabled", p->thp_shmem_2m_enabled);
	json_bool(j, "usable", p->thp_shmem_usable);
	json_object_end(j);
	json_array_begin(j, "hugetlb_pools");
	for (int i = 0; i < p->npools; i++) {
		json_object_begin(j, NULL);
		json_u64(j, "page_size", p->pools[i].page_size);
		json_u64(j, "total", p->pools[i].total);
		json_u64(j, "free", p->pools[i].free);
		json_u64(j, "reserved", p->pools[i].reserved);
		json_object_end(j);
	}
	json_array_end(j);
	json_object_begin(j, "numa");
	json_array_begin(j, "nodes");
	for (int n = 0; n < 64; n++)
		if (p->node_mask & (1ull << n))
			json_i64(j, NULL, n);
	json_array_end(j);
	json_object_end(j);
}

static void print_json(const struct sseg_probe *p)
{
	struct json j;

	json_init(&j, stdout);
	json_object_begin(&j, NULL);
	json_host(&j, p);
	json_object_begin(&j, "auto");
	json_u64(&j, "size", p->auto_size);
	json_string(&j, "pages", sseg_pages_name(p->auto_pages));
	json_string(&j, "reason", p->auto_reason);
	json_object_end(&j);
	json_object_begin(&j, "backends");
	for (int b = SSEG_BACKEND_MEMFD; b < SSEG_PROBE_BACKENDS; b++) {
		json_object_begin(&j, sseg_backend_name((enum sseg_backend)b));
		json_bool(&j, "available", p->backend_ok[b]);
		json_string(&j, "reason", p->backend_reason[b]);
		json_object_end(&j);
	}
	json_object_end(&j);
	json_gpus(&j, p);
	json_advice(&j, p->advice);
	json_object_end(&j);
	json_finish(&j);
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
	if (sseg_probe(size, &p)) {
		fprintf(stderr, "sharedseg probe: %s\n", sseg_last_error());
		return CLI_FAIL;
	}
	if (as_json)
		print_json(&p);
	else
		print_table(&p);
	return CLI_OK;
}
