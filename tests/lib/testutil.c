/* SPDX-License-Identifier: Apache-2.0 */
#define _GNU_SOURCE /* unshare */
#include <dlfcn.h>
#include <sched.h>
#include <sys/mount.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "os/named.h"
#include "testutil.h"

int tu_error_has(const char *needle)
{
	if (strstr(sseg_last_error(), needle))
		return 1;
	fprintf(stderr, "expected the error to mention \"%s\"\n", needle);
	return 0;
}

void tu_name(char *buf, size_t len, const char *prefix)
{
	static int counter;

	snprintf(buf, len, "%s-%d-%d", prefix, (int)getpid(), counter++);
}

pid_t tu_fork(int (*fn)(void *arg), void *arg)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0)
		_exit(fn(arg));
	return pid;
}

int tu_wait(pid_t pid, int timeout_ms)
{
	struct timespec nap = { 0, 5 * 1000 * 1000 };
	int status;

	for (int waited = 0; waited <= timeout_ms; waited += 5) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid) {
			if (WIFEXITED(status))
				return WEXITSTATUS(status);
			return 128 + WTERMSIG(status);
		}
		if (r < 0)
			return -1;
		nanosleep(&nap, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

struct knob {
	char path[256];
	char saved[64];
};
static struct knob knobs[16];
static int nknobs;

/* A bounded copy that gcc -O2 does not flag as a possible truncation. */
static void copy_text(char *buf, size_t len, const char *text)
{
	size_t n = strnlen(text, len - 1);

	memcpy(buf, text, n);
	buf[n] = '\0';
}

static int read_current(const char *path, char *buf, size_t len)
{
	char text[256];
	FILE *f = fopen(path, "r");
	char *open, *close;

	if (!f)
		return -errno;
	if (!fgets(text, sizeof(text), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	text[strcspn(text, "\n")] = '\0';
	open = strchr(text, '[');
	close = open ? strchr(open, ']') : NULL;
	if (open && close)
		*close = '\0';
	copy_text(buf, len, open && close ? open + 1 : text);
	return 0;
}

static int write_value(const char *path, const char *value)
{
	FILE *f = fopen(path, "w");
	int rc = 0;

	if (!f)
		return -errno;
	if (fputs(value, f) < 0)
		rc = -errno;
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

void tu_knobs_restore(void)
{
	while (nknobs > 0) {
		struct knob *k = &knobs[--nknobs];

		if (write_value(k->path, k->saved))
			fprintf(stderr, "could not restore %s to %s\n", k->path, k->saved);
	}
}

void tu_lock_machine(void)
{
	static int fd = -1;

	if (fd >= 0)
		return;
	/* Read-only is enough for flock, so another user's lock file serves;
	 * one this user creates is left open to every user's tests. */
	fd = open("/tmp/sharedseg-test-machine.lock", O_CREAT | O_RDONLY | O_CLOEXEC, 0666);
	if (fd >= 0)
		fchmod(fd, 0666);
	if (fd < 0 || flock(fd, LOCK_EX)) {
		perror("locking /tmp/sharedseg-test-machine.lock");
		exit(1);
	}
}

int tu_knob_set(const char *path, const char *value)
{
	struct knob *k;
	int rc;

	tu_lock_machine();
	if (nknobs == (int)(sizeof(knobs) / sizeof(knobs[0])))
		return -ENOSPC;
	k = &knobs[nknobs];
	rc = read_current(path, k->saved, sizeof(k->saved));
	if (rc)
		return rc;
	snprintf(k->path, sizeof(k->path), "%s", path);
	rc = write_value(path, value);
	if (rc)
		return rc;
	if (nknobs++ == 0)
		atexit(tu_knobs_restore);
	return 0;
}

int tu_hugetlb_reserve(unsigned n)
{
	const char *dir = "/sys/kernel/mm/hugepages/hugepages-2048kB";
	char path[256], value[32];
	unsigned long long total = 0, free_pages = 0;
	FILE *f;

	tu_lock_machine();
	snprintf(path, sizeof(path), "%s/free_hugepages", dir);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%llu", &free_pages) != 1) {
		if (f)
			fclose(f);
		fprintf(stderr, "no 2 MiB HugeTLB pool on this kernel\n");
		return TU_SKIP;
	}
	fclose(f);
	if (free_pages >= n)
		return 0;
	snprintf(path, sizeof(path), "%s/nr_hugepages", dir);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%llu", &total) != 1) {
		if (f)
			fclose(f);
		return TU_SKIP;
	}
	fclose(f);
	snprintf(value, sizeof(value), "%llu", total + (n - free_pages));
	if (tu_knob_set(path, value)) {
		fprintf(stderr, "cannot write %s (not root?)\n", path);
		return TU_SKIP;
	}
	snprintf(path, sizeof(path), "%s/free_hugepages", dir);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%llu", &free_pages) != 1 || free_pages < n) {
		if (f)
			fclose(f);
		fprintf(stderr, "the kernel gave only %llu free 2 MiB pages of %u asked\n",
			free_pages, n);
		return TU_SKIP;
	}
	fclose(f);
	return 0;
}

#include <dirent.h>
#include <stdint.h>
#include <pthread.h>

#include "host_identity.h"

struct inproc {
	struct tu_rank *rank;
	unsigned char *blobs;
	int phase; /* 0 create, 1 complete */
};

static void *inproc_main(void *arg)
{
	struct inproc *job = arg;
	struct tu_rank *r = job->rank;

	sseg_test_host(r->host);
	if (job->phase == 0) {
		r->create_rc = sseg_create(&r->opts, &r->seg,
					   job->blobs + (size_t)r->opts.rank * SSEG_BLOB_SIZE);
		if (r->create_rc)
			snprintf(r->error, sizeof(r->error), "%s", sseg_last_error());
	} else if (r->seg) {
		r->complete_rc = sseg_complete(r->seg, job->blobs);
		if (r->complete_rc)
			snprintf(r->error, sizeof(r->error), "%s", sseg_last_error());
	}
	sseg_test_host(NULL);
	return NULL;
}

static void inproc_phase(struct tu_rank *ranks, int n, unsigned char *blobs, int phase)
{
	pthread_t tid[64];
	struct inproc jobs[64];

	if (n > 64)
		abort();
	for (int i = 0; i < n; i++) {
		jobs[i] = (struct inproc){ &ranks[i], blobs, phase };
		if (pthread_create(&tid[i], NULL, inproc_main, &jobs[i]))
			abort();
	}
	for (int i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
}

unsigned char *tu_create_inproc(struct tu_rank *ranks, int n)
{
	unsigned char *blobs = calloc((size_t)n, SSEG_BLOB_SIZE);

	if (!blobs)
		abort();
	inproc_phase(ranks, n, blobs, 0);
	return blobs;
}

int tu_run_inproc(struct tu_rank *ranks, int n)
{
	unsigned char *blobs = tu_create_inproc(ranks, n);
	int failed = 0;

	inproc_phase(ranks, n, blobs, 1);
	free(blobs);
	for (int i = 0; i < n; i++) {
		if (!ranks[i].create_rc && !ranks[i].complete_rc)
			continue;
		failed++;
		fprintf(stderr, "(rank %d failed: %s)\n", i, ranks[i].error);
	}
	return failed;
}

void tu_destroy_all(struct tu_rank *ranks, int n)
{
	for (int i = 0; i < n; i++) {
		if (ranks[i].seg && sseg_destroy(ranks[i].seg)) {
			fprintf(stderr, "destroy of rank %d failed: %s\n", i, sseg_last_error());
			exit(1);
		}
		ranks[i].seg = NULL;
	}
}

double tu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int tu_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* What a segment can leave behind: a memfd mapping, or an address window
 * (anonymous PROT_NONE). Other mappings come and go with the allocator
 * (a sanitizer's in particular) and are not counted. */
static int scan_maps(uint64_t *window_bytes)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	*window_bytes = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi, ino;
		char perms[8];
		int path_at = 0;

		if (sscanf(line, "%llx-%llx %7s %*s %*s %llu %n", &lo, &hi, perms, &ino, &path_at) < 4)
			continue;
		if (strstr(line, "memfd:"))
			n++;
		else if (!strcmp(perms, "---p") && ino == 0 && line[path_at] == '\0')
			*window_bytes += hi - lo;
	}
	fclose(f);
	return n;
}

struct tu_maps tu_maps(void)
{
	struct tu_maps m;

	m.memfd = scan_maps(&m.window_bytes);
	return m;
}

int tu_maps_same(struct tu_maps before, struct tu_maps after)
{
	int64_t grown = (int64_t)(after.window_bytes - before.window_bytes);

	if (after.memfd == before.memfd && grown < (256 << 10))
		return 1;
	fprintf(stderr, "mappings left behind: memfd %d -> %d, PROT_NONE windows %+lld bytes\n",
		before.memfd, after.memfd, (long long)grown);
	return 0;
}

/* ---- one rank, logs, and the fake drivers ---- */

sseg_t *tu_one_rank(const char *name, enum sseg_backend backend)
{
	SSEG_OPTS(o, .name = name, .size = 2 << 20, .world_size = 1, .backend = backend,
		  .pages = backend == SSEG_BACKEND_MEMFD ? SSEG_PAGES_BASE : SSEG_PAGES_AUTO);
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_complete(seg, blob), 0);
	return seg;
}

/* The lines of the file at path that contain needle, the first of them
 * copied into first; -1 when the file cannot be read. */
static int count_lines(const char *path, const char *needle, char *first, size_t len)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle) && n++ == 0)
			snprintf(first, len, "%s", line);
	fclose(f);
	return n;
}

/* Unrelated creates go on; each retries the pending one, in vain. */
static void unrelated_creates(const struct tu_pending *p)
{
	for (int i = 0; i < 3; i++) {
		sseg_t *other = tu_one_rank("unrelated", i == 1 ? p->backend : SSEG_BACKEND_MEMFD);

		CHECK(sseg_pending_count() == 1);
		p->fail(NULL, 0, 0, 0);
		CHECK_RC(sseg_destroy(other), 0);
		p->fail(p->entry, 1, -1, p->err);
	}
}

void tu_pending_contract(const struct tu_pending *p, char *first, size_t len)
{
	char log[] = "/tmp/sseg-pending-XXXXXX";
	int saved = dup(2), fd = mkstemp(log);
	sseg_t *seg;

	CHECK(fd >= 0 && saved >= 0);
	seg = tu_one_rank(p->name, p->backend);
	dup2(fd, 2); /* the library logs to stderr */
	p->fail(p->entry, 1, -1, p->err);
	CHECK_RC(sseg_destroy(seg), -EIO);
	CHECK_ERR_HAS(p->failure);
	CHECK_RC(sseg_destroy(seg), -EIO);
	CHECK(sseg_pending_count() == 0);
	CHECK_RC(sseg_destroy(seg), -EINPROGRESS);
	CHECK(sseg_pending_count() == 1);
	unrelated_creates(p);
	fflush(stderr);
	dup2(saved, 2);
	CHECK(count_lines(log, "pending cleanup", first, len) == 1);
	fprintf(stderr, "logged once: %s", first);
	/* The driver recovers: the next create finishes the teardown. */
	p->fail(NULL, 0, 0, 0);
	CHECK_RC(sseg_destroy(tu_one_rank("after", SSEG_BACKEND_MEMFD)), 0);
	CHECK(sseg_pending_count() == 0);
	close(saved);
	close(fd);
	unlink(log);
}

const char *tu_build_file(const char *file)
{
	static char path[512];
	const char *build = getenv("SSEG_BUILD_DIR");

	if (!build) { /* set by testenv.c, unless unset since */
		fprintf(stderr, "SSEG_BUILD_DIR is not set\n");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s", build, file);
	return path;
}

void *tu_fake_open(const char *path, const char *lib_env, const char *config_env,
		   const char *config, enum sseg_backend backend)
{
	void *lib;

	int rc;

	setenv(lib_env, path, 1);
	setenv(config_env, config, 1);
	/* Loaded is enough: a configuration may leave the backend unavailable
	 * (the test then checks why). */
	rc = sseg_check_support(backend, SSEG_PAGES_AUTO);
	lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (!lib) {
		fprintf(stderr, "%s is not the library that was loaded (%s): %s\n", path,
			dlerror(), rc ? sseg_last_error() : "supported");
		exit(1);
	}
	return lib;
}

void tu_fake_resolve(void *lib, const char *prefix, const char *const *names, void **slots,
		     size_t n)
{
	char symbol[128];

	for (size_t i = 0; i < n; i++) {
		snprintf(symbol, sizeof(symbol), "%s%s", prefix, names[i]);
		slots[i] = dlsym(lib, symbol);
		if (!slots[i]) {
			fprintf(stderr, "the fake lacks %s\n", symbol);
			exit(1);
		}
	}
}

int tu_fake_idle(const char *who, const struct tu_held *held, const char *what)
{
	int handles = held->handles(), reservations = held->reservations();
	int mappings = held->mappings(), registrations = held->registrations();
	int more = held->more(), bugs = held->bugs();

	if (!handles && !reservations && !mappings && !registrations && !more && !bugs)
		return 1;
	fprintf(stderr,
		"%s still holds %d handle(s), %d reservation(s), %d mapping(s), "
		"%d registration(s), %d %s; %d rule(s) broken\n",
		who, handles, reservations, mappings, registrations, more, what, bugs);
	return 0;
}

int tu_shell(const char *cmd)
{
	int st = system(cmd);

	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int tu_jsonl_count(const char *path, const char *needle, const char *also)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int n = 0;

	CHECK(f);
	while ((len = getline(&line, &cap, f)) > 0) {
		if (len < 3 || line[0] != '{' || strcmp(line + len - 2, "}\n") != 0) {
			fprintf(stderr, "not a JSON line: %s", line);
			n = -1;
			break;
		}
		n += strstr(line, needle) && (!also || strstr(line, also));
	}
	free(line);
	fclose(f);
	return n;
}

int tu_run_script(const char *script, const char *out_dir, const char *assignments)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), "env OUT='%s' %s bash '%s/%s' > '%s/stdout' 2>&1", out_dir,
		 assignments, getenv("SSEG_SOURCE_DIR"), script, out_dir);
	return tu_shell(cmd);
}

void tu_nap_ms(int ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&t, NULL);
}

void tu_group_socket(const char *name, char *buf, size_t len)
{
	char dir[SSEG_OS_NAMED_PATH];

	if (sseg_os_rundir(dir, sizeof(dir))) {
		fprintf(stderr, "no runtime directory: %s\n", sseg_last_error());
		abort();
	}
	snprintf(buf, len, "%s/group-%s", dir, name);
}

void tu_rundir_taken(unsigned uid)
{
	char dir[64];

	snprintf(dir, sizeof(dir), "/tmp/sharedseg-%u", uid);
	/* uid's own, as it would make it: the mount point, outside the namespace. */
	if (!mkdir(dir, 0700) && chown(dir, uid, uid))
		fprintf(stderr, "chown %s: %s\n", dir, strerror(errno));
	if (unshare(CLONE_NEWNS) || mount("", "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700,uid=0,gid=0")) {
		fprintf(stderr, "%s taken in a namespace of its own (unshare, mount): %s\n", dir,
			strerror(errno));
		exit(1);
	}
}
