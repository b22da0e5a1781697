/* SPDX-License-Identifier: Apache-2.0 */
/* A rank of the local exchange as a thread (member.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "member.h"
#include "testutil.h"

static void *member_main(void *arg)
{
	struct member *m = arg;
	struct sseg_local_group *g;
	uint8_t mine[MEMBER_MAX_BYTES];
	double t0 = tu_now();

	__atomic_store_n(&m->task, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	memset(mine, member_byte(m->rank), m->len);
	m->rc = sseg_local_group_open(m->name, m->rank, m->world, m->timeout_ms, &g);
	if (!m->rc) {
		m->rc = sseg_local_allgather(mine, m->all, m->len, g);
		sseg_local_group_close(g);
	}
	if (m->rc)
		snprintf(m->error, sizeof(m->error), "%s", sseg_last_error());
	m->took = tu_now() - t0;
	return NULL;
}

void member_start(struct member *m)
{
	if ((size_t)m->world * m->len > sizeof(m->all))
		abort();
	m->rc = 0;
	m->took = 0;
	m->error[0] = '\0';
	m->task = 0;
	memset(m->all, 0, sizeof(m->all));
	if (pthread_create(&m->tid, NULL, member_main, m))
		abort();
}

void member_join(struct member *m)
{
	if (pthread_join(m->tid, NULL))
		abort();
}

/* Its only poll before the answer would be a send that the socket does
 * not take at once: never for a 16-byte hello on a fresh connection. */
int member_awaits_hub(const struct member *m)
{
	pid_t task = __atomic_load_n(&m->task, __ATOMIC_ACQUIRE);
	char path[64], line[256];
	long nr = -1;
	FILE *f;

	if (!task)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)task);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(line, sizeof(line), f))
		nr = strtol(line, NULL, 10); /* "running" reads as 0 */
	fclose(f);
#ifdef SYS_poll
	if (nr == SYS_poll)
		return 1;
#endif
	return nr == SYS_ppoll;
}

int member_holds(const struct member *m, int upto)
{
	for (int r = 0; r < upto; r++)
		for (size_t i = 0; i < m->len; i++)
			if (m->all[(size_t)r * m->len + i] != member_byte(r))
				return 0;
	return 1;
}
