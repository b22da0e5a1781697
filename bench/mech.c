/* SPDX-License-Identifier: Apache-2.0 */
/* The table of mechanisms and what they share. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "case.h"
#include "group.h"
#include "mech.h"

static const struct mech_ops *const all[] = {
	&mech_sharedseg, &mech_private, &mech_devshm, &mech_procfd,
};

const struct mech_ops *mech_find(const char *name)
{
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

const char *mech_names(void)
{
	return "sharedseg, private, devshm, procfd";
}

void mech_named_path(const struct mech_ops *mech, const char *name, char *path, size_t len)
{
	if (mech->named_in)
		snprintf(path, len, "%s/%s", mech->named_in, name);
	else
		snprintf(path, len, "%s", "");
}

void mech_hold(const struct mech_ctx *c, const char *point)
{
	const char *hold = getenv("SSEG_BENCH_HOLD");

	if (c->rank || !hold || strcmp(hold, point))
		return;
	fprintf(stderr, "sharedseg bench: rank 0 (pid %d) holds at %s\n", (int)getpid(), point);
	fflush(stderr);
	raise(SIGSTOP);
}

int mech_step(const struct mech_ctx *c, struct mech_map *m, int ok)
{
	unsigned char mine = ok ? 1 : 0, every[GROUP_MAX_RANKS];
	int all_ok = 1;

	if (sseg_local_allgather(&mine, every, 1, c->group)) {
		snprintf(m->error, sizeof(m->error), "the ranks' exchange: %s", sseg_last_error());
		return 0;
	}
	for (int r = 0; r < c->bc->ranks; r++)
		all_ok &= every[r];
	if (!all_ok && ok)
		snprintf(m->error, sizeof(m->error), "another rank failed; see its message");
	return all_ok;
}

int mech_fail(struct mech_map *m, const char *what, int err)
{
	snprintf(m->error, sizeof(m->error), "%s: %s", what, strerror(err < 0 ? -err : err));
	return -1;
}
