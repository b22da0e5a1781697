/* SPDX-License-Identifier: Apache-2.0 */
/* A process of another uid, kept alive while the test looks (stranger.h). */
#define _GNU_SOURCE /* memfd_create, setresuid */
#include <grp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "stranger.h"
#include "testutil.h"

static int become_stranger(int fds)
{
	struct rlimit r = { (rlim_t)fds + 64, (rlim_t)fds + 64 };

	if (fds && setrlimit(RLIMIT_NOFILE, &r))
		return -1;
	if (setgroups(0, NULL) || setresgid(STRANGER_UID, STRANGER_UID, STRANGER_UID) ||
	    setresuid(STRANGER_UID, STRANGER_UID, STRANGER_UID))
		return -1;
	/* A uid change leaves it undumpable; a login process is not. */
	return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

void stranger_fork(struct stranger *s)
{
	char c;

	CHECK(pipe(s->ready) == 0 && pipe(s->release) == 0);
	s->pid = fork();
	CHECK(s->pid >= 0);
	if (s->pid == 0) {
		close(s->ready[0]);
		close(s->release[1]);
		if (become_stranger(s->fds) || s->act(s->arg))
			_exit(1);
		if (write(s->ready[1], "r", 1) != 1)
			_exit(1);
		_exit(read(s->release[0], &c, 1) == 0 ? 0 : 1);
	}
	close(s->ready[1]);
	close(s->release[0]);
}

void stranger_ready(struct stranger *s)
{
	char c;

	CHECK(read(s->ready[0], &c, 1) == 1);
}

void stranger_start(struct stranger *s)
{
	stranger_fork(s);
	stranger_ready(s);
}

void stranger_stop(struct stranger *s)
{
	close(s->release[1]);
	CHECK(tu_wait(s->pid, 20000) == 0);
	close(s->ready[0]);
}

int stranger_hold_memfd(const char *name, bool map)
{
	int fd = memfd_create(name, 0);

	if (fd < 0 || ftruncate(fd, 4096))
		return -1;
	if (map && mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED)
		return -1;
	return fd;
}
