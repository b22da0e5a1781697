/* SPDX-License-Identifier: Apache-2.0 */
/* Host identity and facts: what tells two processes they share a kernel, a
 * network namespace (abstract sockets) and a uid; randomness; page size and
 * CPU count. */
#define _GNU_SOURCE /* Linux interfaces beyond POSIX */
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/file.h"
#include "os/host.h"

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* "0f8c...-...": 32 hex digits, dashes anywhere between byte pairs. */
static int parse_uuid(const char *text, uint8_t out[16])
{
	int n = 0;

	for (const char *p = text; *p && n < 32; p++) {
		int d = hex_digit(*p);

		if (*p == '-')
			continue;
		if (d < 0)
			return -EINVAL;
		if (n % 2 == 0)
			out[n / 2] = (uint8_t)(d << 4);
		else
			out[n / 2] |= (uint8_t)d;
		n++;
	}
	return n == 32 ? 0 : -EINVAL;
}

static int ns_inode(const char *path, uint64_t *ino)
{
	struct stat st;

	if (stat(path, &st))
		return sseg_err(-errno, "cannot stat %s: %s", path, strerror(errno));
	*ino = (uint64_t)st.st_ino;
	return 0;
}

int sseg_os_host_id(struct sseg_os_host_id *id)
{
	const char *boot = "/proc/sys/kernel/random/boot_id";
	char text[64];
	int rc;

	memset(id, 0, sizeof(*id));
	rc = sseg_os_read_text(boot, text, sizeof(text));
	if (rc)
		return rc;
	if (parse_uuid(text, id->boot_id))
		return sseg_err(-EINVAL, "%s holds \"%s\", not a UUID", boot, text);
	rc = ns_inode("/proc/self/ns/net", &id->netns);
	if (rc)
		return rc;
	rc = ns_inode("/proc/self/ns/pid", &id->pidns);
	if (rc)
		return rc;
	id->uid = (uint32_t)getuid();
	return 0;
}

int sseg_os_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sseg_err(-errno, "getrandom failed: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

uint64_t sseg_os_base_page_size(void)
{
	long size = sysconf(_SC_PAGESIZE);

	return size > 0 ? (uint64_t)size : 4096;
}

/* The CPUs this process may run on, not the host's: population threads
 * beyond the affinity mask only queue. */
int sseg_os_cpu_count(void)
{
	cpu_set_t set;
	long online;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	online = sysconf(_SC_NPROCESSORS_ONLN);
	return online > 0 ? (int)online : 1;
}
