/* SPDX-License-Identifier: Apache-2.0 */
/* Host-wide checks for the reliability tests. */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hostcheck.h"
#include "os/memory.h"
#include "testutil.h"

struct hc_host hc_host(void)
{
	struct hc_host h = { 0, 0, 0 };
	const struct sseg_os_meminfo_key keys[] = {
		{ "Shmem", &h.shmem }, { "HugePages_Free", &h.huge_free },
		{ "HugePages_Rsvd", &h.huge_rsvd },
	};

	CHECK_RC(sseg_os_meminfo_keys("/proc/meminfo", keys, 3), 0);
	return h;
}

int hc_host_back(struct hc_host before, uint64_t shmem_slack, int timeout_ms,
		 int64_t *shmem_left, int64_t *huge_left)
{
	for (int waited = 0;; waited += 20) {
		struct hc_host now = hc_host();

		*shmem_left = (int64_t)(now.shmem - before.shmem);
		*huge_left = (int64_t)before.huge_free - (int64_t)now.huge_free +
			     (int64_t)now.huge_rsvd - (int64_t)before.huge_rsvd;
		if (*shmem_left <= (int64_t)shmem_slack && now.huge_free == before.huge_free &&
		    now.huge_rsvd == before.huge_rsvd)
			return 0;
		if (waited >= timeout_ms) {
			fprintf(stderr,
				"host memory not back after %d ms: Shmem %+lld bytes, HugeTLB free "
				"%llu -> %llu, reserved %llu -> %llu\n",
				waited, (long long)*shmem_left,
				(unsigned long long)before.huge_free,
				(unsigned long long)now.huge_free,
				(unsigned long long)before.huge_rsvd,
				(unsigned long long)now.huge_rsvd);
			return -1;
		}
		tu_nap_ms(20);
	}
}

static int file_mentions(const char *path, const char *needle)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static int fd_mentions(const char *pid, const char *needle)
{
	char dir[64], path[320], target[512];
	struct dirent *e;
	int found = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%s/fd", pid);
	d = opendir(dir);
	while (d && !found && (e = readdir(d))) {
		ssize_t n;

		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		found = strstr(target, needle) != NULL;
	}
	if (d)
		closedir(d);
	return found;
}

int hc_memfd_holders(const char *label, int *pids, int max)
{
	char needle[160], maps[64];
	struct dirent *e;
	DIR *proc = opendir("/proc");
	int n = 0;

	/* The name ends the path: "sseg:kp-1" must not match "sseg:kp-10". */
	snprintf(needle, sizeof(needle), "/memfd:%s ", label);
	while (proc && (e = readdir(proc))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(maps, sizeof(maps), "/proc/%s/maps", e->d_name);
		if (file_mentions(maps, needle) || fd_mentions(e->d_name, needle)) {
			if (n < max)
				pids[n] = atoi(e->d_name);
			n++;
		}
	}
	if (proc)
		closedir(proc);
	return n;
}

int hc_names_rank(const char *text, int rank)
{
	for (const char *at = text; (at = strstr(at, "rank")); ) {
		at += 4;
		if (!strncmp(at, "(s)", 3))
			at += 3;
		else if (*at == 's')
			at++;
		/* "ranks 1, 2" and "rank 2" alike: a list of numbers. */
		while (*at == ' ' || isdigit((unsigned char)*at)) {
			char *end;
			long v;

			while (*at == ' ')
				at++;
			if (!isdigit((unsigned char)*at))
				break;
			v = strtol(at, &end, 10);
			if (v == rank)
				return 1;
			at = end;
			if (at[0] == ',' && at[1] == ' ')
				at += 1;
		}
	}
	return 0;
}

const char *hc_json(const char *text, char *buf, size_t len)
{
	size_t used = 0;

	for (const unsigned char *p = (const unsigned char *)text; *p && used + 7 < len; p++) {
		if (*p == '"' || *p == '\\')
			used += (size_t)snprintf(buf + used, len - used, "\\%c", *p);
		else if (*p < 0x20)
			used += (size_t)snprintf(buf + used, len - used, "\\u%04x", *p);
		else
			buf[used++] = (char)*p;
	}
	buf[used] = '\0';
	return buf;
}

void hc_record(const char *fmt, ...)
{
	const char *path = getenv("SSEG_RELIABILITY_OUT");
	char line[4096];
	va_list ap;
	int fd, n;

	if (!path || !*path)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* Several processes may record at once: one write each, appended. */
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) != n)
		fprintf(stderr, "could not record to %s\n", path);
	close(fd);
}

int hc_scale(const char *name, int fallback)
{
	const char *text = getenv(name);
	long v = text ? strtol(text, NULL, 10) : 0;

	return v > 0 && v < 1000000 ? (int)v : fallback;
}
