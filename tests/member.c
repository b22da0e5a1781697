/* SPDX-License-Identifier: Apache-2.0 */
/* A rank of the local exchange as a thread (member.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "member.h"
#include "testutil.h"

static void *member_main(void *arg)
{
	struct member *m = arg;
	struct sseg_local_group *g;
	uint8_t mine[MEMBER_MAX_BYTES];
	double t0 = tu_now();

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
	memset(m->all, 0, sizeof(m->all));
	if (pthread_create(&m->tid, NULL, member_main, m))
		abort();
}

void member_join(struct member *m)
{
	if (pthread_join(m->tid, NULL))
		abort();
}

int member_holds(const struct member *m, int upto)
{
	for (int r = 0; r < upto; r++)
		for (size_t i = 0; i < m->len; i++)
			if (m->all[(size_t)r * m->len + i] != member_byte(r))
				return 0;
	return 1;
}
