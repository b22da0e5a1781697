/* SPDX-License-Identifier: Apache-2.0 */
/* A group's claim on a memfd: a read lock on byte 0 of the group's own open
 * file description (F_OFD_SETLK). Such a lock goes only when the
 * description does, after its last fd and its last mapping. */
#define _GNU_SOURCE /* F_OFD_SETLK, F_OFD_GETLK */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/claim.h"

int sseg_os_memfd_reopen(int fd, int *own)
{
	struct stat was, now;
	char path[64];
	int rc = sseg_fault("reopen");

	if (rc)
		return sseg_err(rc, "cannot open the memfd anew: injected fault");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	*own = open(path, O_RDWR | O_CLOEXEC);
	if (*own < 0 && (errno == EMFILE || errno == ENFILE))
		return sseg_err(-errno, "cannot open the memfd anew: this process is at its limit of "
				"open files (raise ulimit -n)");
	if (*own < 0)
		return sseg_err(-errno, "cannot open the memfd anew through %s: %s", path,
				strerror(errno));
	if (fstat(fd, &was) || fstat(*own, &now) || was.st_dev != now.st_dev ||
	    was.st_ino != now.st_ino) {
		close(*own);
		*own = -1;
		return sseg_err(-EIO, "%s opened another file than the memfd", path);
	}
	return 0;
}

static struct flock byte_zero(short type)
{
	return (struct flock){ .l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
}

int sseg_os_memfd_claim(int fd)
{
	struct flock l = byte_zero(F_RDLCK);

	if (fcntl(fd, F_OFD_SETLK, &l))
		return sseg_err(-errno, "cannot claim the memfd for its group (F_OFD_SETLK): %s",
				strerror(errno));
	return 0;
}

int sseg_os_memfd_claimed(int fd)
{
	struct flock l = byte_zero(F_WRLCK);

	if (fcntl(fd, F_OFD_GETLK, &l))
		return sseg_err(-errno, "cannot ask whether a group maps the memfd (F_OFD_GETLK): %s",
				strerror(errno));
	return l.l_type != F_UNLCK;
}
