/* SPDX-License-Identifier: Apache-2.0 */
/* The one frame (frame.h): its head, its bounds, its failure record. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "os/sock.h"

static const char *const names[SSEG_FRAME_KINDS] = {
	[SSEG_FRAME_GROUP_HELLO] = "a local group's hello",
	[SSEG_FRAME_GROUP_DATA] = "a local group's data",
	[SSEG_FRAME_GROUP_STATUS] = "a local group's status",
	[SSEG_FRAME_CHANNEL_HELLO] = "an fd channel's hello",
	[SSEG_FRAME_CHANNEL_FD] = "an fd channel's segment",
	[SSEG_FRAME_CHANNEL_ACK] = "an fd channel's acknowledgement",
	[SSEG_FRAME_BACKGROUND] = "the owner's word on its population",
	[SSEG_FRAME_KEEPER] = "a keeper's message",
	[SSEG_FRAME_STATUS] = "a rank's status",
};

uint32_t sseg_frame_max(uint32_t kind)
{
	switch (kind) {
	case SSEG_FRAME_GROUP_HELLO:
		return 0;
	case SSEG_FRAME_CHANNEL_HELLO:
		return 16; /* the token */
	case SSEG_FRAME_CHANNEL_FD:
		return 8; /* the mapped size */
	case SSEG_FRAME_KEEPER:
		return SSEG_FRAME_KEEPER_BODY;
	case SSEG_FRAME_STATUS:
		return 4096;
	case SSEG_FRAME_GROUP_DATA:
	case SSEG_FRAME_GROUP_STATUS:
		return UINT32_MAX; /* the caller's bytes; its receiver bounds them */
	default:
		return SSEG_FRAME_WHY; /* a failure's sentence */
	}
}

static const char *name_of(uint32_t kind)
{
	return kind > 0 && kind < SSEG_FRAME_KINDS ? names[kind] : "no frame of this library";
}

void sseg_frame_encode(uint8_t head[SSEG_FRAME_HEAD], const struct sseg_frame *f)
{
	sseg_put32(head, SSEG_FRAME_MAGIC);
	head[4] = (uint8_t)f->kind;
	head[5] = (uint8_t)(f->kind >> 8);
	head[6] = (uint8_t)SSEG_FRAME_FORMAT;
	head[7] = (uint8_t)(SSEG_FRAME_FORMAT >> 8);
	sseg_put32(head + 8, (uint32_t)f->code);
	sseg_put32(head + 12, f->arg);
	sseg_put32(head + 16, f->aux);
	sseg_put32(head + 20, f->len);
}

int sseg_frame_decode(const uint8_t head[SSEG_FRAME_HEAD], uint32_t kind, struct sseg_frame *f)
{
	unsigned format = head[6] | (unsigned)head[7] << 8;

	memset(f, 0, sizeof(*f));
	if (sseg_get32(head) != SSEG_FRAME_MAGIC)
		return sseg_err(-EPROTO, "expected %s, got bytes that are no frame of this library",
				name_of(kind));
	if (format != SSEG_FRAME_FORMAT)
		return sseg_err(-EPROTO, "expected %s, got a frame of format %u (this library "
				"speaks %u)", name_of(kind), format, SSEG_FRAME_FORMAT);
	f->kind = head[4] | (uint32_t)head[5] << 8;
	f->code = (int32_t)sseg_get32(head + 8);
	f->arg = sseg_get32(head + 12);
	f->aux = sseg_get32(head + 16);
	f->len = sseg_get32(head + 20);
	if (f->kind != kind)
		return sseg_err(-EPROTO, "expected %s, got %s", name_of(kind), name_of(f->kind));
	if (f->code > 0 || f->code < -4095)
		return sseg_err(-EPROTO, "%s carries code %" PRId32 ", neither 0 nor an errno",
				name_of(kind), f->code);
	if (f->len > sseg_frame_max(kind))
		return sseg_err(-EPROTO, "%s of %" PRIu32 " bytes, at most %" PRIu32 " expected",
				name_of(kind), f->len, sseg_frame_max(kind));
	return 0;
}

/* A small body goes in one write with its head (and the fd): a peer that
 * refuses the head (its fd table full) and hangs up then leaves nothing
 * unsent here to fail on, and its answer is what this side reads next. */
#define ONE_WRITE 256

int sseg_frame_send(int sock, const struct sseg_frame *f, const void *body, int fd,
		    double deadline)
{
	uint8_t buf[SSEG_FRAME_HEAD + ONE_WRITE];
	size_t first = SSEG_FRAME_HEAD;
	int rc;

	sseg_frame_encode(buf, f);
	if (f->len && f->len <= ONE_WRITE) {
		memcpy(buf + SSEG_FRAME_HEAD, body, f->len);
		first += f->len;
	}
	rc = fd >= 0 ? sseg_os_send_fd(sock, fd, buf, first, deadline)
		     : sseg_os_send_all(sock, buf, first, deadline);
	if (!rc && first == SSEG_FRAME_HEAD && f->len)
		rc = sseg_os_send_all(sock, body, f->len, deadline);
	return rc;
}

int sseg_frame_recv(int sock, uint32_t kind, struct sseg_frame *f, void *body, size_t cap,
		    int *fd, double deadline)
{
	uint8_t head[SSEG_FRAME_HEAD];
	int rc, got = -1;

	if (fd)
		*fd = -1;
	rc = fd ? sseg_os_recv_fd(sock, &got, head, sizeof(head), deadline)
		: sseg_os_recv_all(sock, head, sizeof(head), deadline);
	if (!rc)
		rc = sseg_frame_decode(head, kind, f);
	if (!rc && f->len > cap)
		rc = sseg_err(-EPROTO, "%s of %" PRIu32 " bytes, at most %zu expected here",
			      name_of(kind), f->len, cap);
	if (!rc && f->len)
		rc = sseg_os_recv_all(sock, body, f->len, deadline);
	if (!rc && f->len < cap)
		((uint8_t *)body)[f->len] = '\0';
	if (rc && got >= 0)
		close(got);
	else if (fd)
		*fd = got;
	return rc;
}

void sseg_frame_send_failure(int sock, uint32_t kind, int err, const char *why, double deadline)
{
	struct sseg_frame f = { .kind = kind, .code = err < 0 && err > -4096 ? err : -EIO };
	char keep[SSEG_ERR_MAX];
	size_t n = strnlen(why, SSEG_FRAME_WHY);

	snprintf(keep, sizeof(keep), "%s", sseg_last_error());
	f.len = (uint32_t)n;
	sseg_frame_send(sock, &f, why, -1, deadline);
	sseg_err(err, "%s", keep);
}

int sseg_frame_failure(const struct sseg_frame *f, const char *body, const char *who)
{
	char why[SSEG_FRAME_WHY + 1];
	size_t n = f->len < SSEG_FRAME_WHY ? f->len : SSEG_FRAME_WHY;

	if (!f->code)
		return 0;
	memcpy(why, body, n);
	why[n] = '\0';
	if (!n)
		snprintf(why, sizeof(why), "%s", strerror(-f->code));
	return sseg_err(f->code, "%s%s%s", who ? who : "", who ? ": " : "", why);
}

void sseg_frame_record(uint8_t *rec, size_t len, const struct sseg_frame *f, const void *body)
{
	struct sseg_frame cut = *f;
	size_t room = len - SSEG_FRAME_HEAD;

	if (cut.len > room)
		cut.len = (uint32_t)room;
	memset(rec, 0, len);
	sseg_frame_encode(rec, &cut);
	if (cut.len)
		memcpy(rec + SSEG_FRAME_HEAD, body, cut.len);
}

int sseg_frame_from_record(const uint8_t *rec, size_t len, uint32_t kind, struct sseg_frame *f,
			   const uint8_t **body)
{
	int rc = sseg_frame_decode(rec, kind, f);

	if (!rc && f->len > len - SSEG_FRAME_HEAD)
		rc = sseg_err(-EPROTO, "%s record of %zu bytes declares a body of %" PRIu32,
			      name_of(kind), len, f->len);
	*body = rec + SSEG_FRAME_HEAD;
	return rc;
}
