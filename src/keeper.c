/* SPDX-License-Identifier: Apache-2.0 */
/* The owner's side of a keeper: one connection per question, a bounded
 * wait for the answer, the keeper's uid checked before anything is said. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "keeper.h"
#include "log.h"
#include "os/sock.h"
#include "segment_types.h"
#include "util.h"

#define KEEPER_REPLY_S 10.0

static void declare(const struct sseg *seg, struct sseg_keep_decl *d)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", seg->name);
	snprintf(d->version, sizeof(d->version), "%d.%d.%d", SSEG_VERSION_MAJOR,
		 SSEG_VERSION_MINOR, SSEG_VERSION_PATCH);
	d->size = seg->size;
	d->layout_hash = seg->layout ? sseg_layout_hash(seg->layout) : 0;
	d->pages_asked = seg->opts.pages;
	d->backend = seg->backend;
	d->flags = seg->opts.flags;
	d->world_size = (uint32_t)seg->opts.world_size;
	d->owner_rank = (uint32_t)seg->opts.owner_rank;
	d->numa = seg->opts.numa;
	d->numa_node = seg->opts.numa == SSEG_NUMA_NODE ? (uint32_t)seg->opts.numa_node : 0;
}

/* 0 connected to a keeper of this user; -ECONNREFUSED when none runs,
 * -EPERM when it runs as another user (the sentence set either way). */
static int dial(const char *keeper, int *sock)
{
	char name[128];
	uid_t uid;
	int rc;

	sseg_keep_socket(keeper, name, sizeof(name));
	rc = sseg_os_connect_abstract(name, sock);
	if (rc == -ECONNREFUSED)
		return sseg_err(rc, "keeper '%s' does not run for this user (start one: sharedseg "
				"keep --name %s)", keeper, keeper);
	if (rc)
		return sseg_err_wrap(rc, "keeper '%s'", keeper);
	rc = sseg_os_peer_cred(*sock, NULL, &uid);
	if (!rc && uid != geteuid())
		rc = sseg_err(-EPERM, "keeper '%s' runs as uid %u, not as this user (uid %u)",
			      keeper, (unsigned)uid, (unsigned)geteuid());
	if (rc)
		close(*sock);
	return rc;
}

/* 1 connected to a keeper of this user; 0 when none is there (said). */
static int connect_keeper(const struct sseg *seg, int *sock)
{
	if (!dial(seg->opts.keeper, sock))
		return 1;
	sseg_log(SSEG_LOG_WARN, "segment '%s': %s: the segment is allocated anew and kept by no one",
		 seg->name, sseg_last_error());
	return 0;
}

static int ask(int sock, const struct sseg_keep_msg *q, int fd, struct sseg_keep_msg *a)
{
	double deadline = sseg_now() + KEEPER_REPLY_S;
	uint8_t frame[SSEG_KEEP_FRAME];
	char one = 'F';
	int rc;

	sseg_keep_encode(q, frame);
	rc = sseg_os_send_all(sock, frame, sizeof(frame), deadline);
	if (!rc && fd >= 0)
		rc = sseg_os_send_fd(sock, fd, &one, 1, deadline);
	if (!rc)
		rc = sseg_os_recv_all(sock, frame, sizeof(frame), deadline);
	return rc ? rc : sseg_keep_decode(frame, a);
}

static int receive_kept(struct sseg *seg, int sock, const struct sseg_keep_msg *a, int *fd,
			struct sseg_keep_decl *got)
{
	char one;
	int rc;

	rc = sseg_os_recv_fd(sock, fd, &one, 1, sseg_now() + KEEPER_REPLY_S);
	if (rc) {
		sseg_log(SSEG_LOG_WARN, "segment '%s': keeper '%s' said it keeps it but gave no fd: %s",
			 seg->name, seg->opts.keeper, sseg_last_error());
		return 0;
	}
	*got = a->decl;
	return 1;
}

int sseg_keeper_take(struct sseg *seg, int *fd, struct sseg_keep_decl *got)
{
	struct sseg_keep_msg q = { .op = SSEG_KEEP_TAKE }, a;
	int sock, rc, kept = 0;

	if (!connect_keeper(seg, &sock))
		return 0;
	declare(seg, &q.decl);
	rc = ask(sock, &q, -1, &a);
	if (rc)
		sseg_log(SSEG_LOG_WARN, "segment '%s': keeper '%s' did not answer: %s", seg->name,
			 seg->opts.keeper, sseg_last_error());
	else if (a.op == SSEG_KEEP_KEPT)
		kept = receive_kept(seg, sock, &a, fd, got);
	else if (a.op == SSEG_KEEP_DISCARDED)
		sseg_log(SSEG_LOG_INFO,
			 "segment '%s': keeper '%s' kept one declared otherwise and freed it (%s): "
			 "allocated anew",
			 seg->name, seg->opts.keeper, a.why);
	else if (a.op == SSEG_KEEP_REFUSED)
		sseg_log(SSEG_LOG_WARN, "segment '%s': keeper '%s' refused: %s", seg->name,
			 seg->opts.keeper, a.why);
	close(sock);
	return kept;
}

void sseg_keeper_hold(struct sseg *seg, int fd)
{
	struct sseg_keep_msg q = { .op = SSEG_KEEP_HOLD }, a;
	int sock, rc;

	if (!connect_keeper(seg, &sock))
		return;
	declare(seg, &q.decl);
	q.decl.mapped_size = seg->mapped_size;
	q.decl.page_size = seg->page_size;
	q.decl.pages = seg->pages;
	rc = ask(sock, &q, fd, &a);
	if (rc)
		sseg_log(SSEG_LOG_WARN, "segment '%s': keeper '%s' did not take it: %s", seg->name,
			 seg->opts.keeper, sseg_last_error());
	else if (a.op != SSEG_KEEP_HELD)
		sseg_log(SSEG_LOG_WARN, "segment '%s': keeper '%s' refused it: %s", seg->name,
			 seg->opts.keeper, a.why);
	close(sock);
}

int sseg_keeper_lend(const char *keeper, const char *name, int *fd, uint64_t *size)
{
	struct sseg_keep_msg q = { .op = SSEG_KEEP_LEND }, a;
	int sock, rc;
	char one;

	sseg_err_clear();
	if (!keeper || !name || !fd || !size)
		return sseg_err(-EINVAL, "sseg_keeper_lend: NULL argument");
	rc = sseg_keep_check_name(keeper);
	if (!rc && (strlen(name) == 0 || strlen(name) > SSEG_NAME_MAX))
		rc = sseg_err(-EINVAL, "a segment's name must be 1 to %d bytes", SSEG_NAME_MAX);
	if (!rc)
		rc = dial(keeper, &sock);
	if (rc)
		return rc;
	snprintf(q.decl.name, sizeof(q.decl.name), "%s", name);
	rc = ask(sock, &q, -1, &a);
	if (rc)
		rc = sseg_err_wrap(rc, "keeper '%s' did not answer", keeper);
	else if (a.op == SSEG_KEEP_NONE)
		rc = sseg_err(-ENOENT, "keeper '%s' holds no segment '%s'", keeper, name);
	else if (a.op != SSEG_KEEP_KEPT)
		rc = sseg_err(-EPROTO, "keeper '%s' answered %u to a lend", keeper, (unsigned)a.op);
	else
		rc = sseg_os_recv_fd(sock, fd, &one, 1, sseg_now() + KEEPER_REPLY_S);
	if (!rc)
		*size = a.decl.mapped_size;
	close(sock);
	return rc;
}
