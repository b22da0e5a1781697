/* Host identity and facts: what tells two processes they share a kernel, a
 * network namespace (abstract sockets) and a uid, and small readers for the
 * sysfs/procfs files the rest of src/os parses. */
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

#include "os/host.h"
#include "os/hugepage.h"

int sseg_os_read_text(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd, err;

	if (len == 0)
		return sseg_err(-EINVAL, "no room to read %s", path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sseg_err(-errno, "cannot open %s: %s", path, strerror(errno));
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	err = errno;
	close(fd);
	if (n < 0)
		return sseg_err(-err, "cannot read %s: %s", path, strerror(err));
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return 0;
}

int sseg_os_read_u64(const char *path, uint64_t *value)
{
	char text[64], *end;
	int rc;

	rc = sseg_os_read_text(path, text, sizeof(text));
	if (rc)
		return rc;
	errno = 0;
	*value = strtoull(text, &end, 10);
	if (errno || end == text || (*end && *end != ' ' && *end != '\n'))
		return sseg_err(-EINVAL, "%s holds \"%s\", not a number", path, text);
	return 0;
}

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

/* Bytes in use by every HugeTLB pool; meminfo's Hugetlb: line says the
 * same but kernels before 4.16 lack it and it counts surplus pages too. */
static int hugetlb_used(uint64_t *bytes)
{
	struct sseg_hugetlb_pool pools[8];
	int n = sseg_os_hugetlb_pools(pools, (int)ARRAY_SIZE(pools));

	if (n < 0)
		return n;
	*bytes = 0;
	for (int i = 0; i < n; i++)
		*bytes += (pools[i].total - pools[i].free) * pools[i].page_size;
	return 0;
}

int sseg_os_meminfo(uint64_t *shmem, uint64_t *hugetlb)
{
	char line[256];
	unsigned long long kb;
	bool found = false;
	FILE *f;

	f = fopen("/proc/meminfo", "re");
	if (!f)
		return sseg_err(-errno, "cannot open /proc/meminfo: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Shmem: %llu kB", &kb) == 1) {
			*shmem = (uint64_t)kb << 10;
			found = true;
			break;
		}
	}
	fclose(f);
	if (!found)
		return sseg_err(-ENOENT, "/proc/meminfo has no Shmem: line");
	return hugetlb_used(hugetlb);
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
