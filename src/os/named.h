/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: unix sockets under a name others can predict (a keeper's,
 * a local group's), in this user's own runtime directory (named.c). An
 * abstract name belongs to whoever binds it first, and anyone may connect
 * to it: another user could take the name, or fill its backlog. A socket
 * in a directory only this user can enter can be neither taken nor reached
 * by anyone else. Functions return 0 or a negative errno and set the
 * sentence. */
#ifndef SSEG_OS_NAMED_H
#define SSEG_OS_NAMED_H

#include <stddef.h>
#include <sys/types.h>

#include "internal.h"

/* Room for a runtime directory and a socket's file name in it. */
#define SSEG_OS_NAMED_PATH 108

/* This user's runtime directory: $SHAREDSEG_RUNTIME_DIR (honoured only when
 * getuid() == geteuid()), else /tmp/sharedseg-<euid>, made with mode 0700
 * when missing. -EPERM, with a sentence that names the owner, when it is
 * not a directory of this user's that no one else may write. */
SSEG_HIDDEN int sseg_os_rundir(char *buf, size_t len);

struct sseg_os_named {
	int fd;      /* the listening socket */
	int lock_fd; /* the name's lock, held while listening */
	char path[SSEG_OS_NAMED_PATH];
};

/* Listens on the socket file (a name of [A-Za-z0-9._%=-] bytes) in the
 * runtime directory. The name's lock file (file + ".lock") is held while
 * it listens, so that a socket file left by a process that died is
 * replaced, and one a live process listens on is not: -EADDRINUSE then,
 * with *holder_pid its pid (0 where unknown) and no sentence, for the
 * caller to say who holds what. */
SSEG_HIDDEN int sseg_os_listen_named(const char *file, int backlog, struct sseg_os_named *n,
				     pid_t *holder_pid);
/* Removes the socket file, closes the socket and lets the lock go. */
SSEG_HIDDEN void sseg_os_unlisten_named(struct sseg_os_named *n);
/* Connects to it, waiting for room in its backlog until the deadline
 * (interruptible as every wait). -ECONNREFUSED when nobody listens on it
 * (no socket file, or one left by a process that died), -ETIMEDOUT when
 * its backlog stayed full; the socket returned is non-blocking. */
SSEG_HIDDEN int sseg_os_connect_named(const char *file, double deadline, int *fd);
/* Another user's socket named file in that user's default runtime
 * directory (/tmp/sharedseg-UID), as /proc/net/unix lists it: 0 with its
 * UID (one other than self), or -ENOENT. Sets no sentence. */
SSEG_HIDDEN int sseg_os_named_other_user(const char *file, uid_t self, uid_t *uid);

#endif
