/* SPDX-License-Identifier: Apache-2.0 */
/* Small readers for the sysfs and procfs files src/os parses. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/file.h"

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
