/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg demo: N processes of this host map one segment. The parent
 * forks the ranks, gathers one report from each and prints what every rank
 * obtained and how much host memory the group used. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "demo_shared.h"

#define DEFAULT_TIMEOUT_MS 30000
#define PROGRESS_MIN_SIZE (1ull << 30)
#define POLL_MS 200
/* How long the ranks get to go after the demo is told to stop. */
#define STOP_GRACE_S 3.0

/* SIGTERM, SIGINT or SIGHUP to the demo: passed on to every rank, which
 * ends it and unmaps; the demo waits for them before it exits. */
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static void catch_stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

enum {
	OPT_RANKS = 1, OPT_SIZE, OPT_BACKEND, OPT_PAGES, OPT_POPULATE, OPT_NUMA, OPT_THREADS,
	OPT_TIMEOUT, OPT_NAME, OPT_READONLY, OPT_JSON, OPT_REGISTER, OPT_GPUS,
};

static const struct cli_opt demo_opts[] = {
	{ "ranks", true, OPT_RANKS },     { "size", true, OPT_SIZE },
	{ "backend", true, OPT_BACKEND }, { "pages", true, OPT_PAGES },
	{ "populate", true, OPT_POPULATE }, { "numa", true, OPT_NUMA },
	{ "threads", true, OPT_THREADS }, { "timeout", true, OPT_TIMEOUT },
	{ "name", true, OPT_NAME },       { "readonly-peers", false, OPT_READONLY },
	{ "json", false, OPT_JSON },      { "host-register", false, OPT_REGISTER },
	{ "gpus", true, OPT_GPUS },       { NULL, false, 0 },
};

void demo_help(FILE *out)
{
	fprintf(out,
		"usage: sharedseg demo --ranks N --size SIZE [--backend B] [--pages P]\n"
		"                      [--populate P] [--numa X] [--threads T] [--timeout MS]\n"
		"                      [--name NAME] [--readonly-peers] [--host-register]\n"
		"                      [--gpus G] [--json]\n"
		"\n"
		"Forks N processes (ranks 0..N-1; rank 0 owns the segment) that map ONE\n"
		"segment of SIZE bytes through the library's local exchange. The owner fills\n"
		"it with a pattern, every peer checks every byte, every peer writes a mark\n"
		"at the start of its slice (size/N) and the owner checks every mark. While\n"
		"all ranks still map it, every rank measures its mapping in /proc/self/smaps:\n"
		"its resident bytes and its share of them (Pss: a page N ranks map counts\n"
		"1/N in each; HugeTLB pages, which Pss leaves out, count whole when only it\n"
		"maps them, else 1/N). The host memory the group uses is the sum of the\n"
		"shares: each of the segment's pages once, whatever other processes of the\n"
		"host allocate or free meanwhile; unknown where the pages are in no smaps\n"
		"(a driver's memory). Prints one row per rank (the share as mapped Pss) and\n"
		"the totals against N private copies.\n"
		"\n"
		"options:\n"
		"  --ranks N         processes in the group, 1..1024 (default 4)\n"
		"  --size SIZE       segment bytes: 4096, 256MiB, 256M, 4G, 1.5GiB (default 256MiB)\n"
		"  --backend B       %s (default auto: memfd)\n"
		"  --pages P         %s (hugetlb: 2 MiB)\n"
		"                    (default $SHAREDSEG_PAGES, else auto: HugeTLB if the pool\n"
		"                    can back SIZE, else THP if shmem_enabled allows it, else\n"
		"                    base pages)\n"
		"  --populate P      owner (the owner faults every page in, with threads),\n"
		"                    spread (each rank faults its slice), lazy (first touch),\n"
		"                    background (the owner's threads fault every page in after\n"
		"                    complete, while the segment is in use) (default\n"
		"                    $SHAREDSEG_POPULATE, else owner)\n"
		"  --numa X          none, interleave, device-local, or a node number (default\n"
		"                    $SHAREDSEG_NUMA, else none)\n"
		"  --threads T       owner population threads, 0..256; 0: up to 4 (default 0)\n"
		"  --timeout MS      bound on every wait for another rank (default 30000), and\n"
		"                    the time the population may take: 2 s a GiB on base\n"
		"                    pages, 1 s on huge pages (as the Python package waits)\n"
		"  --name NAME       group name, 1..%u bytes (default sseg-demo-PID)\n"
		"  --readonly-peers  peers map read-only; the owner writes the marks itself\n"
		"  --host-register   pin each rank's mapping for device DMA (cuMemHostRegister\n"
		"                    or aclrtHostRegister: needs the CUDA driver or the ACL\n"
		"                    runtime)\n"
		"  --gpus G          rank r uses device r %% G (cuda and ascend backends,\n"
		"                    --host-register; default 1: every rank on device 0)\n"
		"  --json            one JSON object instead of the table: ranks, size, backend,\n"
		"                    pages, page_size, populate, host_bytes_used (null:\n"
		"                    unknown), host_bytes_private_equivalent, verified,\n"
		"                    create_s, complete_s, pages_verified, huge_bytes,\n"
		"                    per_rank [...]\n"
		"                    (each with resident_wait_s: populate=background's wait)\n"
		"  -h, --help        this text\n"
		"\n"
		"A failing rank's error is printed on stderr and the exit status is 1.\n"
		"On a terminal, a segment of 1 GiB or more shows population progress.\n"
		"\n"
		"examples:\n"
		"  sharedseg demo --ranks 4 --size 256MiB\n"
		"  sharedseg demo --ranks 8 --size 4GiB --pages hugetlb --populate spread\n"
		"  sharedseg demo --ranks 2 --size 64MiB --pages base --readonly-peers --json\n",
		cli_names(CLI_BACKENDS), cli_names(CLI_PAGES), SSEG_NAME_MAX);
}

static int parse_value(struct demo_config *c, int id, const char *v)
{
	switch (id) {
	case OPT_RANKS:
		return cli_parse_int("demo", "--ranks", v, 1, 1024, &c->ranks);
	case OPT_SIZE:
		return cli_parse_size("demo", "--size", v, &c->size);
	case OPT_BACKEND:
		return cli_parse_backend("demo", v, &c->backend);
	case OPT_PAGES:
		c->given |= 1u << OPT_PAGES;
		return cli_parse_pages("demo", "--pages", v, &c->pages);
	case OPT_POPULATE:
		c->given |= 1u << OPT_POPULATE;
		return cli_parse_populate("demo", "--populate", v, &c->populate);
	case OPT_NUMA:
		c->given |= 1u << OPT_NUMA;
		return cli_parse_numa("demo", "--numa", v, &c->numa, &c->numa_node);
	case OPT_THREADS:
		return cli_parse_int("demo", "--threads", v, 0, 256, &c->threads);
	case OPT_TIMEOUT:
		return cli_parse_int("demo", "--timeout", v, 1, 3600 * 1000, &c->timeout_ms);
	case OPT_NAME:
		if (!*v || strlen(v) > SSEG_NAME_MAX)
			return cli_usage_error("demo", "--name: '%s' must be 1 to %u bytes", v,
					       SSEG_NAME_MAX);
		snprintf(c->name, sizeof(c->name), "%s", v);
		return 0;
	case OPT_READONLY:
		c->readonly_peers = true;
		return 0;
	case OPT_JSON:
		c->json = true;
		return 0;
	case OPT_REGISTER:
		c->host_register = true;
		return 0;
	case OPT_GPUS:
		return cli_parse_int("demo", "--gpus", v, 1, 1024, &c->gpus);
	}
	return CLI_USAGE;
}

/* 0 and a filled config, CLI_USAGE, or -1 when --help was printed. */
/* What the user did not give: the operator's defaults (SHAREDSEG_PAGES,
 * SHAREDSEG_NUMA, SHAREDSEG_POPULATE), as the library resolves them for
 * every caller, and the wait the population may take on top of --timeout. */
static int operators_defaults(struct demo_config *c)
{
	static const struct {
		const char *setting;
		int id;
	} left[] = { { "pages", OPT_PAGES }, { "numa", OPT_NUMA }, { "populate", OPT_POPULATE } };
	const char *source;
	char text[128];
	int rc = 0;

	for (size_t i = 0; !rc && i < sizeof(left) / sizeof(left[0]); i++) {
		if (c->given & (1u << left[i].id))
			continue;
		if (sseg_setting_default(left[i].setting, text, sizeof(text), &source))
			return cli_usage_error("demo", "%s", sseg_last_error());
		if (left[i].id == OPT_PAGES)
			rc = cli_parse_pages("demo", source, text, &c->pages);
		else if (left[i].id == OPT_NUMA)
			rc = cli_parse_numa("demo", source, text, &c->numa, &c->numa_node);
		else
			rc = cli_parse_populate("demo", source, text, &c->populate);
	}
	c->wait_ms = c->timeout_ms +
		     (int)sseg_population_allowance_ms(c->size, c->pages, c->populate);
	return rc;
}

static int parse_args(int argc, char **argv, struct demo_config *c)
{
	struct cli_args a = { "demo", argc, argv, 1 };
	const char *v;
	int id;

	memset(c, 0, sizeof(*c));
	c->ranks = 4;
	c->gpus = 1;
	c->size = 256ull << 20;
	c->timeout_ms = DEFAULT_TIMEOUT_MS;
	snprintf(c->name, sizeof(c->name), "sseg-demo-%d", (int)getpid());
	while ((id = cli_next(&a, demo_opts, &v)) != CLI_OPT_END) {
		if (id == CLI_OPT_HELP) {
			demo_help(stdout);
			return -1;
		}
		if (id == CLI_OPT_BAD || parse_value(c, id, v))
			return CLI_USAGE;
	}
	if (c->size / (uint64_t)c->ranks < 8)
		return cli_usage_error("demo", "--size: %llu bytes leave no 8-byte slice per rank "
				       "for %d ranks", (unsigned long long)c->size, c->ranks);
	return operators_defaults(c);
}

/* The state of the parent while the ranks run. */
struct parent {
	const struct demo_config *c;
	pid_t *pids;
	int *status;          /* wait status of each rank that ended */
	int nalive;
	int report_fd;
	unsigned char buf[sizeof(struct rank_report)];
	size_t buffered;
	int nreports;
	bool progress_shown;
	bool populated;       /* the progress line has seen all of it */
	struct demo_result res;
};

static int spawn_ranks(struct parent *p)
{
	int fds[2];

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	p->report_fd = fds[0];
	for (int r = 0; r < p->c->ranks; r++) {
		pid_t pid = fork();

		if (pid < 0) {
			fprintf(stderr, "sharedseg demo: fork of rank %d: %s\n", r, strerror(errno));
			break;
		}
		if (pid == 0) {
			signal(SIGTERM, SIG_DFL);
			signal(SIGINT, SIG_DFL);
			signal(SIGHUP, SIG_DFL);
			close(fds[0]);
			_exit(demo_rank_main(p->c, r, fds[1]));
		}
		p->pids[r] = pid;
		p->nalive++;
	}
	close(fds[1]);
	return p->nalive == p->c->ranks ? 0 : -EAGAIN;
}

static void take_report(struct parent *p, const struct rank_report *r)
{
	if (r->rank < 0 || r->rank >= p->c->ranks)
		return;
	p->res.reports[r->rank] = *r;
	p->res.reported[r->rank] = true;
	p->nreports++;
}

/* Reads what the pipe holds; false at end of file (every rank is gone). */
static bool read_reports(struct parent *p)
{
	ssize_t n = read(p->report_fd, p->buf + p->buffered, sizeof(p->buf) - p->buffered);

	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n == 0)
		return false;
	p->buffered += (size_t)n;
	if (p->buffered == sizeof(p->buf)) {
		struct rank_report r;

		memcpy(&r, p->buf, sizeof(r));
		take_report(p, &r);
		p->buffered = 0;
	}
	return true;
}

/* Run after the pipe is drained: a rank that exited before the parent read
 * its report did report. */
static void note_exits(struct parent *p)
{
	for (int r = 0; r < p->c->ranks; r++) {
		int status = p->status[r];
		char note[160];

		if (WIFSIGNALED(status))
			snprintf(note, sizeof(note), "rank %d was killed by signal %d (%s)", r,
				 WTERMSIG(status), strsignal(WTERMSIG(status)));
		else if (WIFEXITED(status) && WEXITSTATUS(status) && !p->res.reported[r])
			snprintf(note, sizeof(note), "rank %d exited with status %d without a report",
				 r, WEXITSTATUS(status));
		else
			continue;
		p->res.exit_note[r] = strdup(note);
	}
}

static void reap(struct parent *p, int flags)
{
	for (int r = 0; r < p->c->ranks; r++) {
		int status;

		if (p->pids[r] <= 0 || waitpid(p->pids[r], &status, flags) != p->pids[r])
			continue;
		p->pids[r] = 0;
		p->nalive--;
		p->status[r] = status;
	}
}

/* Passes the signal on and waits a little for every rank to end. */
static void stop_ranks(struct parent *p, int sig)
{
	double deadline = cli_now() + STOP_GRACE_S;

	for (int r = 0; r < p->c->ranks; r++)
		if (p->pids[r] > 0)
			kill(p->pids[r], sig);
	while (p->nalive > 0 && cli_now() < deadline) {
		usleep(20 * 1000);
		reap(p, WNOHANG);
	}
}

static void kill_stragglers(struct parent *p)
{
	for (int r = 0; r < p->c->ranks; r++)
		if (p->pids[r] > 0)
			kill(p->pids[r], SIGKILL);
	reap(p, 0);
}

/* Population shows in /proc/meminfo; once it is complete the ranks are
 * checking the bytes, which meminfo cannot show. */
static void show_progress(struct parent *p)
{
	char used[32], total[32];
	struct host_mem now;
	int64_t delta;

	if (p->populated || host_mem_read(&now))
		return;
	delta = (int64_t)host_mem_total(&now) - (int64_t)host_mem_total(&p->c->baseline);
	cli_format_size(delta > 0 ? (uint64_t)delta : 0, used, sizeof(used));
	cli_format_size(p->c->size, total, sizeof(total));
	p->populated = delta >= (int64_t)p->c->size;
	if (p->populated)
		fprintf(stderr, "\rpopulated %s; the ranks are checking the bytes\033[K", total);
	else
		fprintf(stderr, "\rpopulating: %s / %s\033[K", used, total);
	p->progress_shown = true;
}

static void collect(struct parent *p)
{
	bool progress = isatty(STDERR_FILENO) && p->c->size >= PROGRESS_MIN_SIZE;
	double deadline = cli_now() + demo_run_bound_s(p->c);
	struct pollfd pfd = { .fd = p->report_fd, .events = POLLIN };
	bool open = true;

	while (open || p->nalive > 0) {
		if (stop_signal) {
			stop_ranks(p, stop_signal);
			break;
		}
		if (cli_now() > deadline) {
			p->res.timed_out = true;
			kill_stragglers(p);
			break;
		}
		if (open && poll(&pfd, 1, POLL_MS) > 0)
			open = read_reports(p);
		else if (!open)
			usleep(POLL_MS * 1000);
		reap(p, WNOHANG);
		if (progress && p->nreports == 0)
			show_progress(p);
	}
	if (p->progress_shown)
		fprintf(stderr, "\r\033[K");
}

static int run_parent(const struct demo_config *c)
{
	struct parent p = { .c = c };
	int ok = 0;

	p.pids = calloc((size_t)c->ranks, sizeof(*p.pids));
	p.status = calloc((size_t)c->ranks, sizeof(*p.status));
	p.res.reports = calloc((size_t)c->ranks, sizeof(*p.res.reports));
	p.res.reported = calloc((size_t)c->ranks, sizeof(*p.res.reported));
	p.res.exit_note = calloc((size_t)c->ranks, sizeof(*p.res.exit_note));
	if (!p.pids || !p.status || !p.res.reports || !p.res.reported || !p.res.exit_note) {
		fprintf(stderr, "sharedseg demo: out of memory\n");
		return CLI_FAIL;
	}
	fflush(NULL); /* the ranks must not repeat buffered output */
	catch_stop_signals();
	if (spawn_ranks(&p) == 0 || p.nalive > 0)
		collect(&p);
	if (p.nalive > 0)
		kill_stragglers(&p);
	if (stop_signal) {
		fprintf(stderr, "sharedseg demo: stopped by signal %d; every rank has ended\n",
			(int)stop_signal);
		goto out;
	}
	note_exits(&p);
	ok = demo_all_verified(c, &p.res);
	if (c->json)
		demo_print_json(c, &p.res);
	else if (ok)
		demo_print_table(c, &p.res);
	if (!ok)
		demo_print_errors(c, &p.res);
out:
	for (int r = 0; r < c->ranks; r++)
		free(p.res.exit_note[r]);
	free(p.res.exit_note);
	free(p.res.reported);
	free(p.res.reports);
	free(p.status);
	free(p.pids);
	if (stop_signal)
		return 128 + stop_signal;
	return ok ? CLI_OK : CLI_FAIL;
}

/* Asked in a child: a GPU driver initialised in this process would not
 * work in the ranks it then forks. */
static bool supported(const struct demo_config *c)
{
	char why[512] = "";
	int fds[2], status = 0;
	ssize_t n;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return true; /* the ranks will say it themselves */
	pid = fork();
	if (pid == 0) {
		int rc = sseg_check_support_size(c->backend, c->pages, c->size);

		if (rc)
			(void)!write(fds[1], sseg_last_error(), strlen(sseg_last_error()));
		_exit(rc ? 1 : 0);
	}
	close(fds[1]);
	n = pid > 0 ? read(fds[0], why, sizeof(why) - 1) : 0;
	close(fds[0]);
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return true;
	why[n > 0 ? n : 0] = '\0';
	if (WEXITSTATUS(status))
		fprintf(stderr, "sharedseg demo: %s\n", why);
	return WEXITSTATUS(status) == 0;
}

int demo_main(int argc, char **argv)
{
	struct demo_config c;
	int rc = parse_args(argc, argv, &c);

	if (rc)
		return rc < 0 ? CLI_OK : rc;
	/* What this machine cannot offer is a usage error (exit 2), as the
	 * help says, not a failure of the run. */
	if (!supported(&c))
		return CLI_USAGE;
	if (host_mem_read(&c.baseline)) {
		fprintf(stderr, "sharedseg demo: cannot read /proc/meminfo: %s\n", strerror(errno));
		return CLI_FAIL;
	}
	return run_parent(&c);
}
