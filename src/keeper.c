/* SPDX-License-Identifier: Apache-2.0 */
/* The owner's side of a keeper: one connection per question, every wait
 * bounded by the conversation's deadline, the keeper's uid checked before
 * anything is said. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "keeper.h"
#include "log.h"
#include "options.h"
#include "os/claim.h"
#include "os/named.h"
#include "os/sock.h"
#include "segment_types.h"
#include "util.h"

/* The longest a conversation with a keeper may take: a keeper slow to
 * answer must not use up the create's timeout, within which the peers wait
 * for the owner. */
#define KEEPER_REPLY_S 10.0
#define KEEPER_TIMEOUT_SHARE 0.5

static void declare(const struct sseg *seg, struct sseg_keep_decl *d)
{
	memset(d, 0, sizeof(*d));
	sseg_decl_of(seg, &d->d);
	snprintf(d->version, sizeof(d->version), "%d.%d.%d", SSEG_VERSION_MAJOR,
		 SSEG_VERSION_MINOR, SSEG_VERSION_PATCH);
}

/* 0 connected to a keeper of this user; -ECONNREFUSED when none runs,
 * -EPERM when it runs as another user (the sentence set either way). */
static int dial(const char *keeper, double deadline, int *sock)
{
	char file[SSEG_NAME_MAX + 8];
	uid_t uid;
	int rc;

	sseg_keep_socket(keeper, file, sizeof(file));
	rc = sseg_os_connect_named(file, deadline, sock);
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

static int ask(int sock, const struct sseg_keep_msg *q, int fd, struct sseg_keep_msg *a,
	       double deadline)
{
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

void sseg_keeper_talk_init(const struct sseg *seg, struct sseg_keep_talk *t)
{
	memset(t, 0, sizeof(*t));
	t->deadline = sseg_keeper_deadline(sseg_timeout_ms(seg));
}

static enum sseg_keep_answer unkept(const struct sseg *seg, const char *what)
{
	sseg_log(SSEG_LOG_WARN, "segment '%s': keeper '%s' %s: allocated anew and kept by no one",
		 seg->name, seg->keeper, what);
	return SSEG_KEEP_ANSWER_UNKEPT;
}

static enum sseg_keep_answer answered(struct sseg *seg, const struct sseg_keep_talk *t, int sock,
				      const struct sseg_keep_msg *a, int *fd,
				      struct sseg_keep_decl *got)
{
	char what[SSEG_KEEP_WHY + 96], one;

	switch (a->op) {
	case SSEG_KEEP_KEPT:
		if (sseg_os_recv_fd(sock, fd, &one, 1, t->deadline)) {
			snprintf(what, sizeof(what), "said it keeps it but gave no fd (%s)",
				 sseg_last_error());
			return unkept(seg, what);
		}
		*got = a->decl;
		return SSEG_KEEP_ANSWER_KEPT;
	case SSEG_KEEP_NONE:
		return SSEG_KEEP_ANSWER_NEW;
	case SSEG_KEEP_DISCARDED:
		sseg_log(SSEG_LOG_WARN, "segment '%s': keeper '%s' kept one declared otherwise and "
			 "freed it (%s): allocated anew", seg->name, seg->keeper, a->why);
		return SSEG_KEEP_ANSWER_NEW;
	case SSEG_KEEP_BUSY:
		snprintf(what, sizeof(what), "holds one of this name that a live group maps now "
			 "(%s), and lends it to one group at a time", a->why);
		return unkept(seg, what);
	case SSEG_KEEP_REFUSED:
		snprintf(what, sizeof(what), "refused (%s)", a->why);
		return unkept(seg, what);
	default:
		snprintf(what, sizeof(what), "answered %u to a take", (unsigned)a->op);
		return unkept(seg, what);
	}
}

enum sseg_keep_answer sseg_keeper_take(struct sseg *seg, struct sseg_keep_talk *t, int *fd,
				       struct sseg_keep_decl *got)
{
	struct sseg_keep_msg q = { .op = SSEG_KEEP_TAKE }, a;
	enum sseg_keep_answer out;
	char what[SSEG_KEEP_WHY + 96];
	int sock;

	if (dial(seg->opts.keeper, t->deadline, &sock)) {
		sseg_log(SSEG_LOG_WARN, "segment '%s': %s: the segment is allocated anew and kept by "
			 "no one", seg->name, sseg_last_error());
		return SSEG_KEEP_ANSWER_UNKEPT;
	}
	declare(seg, &q.decl);
	if (ask(sock, &q, -1, &a, t->deadline)) {
		snprintf(what, sizeof(what), "did not answer within the create's share of its "
			 "timeout (%s)", sseg_last_error());
		out = unkept(seg, what);
	} else {
		out = answered(seg, t, sock, &a, fd, got);
	}
	close(sock);
	return out;
}

int sseg_keeper_leave(const char *keeper, const struct sseg_keep_msg *q, int fd,
		      double deadline)
{
	struct sseg_keep_msg a;
	int sock, rc = dial(keeper, deadline, &sock);

	if (rc)
		return rc;
	rc = ask(sock, q, fd, &a, deadline);
	if (rc) {
		char cause[SSEG_ERR_MAX];

		snprintf(cause, sizeof(cause), "%s", sseg_last_error());
		rc = sseg_err(-EIO, "keeper '%s' did not take it (%s)", keeper, cause);
	}
	else if (a.op != SSEG_KEEP_HELD)
		rc = sseg_err(-EPERM, "keeper '%s' did not keep it: %s", keeper, a.why);
	close(sock);
	return rc;
}

void sseg_keeper_hold(struct sseg *seg, struct sseg_keep_talk *t, int fd)
{
	struct sseg_keep_msg q = { .op = SSEG_KEEP_HOLD, .flags = t->hold_flags };
	int rc;

	declare(seg, &q.decl);
	q.decl.mapped_size = seg->mapped_size;
	q.decl.page_size = seg->page_size;
	q.decl.pages = seg->pages;
	snprintf(q.why, sizeof(q.why), "%s", t->why);
	rc = sseg_keeper_leave(seg->opts.keeper, &q, fd, t->deadline);
	if (rc == -EPERM || rc == -EIO)
		sseg_log(SSEG_LOG_WARN, "segment '%s': %s%s", seg->name, sseg_last_error(),
			 rc == -EIO ? ": it is kept by no one" : "");
	else if (rc)
		sseg_log(SSEG_LOG_WARN, "segment '%s': %s: it is kept by no one", seg->name,
			 sseg_last_error());
}

double sseg_keeper_deadline(int timeout_ms)
{
	double share = (timeout_ms > 0 ? timeout_ms : SSEG_DEFAULT_TIMEOUT_MS) / 1000.0 *
		       KEEPER_TIMEOUT_SHARE;

	return sseg_now() + (share < KEEPER_REPLY_S ? share : KEEPER_REPLY_S);
}

int sseg_keeper_lend(const char *keeper, const char *name, int *fd, uint64_t *size)
{
	return sseg_keeper_lend_by(keeper, name, fd, size, sseg_now() + KEEPER_REPLY_S);
}

int sseg_keeper_lend_by(const char *keeper, const char *name, int *fd, uint64_t *size,
			double deadline)
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
		rc = dial(keeper, deadline, &sock);
	if (rc)
		return rc;
	snprintf(q.decl.d.name, sizeof(q.decl.d.name), "%s", name);
	rc = ask(sock, &q, -1, &a, deadline);
	if (rc)
		rc = sseg_err_wrap(rc, "keeper '%s' did not answer", keeper);
	else if (a.op == SSEG_KEEP_NONE)
		rc = sseg_err(-ENOENT, "keeper '%s' holds no segment '%s'", keeper, name);
	else if (a.op != SSEG_KEEP_KEPT)
		rc = sseg_err(-EPROTO, "keeper '%s' answered %u to a lend", keeper, (unsigned)a.op);
	else
		rc = sseg_os_recv_fd(sock, fd, &one, 1, deadline);
	if (!rc)
		*size = a.decl.mapped_size;
	close(sock);
	return rc;
}

int sseg_keeper_in_use(int fd)
{
	sseg_err_clear();
	if (fd < 0)
		return sseg_err(-EBADF, "sseg_keeper_in_use: fd %d", fd);
	return sseg_os_memfd_claimed(fd);
}
