/* SPDX-License-Identifier: Apache-2.0 */
/* The `sharedseg` command line, run as a user would: help, argument errors
 * (exit 2, one line), probe --json, a 4-rank demo that must hold one copy
 * of the segment host-wide, a HugeTLB request the machine cannot meet, and
 * one the pool is too small for, refused with the pages the size needs. */
#define _GNU_SOURCE /* memfd_create */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "intruder.h"
#include "listing.h"
#include "testutil.h"

#define OUT_MAX (256 * 1024)

struct result {
	int status;          /* exit status, 128+signal, or -1 */
	char out[OUT_MAX];   /* stdout */
	char err[OUT_MAX];   /* stderr */
};

static void slurp(const char *path, char *buf)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, OUT_MAX - 1, f) : 0;

	buf[n] = '\0';
	if (f)
		fclose(f);
}

/* Runs the built tool with args; stdout and stderr are kept apart. */
static void run(const char *args, struct result *r)
{
	const char *build = getenv("SSEG_BUILD_DIR");
	char errpath[] = "/tmp/sseg-cli-err-XXXXXX", outpath[] = "/tmp/sseg-cli-out-XXXXXX";
	char cmd[1024];
	int fd_err = mkstemp(errpath), fd_out = mkstemp(outpath), st;

	CHECK(fd_err >= 0 && fd_out >= 0);
	close(fd_err);
	close(fd_out);
	snprintf(cmd, sizeof(cmd), "%s/sharedseg %s >%s 2>%s", build, args, outpath, errpath);
	fprintf(stderr, "+ sharedseg %s\n", args);
	st = system(cmd);
	r->status = st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	slurp(outpath, r->out);
	slurp(errpath, r->err);
	unlink(outpath);
	unlink(errpath);
}

static int expect(const struct result *r, int status, const char *what)
{
	if (r->status == status)
		return 1;
	fprintf(stderr, "%s: exit status %d, expected %d\nstdout:\n%s\nstderr:\n%s\n", what,
		r->status, status, r->out, r->err);
	return 0;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* ---- a strict JSON reader, enough to say "this is one valid value" ---- */

static const char *json_value(const char *p);

static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

static const char *json_string_end(const char *p)
{
	if (*p++ != '"')
		return NULL;
	for (; *p && *p != '"'; p++) {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\' && !*++p)
			return NULL;
	}
	return *p == '"' ? p + 1 : NULL;
}

static const char *json_container(const char *p, char close, int keyed)
{
	p = ws(p + 1);
	if (*p == close)
		return p + 1;
	for (;;) {
		if (keyed) {
			p = json_string_end(ws(p));
			if (!p || *(p = ws(p)) != ':')
				return NULL;
			p++;
		}
		p = json_value(p);
		if (!p)
			return NULL;
		p = ws(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
	}
}

static const char *json_value(const char *p)
{
	char *end;

	p = ws(p);
	if (*p == '{')
		return json_container(p, '}', 1);
	if (*p == '[')
		return json_container(p, ']', 0);
	if (*p == '"')
		return json_string_end(p);
	if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
		return p + 4;
	if (!strncmp(p, "false", 5))
		return p + 5;
	if (*p != '-' && !isdigit((unsigned char)*p))
		return NULL;
	strtod(p, &end);
	return end > p ? end : NULL;
}

static int is_json_object(const char *text)
{
	const char *end;

	if (*ws(text) != '{')
		return 0;
	end = json_value(text);
	return end && !*ws(end);
}

/* The number after "key": in a JSON text. */
static int json_number(const char *text, const char *key, long long *v)
{
	char pattern[128];
	const char *at;

	snprintf(pattern, sizeof(pattern), "\"%s\": ", key);
	at = strstr(text, pattern);
	if (!at)
		return 0;
	*v = strtoll(at + strlen(pattern), NULL, 10);
	return 1;
}

/* ---- the checks ---- */

static void check_help(struct result *r)
{
	run("--help", r);
	CHECK(expect(r, 0, "--help"));
	CHECK(strstr(r->out, "probe") && strstr(r->out, "demo") && strstr(r->out, "bench"));
	run("help demo", r);
	CHECK(expect(r, 0, "help demo") && strstr(r->out, "--ranks"));
	run("demo --help", r);
	CHECK(expect(r, 0, "demo --help") && strstr(r->out, "--readonly-peers"));
	run("--version", r);
	CHECK(expect(r, 0, "--version") && strstr(r->out, "sharedseg "));
}

static void check_bad_arguments(struct result *r)
{
	run("demo --ranks 2 --size 12XB", r);
	CHECK(expect(r, 2, "bad size"));
	CHECK(count_lines(r->err) == 1 && strstr(r->err, "'12XB'") && strstr(r->err, "--size"));
	CHECK(!r->out[0]);
	run("frobnicate", r);
	CHECK(expect(r, 2, "unknown command"));
	CHECK(count_lines(r->err) == 1 && strstr(r->err, "frobnicate"));
	run("demo --ranks 0", r);
	CHECK(expect(r, 2, "zero ranks") && count_lines(r->err) == 1);
	run("demo --pages huge", r);
	CHECK(expect(r, 2, "bad pages") && strstr(r->err, "'huge'"));
	run("probe --frob", r);
	CHECK(expect(r, 2, "unknown option") && strstr(r->err, "--frob"));
	run("ls --frob", r);
	CHECK(expect(r, 2, "unknown ls option") && strstr(r->err, "--frob"));
}

static void check_probe(struct result *r)
{
	run("probe --json", r);
	CHECK(expect(r, 0, "probe --json"));
	CHECK(is_json_object(r->out));
	CHECK(strstr(r->out, "\"memfd\"") && strstr(r->out, "\"hugetlb_pools\""));
	run("probe", r);
	CHECK(expect(r, 0, "probe") && strstr(r->out, "kernel"));
	run("ls --json", r);
	CHECK(expect(r, 0, "ls --json") && is_json_object(r->out));
	CHECK(strstr(r->out, "\"schema\": 1") && strstr(r->out, "\"segments\""));
	run("ls", r);
	CHECK(expect(r, 0, "ls"));
}

/* The table's totals: "host memory used: X MiB (...)", "ratio: R of
 * private copies (O x one copy)", for one copy of mib MiB among ranks. */
static void check_totals(const char *out, double mib, int ranks)
{
	const char *used = strstr(out, "\nhost memory used: "), *ratio = strstr(out, "\nratio: ");
	double got = -1, of_private = -1, of_one = -1;

	CHECK(used && sscanf(used, "\nhost memory used: %lf MiB (", &got) == 1);
	CHECK(ratio && sscanf(ratio, "\nratio: %lf of private copies (%lf x one copy)",
			      &of_private, &of_one) == 2);
	fprintf(stderr, "host memory used %.1f MiB, ratio %.2f (%.2f x one copy)\n", got,
		of_private, of_one);
	CHECK(got >= mib * 0.9 && got <= mib * 1.1);
	CHECK(of_one >= 0.9 && of_one <= 1.1 && of_private <= 1.1 / ranks);
}

static void check_demo(struct result *r)
{
	const long long size = 64ll << 20;
	long long used = -1, private_bytes = -1, ranks = -1;

	run("demo --ranks 4 --size 64MiB --pages base --json", r);
	CHECK(expect(r, 0, "demo --json"));
	CHECK(is_json_object(r->out));
	CHECK(strstr(r->out, "\"schema\": 1"));
	CHECK(strstr(r->out, "\"verified\": true"));
	CHECK(json_number(r->out, "ranks", &ranks) && ranks == 4);
	CHECK(json_number(r->out, "host_bytes_used", &used));
	CHECK(json_number(r->out, "host_bytes_private_equivalent", &private_bytes));
	fprintf(stderr, "host_bytes_used %lld for a %lld-byte segment\n", used, size);
	/* One copy host-wide, not four. */
	CHECK(used >= size * 9 / 10 && used <= size * 11 / 10);
	CHECK(private_bytes == 4 * size);
	run("demo --ranks 3 --size 8MiB --readonly-peers --populate lazy", r);
	CHECK(expect(r, 0, "demo --readonly-peers"));
	check_totals(r->out, 8.0, 3);
}


/* A process that holds 256 MiB of Shmem when the demo starts and lets go
 * of it once the demo's group is there (its rendezvous socket, in
 * /proc/net/unix), while the ranks open and fill the segment. */
struct neighbour {
	const char *name;
	int ready_w;
};

static int noisy_neighbour(void *arg)
{
	const struct neighbour *n = arg;
	const size_t noise = 256u << 20;
	int fd = memfd_create("sseg-cli-noise", MFD_CLOEXEC);
	char prefix[256], sock[256];
	bool seen = false;
	void *p;

	if (fd < 0 || ftruncate(fd, (off_t)noise))
		return 1;
	p = mmap(NULL, noise, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return 1;
	memset(p, 1, noise);
	if (write(n->ready_w, "r", 1) != 1)
		return 1;
	tu_group_socket(n->name, prefix, sizeof(prefix));
	for (int i = 0; i < 12 && !seen; i++) /* 5 s each */
		seen = intruder_find_socket(prefix, sock, sizeof(sock)) == 0;
	return seen ? 0 : 1; /* its exit frees the 256 MiB */
}

/* Other processes free memory while the demo runs: the demo's figure is
 * the segment's own pages, which that does not move (a host-wide delta
 * read -128 MiB here). Where the neighbour lets go after the ranks have
 * measured (a loaded host), the check holds all the same. */
static void check_busy_host(struct result *r)
{
	const long long size = 128ll << 20;
	char name[64], args[192];
	struct neighbour n = { name, -1 };
	long long used = -1;
	int ready[2];
	pid_t pid;
	char c;

	tu_name(name, sizeof(name), "sseg-cli-busy");
	CHECK(pipe(ready) == 0);
	n.ready_w = ready[1];
	pid = tu_fork(noisy_neighbour, &n);
	close(ready[1]);
	CHECK(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	snprintf(args, sizeof(args), "demo --ranks 2 --size 128MiB --pages base --name %s --json",
		 name);
	run(args, r);
	CHECK(tu_wait(pid, 70000) == 0); /* it saw the group, and let go */
	CHECK(expect(r, 0, "demo on a busy host"));
	CHECK(json_number(r->out, "host_bytes_used", &used));
	fprintf(stderr, "host_bytes_used %lld for a %lld-byte segment on a busy host\n", used, size);
	CHECK(used >= size * 9 / 10 && used <= size * 11 / 10);
}

/* Every JSON the project writes names its schema; bench's is read by
 * scripts that compare runs. */
static void check_bench_json(struct result *r)
{
	long long reps = -1;

	run("bench --size 8MiB --pages base --reps 2 --json", r);
	CHECK(expect(r, 0, "bench --json"));
	CHECK(is_json_object(r->out));
	CHECK(strstr(r->out, "\"schema\": 3"));
	CHECK(json_number(r->out, "reps", &reps) && reps == 2);
	CHECK(strstr(r->out, "\"population\"") && strstr(r->out, "\"ratio\""));
	/* every figure names the driver case it is the row of */
	CHECK(strstr(r->out, "\"command\": \"sharedseg bench case --mechanism sharedseg "
			     "--ranks 1 --size 8388608 --pages base --populate owner --threads 1"));
}

static void check_hugetlb_refused(struct result *r)
{
	run("demo --ranks 2 --size 8MiB --pages hugetlb-1G", r);
	if (r->status == 0) {
		fprintf(stderr, "this machine has a 1 GiB HugeTLB pool; nothing to refuse\n");
		return;
	}
	/* A page kind or backend the machine does not offer: exit 2, as
	 * the help says. */
	CHECK(expect(r, 2, "hugetlb-1G"));
	CHECK(strstr(r->err, "HugeTLB"));
	setenv("SHAREDSEG_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
	run("demo --ranks 2 --size 8MiB --backend cuda", r);
	unsetenv("SHAREDSEG_CUDA_LIBRARY");
	CHECK(expect(r, 2, "backend cuda without a driver"));
	CHECK(strstr(r->err, "no CUDA driver"));
}

/* A HugeTLB pool too small for the segment: the refusal counts the pages
 * SIZE needs (64 MiB of 2 MiB pages: 32), as a create of that size would,
 * not those of the smallest segment. Empties the pool (put back at exit). */
static void check_hugetlb_count(struct result *r)
{
	if (access("/sys/kernel/mm/hugepages/hugepages-2048kB", F_OK) ||
	    tu_knob_set("/proc/sys/vm/nr_hugepages", "0")) {
		fprintf(stderr, "no 2 MiB pool or not root: the HugeTLB count is not checked\n");
		return;
	}
	run("demo --ranks 2 --size 64MiB --pages hugetlb", r);
	CHECK(expect(r, 2, "demo hugetlb with an empty pool"));
	CHECK(count_lines(r->err) == 1 && strstr(r->err, "has 0 free pages, 32 needed"));
	run("bench --size 64MiB --pages hugetlb --reps 1", r);
	CHECK(expect(r, 2, "bench hugetlb with an empty pool"));
	CHECK(strstr(r->err, "has 0 free pages, 32 needed"));
}

/* SIGTERM to the demo reaches its ranks: none outlives it holding the
 * segment. */
static void check_sigterm(struct result *r)
{
	const char *build = getenv("SSEG_BUILD_DIR");
	char name[64], path[512], *text = NULL;
	int status;
	pid_t pid;

	tu_name(name, sizeof(name), "sseg-cli-term");
	snprintf(path, sizeof(path), "%s/sharedseg", build);
	pid = fork();
	if (pid == 0) {
		execl(path, path, "demo", "--ranks", "4", "--size", "1GiB", "--pages", "base",
		      "--populate", "lazy", "--name", name, "--timeout", "60000", (char *)NULL);
		_exit(127);
	}
	/* Once every rank maps it, the segment is listed (the whole list: other
	 * tests' segments may fill its first pages); then stop. Within the
	 * demo's own timeout. */
	for (int i = 0; i < 1200 && !(text && segment_of(text, name)); i++) {
		free(text);
		text = listing_now();
		if (!segment_of(text, name))
			usleep(50 * 1000);
	}
	CHECK(segment_of(text, name));
	free(text);
	kill(pid, SIGTERM);
	status = tu_wait(pid, 10000);
	CHECK(status == 128 + SIGTERM || status == 143);
	text = listing_now();
	CHECK(!segment_of(text, name)); /* no rank left holding it */
	free(text);
	(void)r;
}

/* The fake CUDA driver, as a user would point the tool at a driver. */
static void check_cuda_fake(struct result *r)
{
	long long used = -1;
	char path[512];
	int gpus = 0;

	snprintf(path, sizeof(path), "%s", tu_build_file("libsseg_fake_cuda.so"));
	CHECK(access(path, R_OK) == 0);
	setenv("SHAREDSEG_CUDA_LIBRARY", path, 1);
	setenv("SSEG_FAKE_CUDA", "devices=2;numa=0,0;fabric=1;fabric_works=0", 1);
	run("probe --json", r);
	CHECK(expect(r, 0, "probe --json with the fake driver"));
	CHECK(strstr(r->out, "\"driver_version\": 13000"));
	CHECK(strstr(r->out, "\"fabric_claimed\": true"));
	CHECK(strstr(r->out, "\"fabric_works\": false"));
	for (const char *at = r->out; (at = strstr(at, "\"ordinal\"")); at++)
		gpus++;
	CHECK(gpus == 2);
	run("demo --backend cuda --ranks 4 --size 256MiB --json", r);
	CHECK(expect(r, 0, "demo --backend cuda"));
	CHECK(strstr(r->out, "\"backend\": \"cuda\"") && strstr(r->out, "\"verified\": true"));
	CHECK(json_number(r->out, "host_bytes_used", &used));
	CHECK(used >= (256ll << 20) * 9 / 10 && used <= (256ll << 20) * 11 / 10);
	unsetenv("SHAREDSEG_CUDA_LIBRARY");
	unsetenv("SSEG_FAKE_CUDA");
}

int main(void)
{
	static struct result r;

	if (!getenv("SSEG_BUILD_DIR")) {
		fprintf(stderr, "SSEG_BUILD_DIR is not set (run through ctest)\n");
		return 1;
	}
	check_help(&r);
	check_bad_arguments(&r);
	check_probe(&r);
	check_demo(&r);
	check_busy_host(&r);
	check_bench_json(&r);
	check_hugetlb_refused(&r);
	check_sigterm(&r);
	check_cuda_fake(&r);
	check_hugetlb_count(&r);
	return 0;
}
