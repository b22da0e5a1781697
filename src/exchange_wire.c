/* Wire format and bounded socket I/O of the built-in local exchange. */
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "exchange_wire.h"

#define WIRE_MAGIC 0x31475353u /* "SSG1" */

/* ---- frames ---- */

void sseg_wire_encode(uint8_t *p, const struct sseg_wire_frame *f)
{
	sseg_put32(p, WIRE_MAGIC);
	sseg_put32(p + 4, f->kind);
	sseg_put32(p + 8, (uint32_t)f->arg);
	sseg_put32(p + 12, f->world);
	sseg_put32(p + 16, (uint32_t)f->len);
	sseg_put32(p + 20, (uint32_t)(f->len >> 32));
}

bool sseg_wire_decode(const uint8_t *p, uint32_t kind, struct sseg_wire_frame *f)
{
	f->kind = sseg_get32(p + 4);
	f->arg = (int32_t)sseg_get32(p + 8);
	f->world = sseg_get32(p + 12);
	f->len = sseg_get32(p + 16) | (uint64_t)sseg_get32(p + 20) << 32;
	return sseg_get32(p) == WIRE_MAGIC && f->kind == kind;
}

/* ---- bounded socket I/O ---- */

int sseg_wire_remaining_ms(double deadline)
{
	double left = deadline - sseg_now();

	return left <= 0 ? 0 : (int)(left * 1000.0) + 1;
}

int sseg_wire_wait(int fd, short events, double deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	for (;;) {
		int n = poll(&pfd, 1, sseg_wire_remaining_ms(deadline));

		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

int sseg_wire_send(int fd, const void *buf, size_t len, double deadline)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		int rc;

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		rc = sseg_wire_wait(fd, POLLOUT, deadline);
		if (rc)
			return rc;
	}
	return 0;
}

int sseg_wire_recv(int fd, void *buf, size_t len, double deadline)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
		int rc;

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		rc = sseg_wire_wait(fd, POLLIN, deadline);
		if (rc)
			return rc;
	}
	return 0;
}

int sseg_wire_send_frame(int fd, uint32_t kind, int32_t arg, uint64_t len, double deadline)
{
	struct sseg_wire_frame f = { .kind = kind, .arg = arg, .len = len };
	uint8_t hdr[SSEG_WIRE_FRAME_SIZE];

	sseg_wire_encode(hdr, &f);
	return sseg_wire_send(fd, hdr, sizeof(hdr), deadline);
}

/* The hub tells one rank that the group failed, and why (best effort). */
void sseg_wire_send_abort(int fd, int err, const char *why)
{
	double deadline = sseg_now() + SSEG_WIRE_ABORT_S;
	size_t len = strlen(why);

	if (!sseg_wire_send_frame(fd, SSEG_WIRE_STATUS, err, len, deadline))
		sseg_wire_send(fd, why, len, deadline);
}

