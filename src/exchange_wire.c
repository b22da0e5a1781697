/* Wire format and bounded socket I/O of the built-in local exchange. */
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "exchange_wire.h"

#define WIRE_MAGIC 0x31475353u /* "SSG1" */

/* ---- frames ---- */

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

void sseg_wire_encode(uint8_t *p, const struct sseg_wire_frame *f)
{
	put32(p, WIRE_MAGIC);
	put32(p + 4, f->kind);
	put32(p + 8, (uint32_t)f->arg);
	put32(p + 12, f->world);
	put32(p + 16, (uint32_t)f->len);
	put32(p + 20, (uint32_t)(f->len >> 32));
}

bool sseg_wire_decode(const uint8_t *p, uint32_t kind, struct sseg_wire_frame *f)
{
	f->kind = get32(p + 4);
	f->arg = (int32_t)get32(p + 8);
	f->world = get32(p + 12);
	f->len = get32(p + 16) | (uint64_t)get32(p + 20) << 32;
	return get32(p) == WIRE_MAGIC && f->kind == kind;
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

