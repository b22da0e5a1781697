/* SPDX-License-Identifier: Apache-2.0 */
/* Frames of the built-in local exchange. */
#include <stdio.h>
#include <string.h>

#include "exchange_wire.h"
#include "os/sock.h"

#define WIRE_MAGIC 0x31475353u /* "SSG1" */

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

int sseg_wire_send_frame(int fd, uint32_t kind, int32_t arg, uint64_t len, double deadline)
{
	struct sseg_wire_frame f = { .kind = kind, .arg = arg, .len = len };
	uint8_t hdr[SSEG_WIRE_FRAME_SIZE];

	sseg_wire_encode(hdr, &f);
	return sseg_os_send_all(fd, hdr, sizeof(hdr), deadline);
}

/* Best effort: the sentence the caller has stays this thread's. */
void sseg_wire_send_abort(int fd, int err, const char *why)
{
	double deadline = sseg_now() + SSEG_WIRE_ABORT_S;
	char keep[SSEG_ERR_MAX];
	size_t len = strlen(why);

	snprintf(keep, sizeof(keep), "%s", sseg_last_error());
	if (!sseg_wire_send_frame(fd, SSEG_WIRE_STATUS, err, len, deadline))
		sseg_os_send_all(fd, why, len, deadline);
	sseg_err(err, "%s", keep);
}
