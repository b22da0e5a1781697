/* SPDX-License-Identifier: Apache-2.0 */
/* Root's `sharedseg ls` against an ordinary local user (uid 65534) who
 * names memfds, tags and its own command to mislead it: the JSON stays
 * valid UTF-8 (utf8); the table prints no control character (escapes); a
 * name the kernel writes longer than a line buffer forges no mapping of
 * root's segment (long_line); a tag page claims no cuda segment of root's
 * (driver_claim), and two groups of one user that declare the same one
 * stay two (two_groups); a thousand memfds are listed from one scan in bounded
 * memory (scale); a process that exits after the scan keeps the uid and
 * command it had (exited); another user's segment of the same name says
 * whose it is in the document, the tool's JSON and its table (users); a
 * tag page with nothing behind it is listed as declared, with no mapped
 * bytes (declared_only). Needs root (skips otherwise); one case runs when named on the command
 * line. */
#define _GNU_SOURCE /* memfd_create, setresuid */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fakeutil.h"
#include "list.h"
#include "listing.h"
#include "runcases.h"
#include "stranger.h"
#include "testutil.h"

#define RANKS 3
#define SZ (8u << 20)

/* ---- reading the list ---- */

/* Strict UTF-8: no stray byte, overlong form, surrogate or past U+10FFFF. */
static bool valid_utf8(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = p[i], cp, len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2
					   : (c & 0xf0) == 0xe0 ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
		static const unsigned least[5] = { 0, 0, 0x80, 0x800, 0x10000 };

		if (!len || i + len > n)
			return false;
		cp = len == 1 ? c : c & (0x7fu >> len);
		for (unsigned k = 1; k < len; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if (len > 1 && (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
			return false;
		i += len;
	}
	return true;
}

/* ---- 1: bytes that are not UTF-8 ---- */

static int bad_utf8(void *arg)
{
	prctl(PR_SET_NAME, "ls-\xfe\xff-comm", 0, 0, 0);
	return stranger_hold_memfd(arg, true) < 0;
}

static void utf8(void)
{
	char name[96], shown[96];
	struct stranger h = { .act = bad_utf8, .arg = name };
	size_t len;
	char *text;

	snprintf(name, sizeof(name), "sseg:ls-utf8-%d-\xff\xc0\xaf-end", (int)getpid());
	snprintf(shown, sizeof(shown), "ls-utf8-%d-\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd-end",
		 (int)getpid());
	stranger_start(&h);
	text = listing_now();
	CHECK(valid_utf8((const unsigned char *)text, strlen(text)));
	CHECK(segment_of(text, shown)); /* each bad byte is U+FFFD */
	CHECK(strstr(text, "\"comm\":\"ls-\xef\xbf\xbd\xef\xbf\xbd-comm\""));
	free(text);
	text = run_ls("--json", &len);
	CHECK(valid_utf8((const unsigned char *)text, len));
	free(text);
	stranger_stop(&h);
}

/* ---- 2: terminal escapes in the table ---- */

static int escaping(void *arg)
{
	prctl(PR_SET_NAME, "\x1b]0;pwn\x07\xc2\x9b" "2J", 0, 0, 0);
	return stranger_hold_memfd(arg, true) < 0;
}

static void escapes(void)
{
	char name[96], shown[128];
	struct stranger h = { .act = escaping, .arg = name };
	size_t len;
	char *table;

	snprintf(name, sizeof(name), "sseg:ls-esc-%d\x1b[2J\x1b[31mFAKE\xe2\x80\xae", (int)getpid());
	snprintf(shown, sizeof(shown), "ls-esc-%d\\x1b[2J\\x1b[31mFAKE\\u202e", (int)getpid());
	stranger_start(&h);
	table = run_ls("", &len);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s", table);
	for (size_t i = 0; i < len; i++)
		CHECK(table[i] == '\n' || ((unsigned char)table[i] >= 0x20 && table[i] != 0x7f));
	CHECK(!strstr(table, "\xc2\x9b") && !strstr(table, "\xe2\x80\xae"));
	CHECK(strstr(table, shown));
	CHECK(strstr(table, "\\x1b]0;pwn\\x07"));
	free(table);
	stranger_stop(&h);
}

/* ---- 3: a name longer than a line buffer ---- */

struct victim {
	char name[64];
	unsigned maj, min;
	unsigned long long ino;
};

/* The forger is forked before the victim's segment exists (a child forked
 * after it would map it for real) and learns of it through info. */
struct forgery {
	int info[2];
	struct victim v;
};

/* The smaps line of this process's mapping whose path starts with path. */
static bool own_line(const char *path, char *line, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char *l = NULL;
	size_t cap = 0;
	bool found = false;

	while (f && !found && getline(&l, &cap, f) > 0)
		if (strstr(l, path)) {
			snprintf(line, len, "%s", l);
			found = true;
		}
	free(l);
	if (f)
		fclose(f);
	return found;
}

/* A memfd whose smaps line, cut at 511 characters, goes on with a mapping
 * of the victim's inode (the kernel writes each newline as \012, 4 bytes),
 * then a tag that makes that mapping rank 0 of a world of 99. */
static int forge(void *arg)
{
	struct forgery *f = arg;
	const struct victim *v = &f->v;
	char name[256], fake[160], line[2048], tag[128];
	const char *path;
	int col, escaped, n;

	close(f->info[1]);
	if (read(f->info[0], &f->v, sizeof(f->v)) != sizeof(f->v))
		return 1;
	if (stranger_hold_memfd("sseg:p", true) < 0 || !own_line("/memfd:sseg:p ", line, sizeof(line)))
		return 1;
	path = strstr(line, "/memfd:sseg:p ");
	col = (int)(path - line) + (int)strlen("/memfd:sseg:");
	escaped = 511 - col;
	snprintf(fake, sizeof(fake), "1000-2000 rw-s 00000000 %02x:%02x %llu /memfd:sseg:%s", v->maj,
		 v->min, v->ino, v->name);
	n = snprintf(name, sizeof(name), "sseg:");
	for (int i = 0; i < escaped / 4; i++)
		name[n++] = '\n';
	for (int i = 0; i < escaped % 4; i++)
		name[n++] = 'x';
	snprintf(name + n, sizeof(name) - (size_t)n, "%s", fake);
	if (strlen(name) > 249 || stranger_hold_memfd(name, true) < 0 ||
	    !own_line("/memfd:sseg:\\012", line, sizeof(line)) ||
	    strncmp(line + 511, "1000-2000 ", 10))
		return 1; /* the forgery would not be where the old reader cuts */
	snprintf(tag, sizeof(tag), "sseg-tag:%s rank=0 world=99 owner=0", v->name);
	return stranger_hold_memfd(tag, true) < 0;
}

static void long_line(void)
{
	struct forgery f;
	struct victim v;
	struct stranger h = { .act = forge, .arg = &f };
	char label[96], line[1024], needle[32];
	const char *seg;
	sseg_t *seg_h;
	char *text;

	CHECK(pipe(f.info) == 0);
	stranger_fork(&h);
	close(f.info[0]);
	memset(&v, 0, sizeof(v));
	tu_name(v.name, sizeof(v.name), "ls-victim");
	seg_h = tu_one_rank(v.name, SSEG_BACKEND_MEMFD);
	snprintf(label, sizeof(label), "/memfd:sseg:%s ", v.name);
	CHECK(own_line(label, line, sizeof(line)));
	CHECK(sscanf(line, "%*x-%*x %*s %*x %x:%x %llu", &v.maj, &v.min, &v.ino) == 3);
	CHECK(write(f.info[1], &v, sizeof(v)) == sizeof(v));
	close(f.info[1]);
	stranger_ready(&h);
	text = listing_now();
	seg = segment_of(text, v.name);
	CHECK(seg);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", seg);
	CHECK(!has_pid(seg, h.pid));
	CHECK(in_segment(seg, "\"world_size\":1,\"owner_rank\":0"));
	snprintf(needle, sizeof(needle), "\"owner_pid\":%d,", (int)getpid());
	CHECK(in_segment(seg, needle));
	free(text);
	stranger_stop(&h);
	CHECK_RC(sseg_destroy(seg_h), 0);
}

/* ---- 4: a tag page that claims a cuda segment ---- */

struct job {
	char name[64];
	char exchange[64]; /* the local exchange's name; "": name */
	int rank, ready_fd, done_fd, done_w;
};

static int rank_main(void *arg)
{
	const struct job *j = arg;
	SSEG_OPTS(o, .name = j->name, .size = SZ, .world_size = RANKS, .rank = j->rank,
		  .timeout_ms = 10000, .backend = SSEG_BACKEND_CUDA);
	struct sseg_local_group *g;
	struct tu_fake fake;
	sseg_t *seg;
	char c;

	close(j->done_w);
	tu_fake_load("devices=2", &fake);
	CHECK_RC(sseg_local_group_open(j->exchange[0] ? j->exchange : j->name, j->rank, RANKS,
					10000, &g), 0);
	CHECK_RC(sseg_open(&o, sseg_local_allgather, g, &seg), 0);
	CHECK(write(j->ready_fd, "r", 1) == 1);
	CHECK(read(j->done_fd, &c, 1) == 0);
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_local_group_close(g);
	return 0;
}

/* The tag rank 0 maps: "sseg-tag:NAME rank=0 ... page=Z". */
static void tag_of(pid_t pid, const char *name, char *tag, size_t len)
{
	char path[64], label[96], *line = NULL, *at;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	snprintf(label, sizeof(label), "/memfd:sseg-tag:%s rank=", name);
	f = fopen(path, "re");
	CHECK(f);
	tag[0] = '\0';
	while (!tag[0] && getline(&line, &cap, f) > 0)
		if ((at = strstr(line, label))) {
			at += strlen("/memfd:");
			at[strcspn(at, "\n")] = '\0';
			if (strstr(at, " (deleted)"))
				*strstr(at, " (deleted)") = '\0';
			snprintf(tag, len, "%s", at);
		}
	free(line);
	fclose(f);
	CHECK(tag[0]);
}

static int claim(void *arg)
{
	return stranger_hold_memfd(arg, true) < 0;
}

static void driver_claim(void)
{
	struct job jobs[RANKS];
	int ready[2], done[2];
	pid_t pids[RANKS];
	char c, name[64], tag[256], needle[32];
	struct stranger h = { .act = claim, .arg = tag };
	const char *seg;
	char *text;

	CHECK(pipe(ready) == 0 && pipe(done) == 0);
	tu_name(name, sizeof(name), "ls-claim");
	for (int r = 0; r < RANKS; r++) {
		jobs[r] = (struct job){ .rank = r, .ready_fd = ready[1], .done_fd = done[0],
					.done_w = done[1] };
		snprintf(jobs[r].name, sizeof(jobs[r].name), "%s", name);
	}
	for (int r = RANKS - 1; r >= 0; r--)
		pids[r] = tu_fork(rank_main, &jobs[r]);
	close(done[0]);
	close(ready[1]);
	for (int r = 0; r < RANKS; r++)
		CHECK(read(ready[0], &c, 1) == 1);
	tag_of(pids[0], name, tag, sizeof(tag));
	stranger_start(&h);
	text = listing_now();
	for (seg = segment_of(text, name); seg && !has_pid(seg, pids[0]);)
		seg = segment_of(seg + 1, name);
	CHECK(seg);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", seg);
	CHECK(!has_pid(seg, h.pid));
	snprintf(needle, sizeof(needle), "\"owner_pid\":%d,", (int)pids[0]);
	CHECK(in_segment(seg, needle));
	for (int r = 1; r < RANKS; r++)
		CHECK(has_pid(seg, pids[r]));
	free(text);
	stranger_stop(&h);
	close(done[1]);
	for (int r = 0; r < RANKS; r++)
		CHECK(tu_wait(pids[r], 10000) == 0);
	close(ready[0]);
}

/* Two groups of one user that declare the same cuda segment (another
 * exchange each) are two segments, each with its own ranks: their tags
 * name the owner's pid and create nonce. */
static void two_groups(void)
{
	struct job jobs[2][RANKS];
	int ready[2], done[2];
	pid_t pids[2][RANKS];
	char c, name[64], needle[32];
	const char *seg;
	char *text;

	CHECK(pipe(ready) == 0 && pipe(done) == 0);
	tu_name(name, sizeof(name), "ls-twin");
	for (int g = 0; g < 2; g++)
		for (int r = 0; r < RANKS; r++) {
			jobs[g][r] = (struct job){ .rank = r, .ready_fd = ready[1],
						   .done_fd = done[0], .done_w = done[1] };
			snprintf(jobs[g][r].name, sizeof(jobs[g][r].name), "%s", name);
			snprintf(jobs[g][r].exchange, sizeof(jobs[g][r].exchange), "%s-x%d", name, g);
		}
	for (int g = 0; g < 2; g++)
		for (int r = RANKS - 1; r >= 0; r--)
			pids[g][r] = tu_fork(rank_main, &jobs[g][r]);
	close(done[0]);
	close(ready[1]);
	for (int i = 0; i < 2 * RANKS; i++)
		CHECK(read(ready[0], &c, 1) == 1);
	text = listing_now();
	for (int g = 0; g < 2; g++) {
		for (seg = segment_of(text, name); seg && !has_pid(seg, pids[g][0]);)
			seg = segment_of(seg + 1, name);
		CHECK(seg);
		snprintf(needle, sizeof(needle), "\"owner_pid\":%d,", (int)pids[g][0]);
		CHECK(in_segment(seg, needle));
		for (int r = 0; r < RANKS; r++) {
			CHECK(has_pid(seg, pids[g][r]));
			CHECK(!has_pid(seg, pids[1 - g][r]));
		}
	}
	free(text);
	close(done[1]);
	for (int g = 0; g < 2; g++)
		for (int r = 0; r < RANKS; r++)
			CHECK(tu_wait(pids[g][r], 10000) == 0);
	close(ready[0]);
}

/* ---- 5: many memfds ---- */

#define MANY 1000
#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
#define SEGMENT_BYTES 8192 /* the sanitizer's red zones and quarantine too */
#else
#define SEGMENT_BYTES 4096
#endif

static int many(void *arg)
{
	char name[64];

	for (int i = 0; i < MANY; i++) {
		snprintf(name, sizeof(name), "sseg:%s-%d", (const char *)arg, i);
		if (stranger_hold_memfd(name, false) < 0)
			return 1;
	}
	return 0;
}

/* One listing in this fresh process: prints the peak memory it took and
 * how many segments it listed (copies of this test list each other's). */
static int peak_main(void)
{
	struct rusage before, after;
	long segments = 0;
	char *text;

	getrusage(RUSAGE_SELF, &before);
	text = listing_now();
	getrusage(RUSAGE_SELF, &after);
	for (const char *p = strstr(text, "{\"name\":"); p; p = strstr(p + 1, "{\"name\":"))
		segments++;
	printf("%ld %ld\n", (after.ru_maxrss - before.ru_maxrss) * 1024, segments);
	free(text);
	return 0;
}

/* The peak, from a program of its own: a fork would start from this
 * process's high-water mark and reuse the heap it freed. */
static long listing_peak(int *segments)
{
	char cmd[64];
	long peak = -1, n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "/proc/%d/exe --peak", (int)getpid());
	p = popen(cmd, "r");
	CHECK(p);
	CHECK(fscanf(p, "%ld %ld", &peak, &n) == 2);
	CHECK(pclose(p) == 0);
	*segments = (int)n;
	return peak;
}

static char prefix_of_many[64];

static void scale(void)
{
	struct stranger h = { .act = many, .arg = prefix_of_many, .fds = MANY };
	long peak;
	int n;

	tu_name(prefix_of_many, sizeof(prefix_of_many), "ls-many");
	stranger_start(&h);
	/* Holders stored compactly: a few hundred bytes a segment, not 16 KiB. */
	peak = listing_peak(&n);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%d segments listed in %ld KiB at peak\n", n, peak >> 10);
	CHECK(n >= MANY && peak < n * (long)SEGMENT_BYTES);
	stranger_stop(&h);
}

/* ---- 6: a process that exits between the scan and the render ---- */

static int leaving(void *arg)
{
	prctl(PR_SET_NAME, "ls-gone", 0, 0, 0);
	return stranger_hold_memfd(arg, false) < 0;
}

static void exited(void)
{
	char name[64], label[80], needle[96], *text;
	struct stranger h = { .act = leaving, .arg = label };
	struct sseg_list l;
	const char *seg;

	tu_name(name, sizeof(name), "ls-gone");
	snprintf(label, sizeof(label), "sseg:%s", name);
	stranger_start(&h);
	CHECK_RC(sseg_list_scan(&l), 0);
	stranger_stop(&h); /* gone, and reaped: its pid may be anyone's now */
	text = listing_of(&l);
	sseg_list_free(&l);
	seg = segment_of(text, name);
	CHECK(seg);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", seg);
	snprintf(needle, sizeof(needle), "{\"pid\":%d,\"uid\":%d,\"comm\":\"ls-gone\"", (int)h.pid,
		 STRANGER_UID);
	CHECK(in_segment(seg, needle));
	free(text);
}

/* ---- 7: another user's segment of the same name ---- */

static int own_segment(void *arg)
{
	return !tu_one_rank(arg, SSEG_BACKEND_MEMFD); /* kept until it exits */
}

/* The table's line of the segment named name whose text has user. */
static bool table_has(const char *table, const char *name, const char *user)
{
	char needle[160];

	snprintf(needle, sizeof(needle), "\n%s  %s, ", name, user);
	return strstr(table, needle) || !strncmp(table, needle + 1, strlen(needle + 1));
}

/* Two segments of one name, root's and the stranger's: each says whose it
 * is, in the document, in the tool's JSON and in its table. */
static void users(void)
{
	char name[64], needle[160], *text;
	struct stranger h = { .act = own_segment, .arg = name };
	const char *seg, *theirs = NULL, *mine = NULL;
	sseg_t *seg_h;
	size_t len;

	tu_name(name, sizeof(name), "ls-user");
	stranger_start(&h);
	seg_h = tu_one_rank(name, SSEG_BACKEND_MEMFD);
	text = listing_now();
	for (seg = segment_of(text, name); seg; seg = segment_of(seg + 1, name)) {
		snprintf(needle, sizeof(needle), "{\"name\":\"%s\",\"uid\":", name);
		CHECK(!strncmp(seg, needle, strlen(needle)));
		if (has_pid(seg, h.pid))
			theirs = seg + strlen(needle);
		if (has_pid(seg, getpid()))
			mine = seg + strlen(needle);
	}
	CHECK(theirs && mine && theirs != mine);
	CHECK(!strncmp(theirs, "65534,", 6) && !strncmp(mine, "0,", 2));
	free(text);
	text = run_ls("--json", &len);
	snprintf(needle, sizeof(needle), "\"name\": \"%s\",\n      \"uid\": %d,", name, STRANGER_UID);
	CHECK(strstr(text, needle));
	snprintf(needle, sizeof(needle), "\"name\": \"%s\",\n      \"uid\": 0,", name);
	CHECK(strstr(text, needle));
	free(text);
	text = run_ls("", &len);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s", text);
	CHECK(table_has(text, name, "user nobody") && table_has(text, name, "user root"));
	free(text);
	CHECK_RC(sseg_destroy(seg_h), 0);
	stranger_stop(&h);
}

/* ---- 8: a tag page of driver memory and nothing else ---- */

/* 4 KiB named like a rank's tag page of a 64 MiB cuda segment. */
static int fake_tag(void *arg)
{
	char tag[256];

	snprintf(tag, sizeof(tag), "sseg-tag:%s rank=0 world=1 owner=0 backend=cuda "
		 "size=67108864 pages=hugetlb-2M page=2097152 group=1.00000001", (char *)arg);
	return stranger_hold_memfd(tag, true) < 0;
}

/* The listing says what the tag declares as declared, and no mapped size
 * that /proc did not show. */
static void declared_only(void)
{
	char name[64], needle[160], *text;
	struct stranger h = { .act = fake_tag, .arg = name };
	const char *seg;
	size_t len;

	tu_name(name, sizeof(name), "ls-fake-tag");
	stranger_start(&h);
	text = listing_now();
	seg = segment_of(text, name);
	CHECK(seg && has_pid(seg, h.pid));
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", seg);
	CHECK(in_segment(seg, "\"size\":67108864,\"declared\":true,"));
	snprintf(needle, sizeof(needle), "{\"pid\":%d,\"uid\":%d,", (int)h.pid, STRANGER_UID);
	CHECK(in_segment(seg, needle));
	CHECK(in_segment(seg, "\"rank\":0,\"mapped_bytes\":null,\"resident_bytes\":null,"));
	CHECK(in_segment(seg, "\"unmapped\":false"));
	free(text);
	text = run_ls("", &len);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s", text);
	snprintf(needle, sizeof(needle), "%s  user nobody, 64.0 MiB declared, hugetlb-2M pages, ",
		 name);
	CHECK(strstr(text, needle));
	snprintf(needle, sizeof(needle), "    pid %-8d rank 0    ", (int)h.pid);
	CHECK(strstr(text, needle) && !strncmp(strstr(strstr(text, needle), " mapped "),
						" mapped ?  ", 11));
	free(text);
	stranger_stop(&h);
}

/* Each case as the runner calls it: in a child of its own. */
#define LS_CASE(fn)                             \
	static int case_##fn(void *arg)         \
	{                                       \
		(void)arg;                      \
		fn();                           \
		return 0;                       \
	}
LS_CASE(utf8)
LS_CASE(escapes)
LS_CASE(long_line)
LS_CASE(driver_claim)
LS_CASE(two_groups)
LS_CASE(scale)
LS_CASE(exited)
LS_CASE(users)
LS_CASE(declared_only)

static const struct tu_case cases[] = {
	{ "utf8", case_utf8, NULL, 0 },
	{ "escapes", case_escapes, NULL, 0 },
	{ "long_line", case_long_line, NULL, 0 },
	{ "driver_claim", case_driver_claim, NULL, 0 },
	{ "two_groups", case_two_groups, NULL, 0 },
	{ "scale", case_scale, NULL, 0 },
	{ "exited", case_exited, NULL, 0 },
	{ "users", case_users, NULL, 0 },
	{ "declared_only", case_declared_only, NULL, 0 },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--peak"))
		return peak_main();
	if (geteuid() != 0) {
		printf("ls_hostile: needs root (its hostile processes become uid %d)\n", STRANGER_UID);
		return TU_SKIP;
	}
	if (tu_run_cases(argc, argv, cases))
		return 1;
	printf("ls_hostile: ok\n");
	return 0;
}
