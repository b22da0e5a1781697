/* SPDX-License-Identifier: Apache-2.0 */
/* Unix sockets under predictable names, in this user's runtime directory:
 * no one else can bind the name first, nor connect to fill its backlog. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "os/named.h"
#include "os/sock.h"

/* How often a connect that waits for room asks the interrupt check. */
#define CONNECT_SLICE_MS 50

static const char *env_dir(void)
{
	const char *dir = getuid() == geteuid() ? getenv("SHAREDSEG_RUNTIME_DIR") : NULL;

	return dir && *dir ? dir : NULL;
}

/* Ours, a directory, and no one else may add or remove a name in it. The
 * default one is ours to tighten; one the user named is theirs. */
static int trusted_dir(const char *dir, bool ours_to_fix)
{
	struct stat st;

	if (lstat(dir, &st))
		return sseg_err(-errno, "cannot read the runtime directory %s: %s", dir,
				strerror(errno));
	if (st.st_uid != geteuid())
		return sseg_err(-EPERM,
				"the runtime directory %s belongs to uid %u, not to this user (uid "
				"%u): another user is in the way; remove it, or set "
				"SHAREDSEG_RUNTIME_DIR to a directory of this user's that no one else "
				"may write", dir, (unsigned)st.st_uid, (unsigned)geteuid());
	if (!S_ISDIR(st.st_mode))
		return sseg_err(-EPERM, "the runtime directory %s is not a directory (mode %04o)",
				dir, (unsigned)st.st_mode);
	if (!(st.st_mode & 077) || (!ours_to_fix && !(st.st_mode & 022)))
		return 0;
	if (ours_to_fix && !chmod(dir, 0700))
		return 0;
	return sseg_err(-EPERM,
			"the runtime directory %s may be written by other users (mode %04o): chmod "
			"700 it, or set SHAREDSEG_RUNTIME_DIR to a directory no one else may write",
			dir, (unsigned)(st.st_mode & 07777));
}

int sseg_os_rundir(char *buf, size_t len)
{
	const char *env = env_dir();
	int n;

	if (env)
		n = snprintf(buf, len, "%s", env);
	else
		n = snprintf(buf, len, "/tmp/sharedseg-%u", (unsigned)geteuid());
	if (n < 0 || (size_t)n >= len)
		return sseg_err(-ENAMETOOLONG, "the runtime directory %s is too long for a socket's "
				"path (at most %zu bytes)", env, len - 1);
	if (mkdir(buf, 0700) && errno != EEXIST)
		return sseg_err(-errno, "cannot make the runtime directory %s: %s", buf,
				strerror(errno));
	return trusted_dir(buf, !env);
}

/* dir/file + suffix in buf, whole. */
static int named_path(const char *file, const char *suffix, char *buf, size_t len)
{
	char dir[SSEG_OS_NAMED_PATH];
	int rc = sseg_os_rundir(dir, sizeof(dir)), n;

	if (rc)
		return rc;
	n = snprintf(buf, len, "%s/%s%s", dir, file, suffix);
	if (n < 0 || (size_t)n >= len)
		return sseg_err(-ENAMETOOLONG, "the socket %s/%s does not fit a unix socket's path "
				"(%zu bytes at most): set SHAREDSEG_RUNTIME_DIR to a shorter one",
				dir, file, len - 1);
	return 0;
}

static void unix_addr(const char *path, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	snprintf(a->sun_path, sizeof(a->sun_path), "%s", path);
}

/* The lock of the name, taken without waiting: an open file description's
 * lock (the kernel drops it with the process), so two listeners in one
 * process exclude each other too. -EADDRINUSE when held. */
static int lock_name(const char *path, int *fd)
{
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char lock[SSEG_OS_NAMED_PATH + 8];

	snprintf(lock, sizeof(lock), "%s.lock", path);
	*fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*fd < 0)
		return sseg_err(-errno, "cannot open %s: %s", lock, strerror(errno));
	if (!fcntl(*fd, F_OFD_SETLK, &l))
		return 0;
	close(*fd);
	*fd = -1;
	if (errno == EAGAIN || errno == EACCES)
		return -EADDRINUSE;
	return sseg_err(-errno, "cannot lock %s: %s", lock, strerror(errno));
}

static pid_t holder(const char *file)
{
	pid_t pid = 0;
	int s;

	if (!sseg_os_connect_named(file, sseg_now() + 1.0, &s)) {
		sseg_os_peer_cred(s, &pid, NULL);
		close(s);
	}
	return pid;
}

int sseg_os_listen_named(const char *file, int backlog, struct sseg_os_named *n,
			 pid_t *holder_pid)
{
	struct sockaddr_un a;
	int rc;

	n->fd = n->lock_fd = -1;
	rc = named_path(file, "", n->path, sizeof(n->path));
	if (!rc)
		rc = lock_name(n->path, &n->lock_fd);
	if (rc == -EADDRINUSE)
		*holder_pid = holder(file);
	if (rc)
		return rc;
	/* Ours now: a socket file there is one a process that died left. */
	if (unlink(n->path) && errno != ENOENT) {
		rc = sseg_err(-errno, "cannot remove %s: %s", n->path, strerror(errno));
		goto unlock;
	}
	n->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (n->fd < 0) {
		rc = sseg_err(-errno, "cannot create a unix socket: %s", strerror(errno));
		goto unlock;
	}
	unix_addr(n->path, &a);
	if (bind(n->fd, (struct sockaddr *)&a, sizeof(a)) || chmod(n->path, 0600) ||
	    listen(n->fd, backlog)) {
		rc = sseg_err(-errno, "cannot listen on %s: %s", n->path, strerror(errno));
		sseg_os_unlisten_named(n);
		return rc;
	}
	return 0;
unlock:
	close(n->lock_fd);
	n->lock_fd = -1;
	return rc;
}

void sseg_os_unlisten_named(struct sseg_os_named *n)
{
	if (n->fd >= 0) {
		unlink(n->path); /* before the lock goes: never another's file */
		close(n->fd);
	}
	if (n->lock_fd >= 0)
		close(n->lock_fd);
	n->fd = n->lock_fd = -1;
}

/* A blocking connect waits in the kernel for room in the listener's
 * backlog, for at most SO_SNDTIMEO: waited in slices, so that an interrupt
 * is heard. */
static int connect_waiting(int s, const struct sockaddr_un *a, const char *path, double deadline)
{
	for (;;) {
		int left = sseg_os_remaining_ms(deadline);
		int slice = left < CONNECT_SLICE_MS ? left : CONNECT_SLICE_MS;
		struct timeval tv = { .tv_sec = 0, .tv_usec = (slice ? slice : 1) * 1000 };

		if (setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
			return sseg_err(-errno, "cannot bound the connect to %s: %s", path,
					strerror(errno));
		if (!connect(s, (const struct sockaddr *)a, sizeof(*a)))
			return 0;
		if (errno == ENOENT || errno == ECONNREFUSED)
			return sseg_err(-ECONNREFUSED, "nobody listens on %s", path);
		if (errno != EAGAIN && errno != EINTR && errno != EINPROGRESS)
			return sseg_err(-errno, "cannot connect to %s: %s", path, strerror(errno));
		if (sseg_os_interrupted())
			return sseg_err(-EINTR, "interrupted while connecting to %s", path);
		if (left == 0)
			return sseg_err(-ETIMEDOUT, "%s did not take the connection in time (its "
					"backlog stayed full)", path);
	}
}

int sseg_os_connect_named(const char *file, double deadline, int *fd)
{
	struct timeval none = { 0, 0 };
	char path[SSEG_OS_NAMED_PATH];
	struct sockaddr_un a;
	int rc, s;

	rc = sseg_fault("connect");
	if (rc)
		return sseg_err(rc, "cannot connect to %s: injected fault", file);
	rc = named_path(file, "", path, sizeof(path));
	if (rc)
		return rc;
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return sseg_err(-errno, "cannot create a unix socket: %s", strerror(errno));
	unix_addr(path, &a);
	rc = connect_waiting(s, &a, path, deadline);
	if (!rc && (setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none)) ||
		    fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK)))
		rc = sseg_err(-errno, "cannot set up the connection to %s: %s", path,
			      strerror(errno));
	if (rc) {
		close(s);
		return rc;
	}
	*fd = s;
	return 0;
}

/* A line of /proc/net/unix ends in the socket's path:
 * .../sharedseg-UID/file. */
static bool names_other(const char *line, const char *file, uid_t self, uid_t *uid)
{
	const char *end = line + strcspn(line, "\n"), *slash, *dir;
	size_t flen = strlen(file);
	char *digits_end;
	unsigned long v;

	if ((size_t)(end - line) < flen + 1 || strncmp(end - flen, file, flen) ||
	    end[-(long)flen - 1] != '/')
		return false;
	slash = end - flen - 1;
	for (dir = slash; dir > line && dir[-1] != '/' && dir[-1] != ' '; dir--)
		;
	if (strncmp(dir, "sharedseg-", 10))
		return false;
	v = strtoul(dir + 10, &digits_end, 10);
	if (digits_end != slash || digits_end == dir + 10 || v == (unsigned long)self)
		return false;
	*uid = (uid_t)v;
	return true;
}

int sseg_os_named_other_user(const char *file, uid_t self, uid_t *uid)
{
	FILE *f = fopen("/proc/net/unix", "re");
	char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (rc && getline(&line, &cap, f) > 0)
		if (names_other(line, file, self, uid))
			rc = 0;
	free(line);
	fclose(f);
	return rc;
}
