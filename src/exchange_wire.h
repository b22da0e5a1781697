/* SPDX-License-Identifier: Apache-2.0 */
/* Frames of the built-in local exchange (exchange_wire.c), over the
 * deadline-bounded sockets of os/sock.h. */
#ifndef SSEG_EXCHANGE_WIRE_H
#define SSEG_EXCHANGE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define SSEG_WIRE_FRAME_SIZE 24
/* How long the hub tries to tell a rank why the group failed. */
#define SSEG_WIRE_ABORT_S 0.1

enum sseg_wire_kind { SSEG_WIRE_HELLO = 1, SSEG_WIRE_DATA = 2, SSEG_WIRE_STATUS = 3 };

/* Encoded little-endian after a magic: kind, arg (hello: rank; status: 0 or
 * a negative errno), world (hello: world size), len (bytes that follow). */
struct sseg_wire_frame {
	uint32_t kind;
	int32_t arg;
	uint32_t world;
	uint64_t len;
};

SSEG_HIDDEN void sseg_wire_encode(uint8_t *p, const struct sseg_wire_frame *f);
/* false when the bytes are not a frame of this protocol and kind. */
SSEG_HIDDEN bool sseg_wire_decode(const uint8_t *p, uint32_t kind, struct sseg_wire_frame *f);
SSEG_HIDDEN int sseg_wire_send_frame(int fd, uint32_t kind, int32_t arg, uint64_t len,
				     double deadline);
/* Tells one rank that the group failed, and why (best effort). */
SSEG_HIDDEN void sseg_wire_send_abort(int fd, int err, const char *why);

#endif
