/* SPDX-License-Identifier: Apache-2.0 */
/* populate=background across processes: the owner's word on how its work
 * ended, carried on the fd-channel connections that stay open while the
 * owner populates. One frame a connection (frame.h: its code the result,
 * its body the owner's sentence); then the owner closes it. A peer reads
 * it between the polls of its wait, or meets the close if the owner died
 * without a word. */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "background_link.h"
#include "backend/backend.h"
#include "frame.h"
#include "os/sock.h"
#include "segment_types.h"

/* A word is one small write the owner made at once. */
#define WORD_READ_S 1.0
#define WORD_SEND_S 0.1

struct sseg_owner_link {
	pthread_mutex_t lock;
	int fd;    /* -1 once the outcome is known */
	int rc;    /* the outcome, once known */
	char why[SSEG_ERR_MAX];
};

bool sseg_link_wanted(const struct sseg *seg)
{
	return seg->opts.populate == SSEG_POPULATE_BACKGROUND &&
	       !(seg->ops->caps & SSEG_CAP_PINNED);
}

void sseg_link_tell(int *conns, int n, int rc, const char *why)
{
	struct sseg_frame word = { .kind = SSEG_FRAME_BACKGROUND,
				   .code = rc < 0 && rc > -4096 ? rc : rc ? -EIO : 0,
				   .len = why ? (uint32_t)strnlen(why, SSEG_FRAME_WHY) : 0 };
	char sentence[SSEG_ERR_MAX];
	bool refused = false;

	/* A peer that destroyed its segment already is not waiting; its
	 * refusal is not this thread's error to report. */
	snprintf(sentence, sizeof(sentence), "%s", sseg_last_error());
	for (int i = 0; i < n; i++) {
		refused |= sseg_frame_send(conns[i], &word, why, -1, sseg_now() + WORD_SEND_S) != 0;
		close(conns[i]);
		conns[i] = -1;
	}
	if (refused)
		sseg_err(0, "%s", sentence);
}

void sseg_link_keep(struct sseg *seg, int owner_sock)
{
	struct sseg_owner_link *link = calloc(1, sizeof(*link));

	/* Without the link a wait still ends once every page is resident,
	 * or at its timeout. */
	if (!link) {
		sseg_log(SSEG_LOG_WARN, "segment '%s': out of memory keeping the owner's channel: a "
			 "wait cannot tell whether the owner is gone", seg->name);
		close(owner_sock);
		return;
	}
	pthread_mutex_init(&link->lock, NULL);
	link->fd = owner_sock;
	seg->owner_link = link;
}

/* The owner's word, or its absence: the sentence a wait returns. */
static void read_word(struct sseg *seg, struct sseg_owner_link *link)
{
	char why[SSEG_FRAME_WHY + 1], have[32], all[32];
	uint64_t resident = 0, total = seg->mapped_size;
	struct sseg_frame word;
	int rc = sseg_frame_recv(link->fd, SSEG_FRAME_BACKGROUND, &word, why, SSEG_FRAME_WHY, NULL,
				 sseg_now() + WORD_READ_S);

	sseg_backend_resident(seg, &resident);
	sseg_format_size(resident < total ? resident : total, have, sizeof(have));
	sseg_format_size(total, all, sizeof(all));
	if (!rc) {
		link->rc = word.code;
		snprintf(link->why, sizeof(link->why),
			 "segment '%s': owner rank %d stopped populating in the background with %s "
			 "of %s resident: %s; the pages left are faulted at first touch",
			 seg->name, seg->opts.owner_rank, have, all, why);
	} else {
		link->rc = -EOWNERDEAD;
		snprintf(link->why, sizeof(link->why),
			 "segment '%s': owner rank %d (pid %u) closed its channel before it finished "
			 "populating in the background (it exited or was killed), with %s of %s "
			 "resident; the pages left are faulted at first touch",
			 seg->name, seg->opts.owner_rank, seg->group_pid, have, all);
	}
	close(link->fd);
	link->fd = -1;
}

int sseg_link_outcome(struct sseg *seg, int *rc)
{
	struct sseg_owner_link *link = seg->owner_link;
	int ended;

	if (!link)
		return 0;
	pthread_mutex_lock(&link->lock);
	if (link->fd >= 0 && sseg_os_wait(link->fd, POLLIN, sseg_now()) == 0)
		read_word(seg, link);
	ended = link->fd < 0;
	if (ended) {
		*rc = link->rc;
		if (link->rc)
			sseg_err(link->rc, "%s", link->why);
	}
	pthread_mutex_unlock(&link->lock);
	return ended;
}

static void drop(struct sseg *seg, bool in_child)
{
	struct sseg_owner_link *link = seg->owner_link;

	if (!link)
		return;
	if (link->fd >= 0)
		close(link->fd);
	/* In a forked child another thread of the parent may have held it. */
	if (!in_child)
		pthread_mutex_destroy(&link->lock);
	free(link);
	seg->owner_link = NULL;
}

void sseg_link_release(struct sseg *seg)
{
	drop(seg, false);
}

void sseg_link_forget_in_child(struct sseg *seg)
{
	drop(seg, true);
}
