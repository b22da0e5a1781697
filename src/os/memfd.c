/* SPDX-License-Identifier: Apache-2.0 */
/* The owner's pages: an unnamed, sealed memfd. Sealing against shrink and
 * grow means no rank can truncate it under the others (which would SIGBUS
 * them); peers verify the seals before they trust an fd they received. */
#define _GNU_SOURCE /* Linux interfaces beyond POSIX */
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "os/host.h"
#include "os/memfd.h"

#ifndef MFD_HUGE_SHIFT
#define MFD_HUGE_SHIFT 26
#endif

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* At creation: the size is fixed. sseg_os_memfd_seal adds the last seals once
 * the owner's own writable mapping exists. */
#define SSEG_SIZE_SEALS (F_SEAL_SHRINK | F_SEAL_GROW)
#define SSEG_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static int hugetlb_flags(uint64_t page_size, unsigned int *flags)
{
	if (page_size == 0) {
		*flags = 0;
		return 0;
	}
	if (!sseg_is_pow2(page_size) || page_size < 4096)
		return sseg_err(-EINVAL, "HugeTLB page size %" PRIu64 " is not a power of two",
				page_size);
	/* The MFD_HUGE_* encoding is log2(page size) shifted, for any size. */
	*flags = MFD_HUGETLB | ((unsigned int)__builtin_ctzll(page_size) << MFD_HUGE_SHIFT);
	return 0;
}

static int size_and_seal(int fd, uint64_t size, uint64_t hugetlb_page_size)
{
	if (ftruncate(fd, (off_t)size)) {
		if (errno == EINVAL && hugetlb_page_size)
			return sseg_err(-EINVAL, "cannot size a HugeTLB memfd to %" PRIu64
					" bytes: not a multiple of its %" PRIu64 "-byte pages",
					size, hugetlb_page_size);
		return sseg_err(-errno, "cannot size the memfd to %" PRIu64 " bytes: %s", size,
				strerror(errno));
	}
	if (fcntl(fd, F_ADD_SEALS, SSEG_SIZE_SEALS))
		return sseg_err(-errno, "cannot seal the memfd (F_ADD_SEALS): %s",
				strerror(errno));
	return 0;
}

int sseg_os_memfd_seal(int fd, bool future_write)
{
	int seals = F_SEAL_SEAL | (future_write ? F_SEAL_FUTURE_WRITE : 0);

	if (fcntl(fd, F_ADD_SEALS, seals))
		return sseg_err(-errno, "cannot seal the memfd (F_ADD_SEALS%s): %s",
				future_write ? " with F_SEAL_FUTURE_WRITE" : "", strerror(errno));
	return 0;
}

int sseg_os_memfd_create(const char *name, uint64_t size, uint64_t hugetlb_page_size, int *fd)
{
	unsigned int flags = 0;
	int rc, memfd;

	rc = sseg_fault("memfd_create");
	if (rc)
		return sseg_err(rc, "memfd_create failed: injected fault");
	rc = hugetlb_flags(hugetlb_page_size, &flags);
	if (rc)
		return rc;
	memfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | flags);
	if (memfd < 0) {
		if (hugetlb_page_size && (errno == EINVAL || errno == ENOENT))
			return sseg_err(-errno, "memfd_create with MFD_HUGETLB of %" PRIu64
					"-byte pages failed: the kernel has no such HugeTLB pool (%s)",
					hugetlb_page_size, strerror(errno));
		return sseg_err(-errno, "memfd_create failed: %s", strerror(errno));
	}
	rc = size_and_seal(memfd, size, hugetlb_page_size);
	if (rc)
		goto close_fd;
	*fd = memfd;
	return 0;
close_fd:
	close(memfd);
	return rc;
}

static void seal_names(int missing, char *buf, size_t len)
{
	static const struct {
		int seal;
		const char *name;
	} seals[] = { { F_SEAL_SHRINK, "F_SEAL_SHRINK" },
		      { F_SEAL_GROW, "F_SEAL_GROW" },
		      { F_SEAL_SEAL, "F_SEAL_SEAL" } };
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(seals); i++) {
		if (!(missing & seals[i].seal) || used >= len)
			continue;
		used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? " " : "",
					 seals[i].name);
	}
}

static int check_fs(int fd, uint64_t *page_size)
{
	struct statfs sfs;

	if (fstatfs(fd, &sfs))
		return sseg_err(-errno, "cannot fstatfs the received fd: %s", strerror(errno));
	if ((unsigned long)sfs.f_type == HUGETLBFS_MAGIC) {
		*page_size = (uint64_t)sfs.f_bsize;
		return 0;
	}
	if ((unsigned long)sfs.f_type == TMPFS_MAGIC) {
		*page_size = sseg_os_base_page_size();
		return 0;
	}
	return sseg_err(-EBADF, "received fd is not a memfd: its filesystem type is 0x%lx, "
			"expected tmpfs (0x%lx) or hugetlbfs (0x%lx)",
			(unsigned long)sfs.f_type, (unsigned long)TMPFS_MAGIC,
			(unsigned long)HUGETLBFS_MAGIC);
}

int sseg_os_memfd_check(int fd, uint64_t expect_size, uint64_t *page_size)
{
	char names[64];
	struct stat st;
	int seals, rc;

	rc = check_fs(fd, page_size);
	if (rc)
		return rc;
	if (fstat(fd, &st))
		return sseg_err(-errno, "cannot fstat the received fd: %s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return sseg_err(-EBADF, "received fd is not a regular file (mode 0%o)",
				(unsigned)st.st_mode);
	if ((uint64_t)st.st_size != expect_size)
		return sseg_err(-EINVAL, "received fd has %" PRIu64 " bytes, expected %" PRIu64,
				(uint64_t)st.st_size, expect_size);
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return sseg_err(-errno, "cannot read the received fd's seals (F_GET_SEALS): %s",
				strerror(errno));
	/* A plain tmpfs file (/dev/shm) passes the filesystem check; it
	 * reports only F_SEAL_SEAL, so it fails here. */
	if ((seals & SSEG_SEALS) != SSEG_SEALS) {
		seal_names(SSEG_SEALS & ~seals, names, sizeof(names));
		return sseg_err(-EPERM, "received memfd is missing seals %s", names);
	}
	return 0;
}

int sseg_os_memfd_allocate(int fd, uint64_t size)
{
	int rc = sseg_fault("fallocate");

	if (!rc && fallocate(fd, 0, 0, (off_t)size))
		rc = -errno;
	if (rc == -ENOSPC || rc == -ENOMEM)
		return sseg_err(-ENOMEM, "allocating the memfd's %" PRIu64 " bytes failed: out of "
				"memory (HugeTLB pool or memory limit)", size);
	if (rc)
		return sseg_err(rc, "allocating the memfd's %" PRIu64 " bytes (fallocate) failed: %s",
				size, strerror(-rc));
	return 0;
}

int sseg_os_memfd_allocated(int fd, uint64_t *bytes)
{
	struct stat st;

	if (fstat(fd, &st))
		return sseg_err(-errno, "fstat of the memfd failed: %s", strerror(errno));
	*bytes = (uint64_t)st.st_blocks * 512u;
	return 0;
}

int sseg_os_memfd_writable(int fd)
{
	int flags = fcntl(fd, F_GETFL), seals = fcntl(fd, F_GET_SEALS);

	if (flags < 0 || seals < 0)
		return sseg_err(-errno, "cannot read the memfd's mode and seals: %s", strerror(errno));
	if ((flags & O_ACCMODE) != O_RDWR)
		return sseg_err(-EPERM, "the memfd was opened %s, not for reading and writing",
				(flags & O_ACCMODE) == O_RDONLY ? "read-only" : "write-only");
	if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))
		return sseg_err(-EPERM, "the memfd is sealed against writing (%s)",
				seals & F_SEAL_WRITE ? "F_SEAL_WRITE" : "F_SEAL_FUTURE_WRITE");
	return 0;
}
