/* SPDX-License-Identifier: Apache-2.0 */
/* One frame for everything the library says to another process (frame.c):
 * on a socket (the local exchange, the fd channel, the background word, a
 * keeper) and in the fixed-size status records a caller's all-gather
 * carries (sseg_open's, the Python package's). A 24-byte head, explicit
 * little-endian: magic "SSGF", kind u16, format u16, code i32 (0, or a
 * negative errno: then the body is the sentence that explains it), arg u32
 * and aux u32 (the kind's small values: a rank, a world size, a keeper's
 * op), len u32 (the body's bytes); then the body; an fd may ride on the
 * head's first byte. Parsed in one place, with each kind's bound on its
 * body: a peer that sends more, or another kind, or another magic, is
 * refused with a sentence (and fuzzed: tests/fuzz/fuzz_frame.c). */
#ifndef SSEG_FRAME_H
#define SSEG_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define SSEG_FRAME_HEAD 24
#define SSEG_FRAME_MAGIC 0x46475353u /* "SSGF" */
#define SSEG_FRAME_FORMAT 1u
/* A keeper's body: fixed (keeper_wire.c). */
#define SSEG_FRAME_KEEPER_BODY (1024 - SSEG_FRAME_HEAD)
/* The longest failure sentence a frame carries. */
#define SSEG_FRAME_WHY 320

enum sseg_frame_kind {
	SSEG_FRAME_GROUP_HELLO = 1, /* local exchange, rank to hub: arg rank, aux world size */
	SSEG_FRAME_GROUP_DATA,      /* rank to hub: its bytes */
	SSEG_FRAME_GROUP_STATUS,    /* hub to rank: 0 and the gathered length, or a failure */
	SSEG_FRAME_CHANNEL_HELLO,   /* fd channel, peer to owner: arg rank; body: the token */
	SSEG_FRAME_CHANNEL_FD,      /* owner to peer: body: the mapped size; the fd rides on it */
	SSEG_FRAME_CHANNEL_ACK,     /* peer to owner: 0 mapped, or a failure */
	SSEG_FRAME_BACKGROUND,      /* owner to peer: how its population ended */
	SSEG_FRAME_KEEPER,          /* owner and keeper: arg the op, aux its flags; body:
				     * keeper_wire.c's fields */
	SSEG_FRAME_STATUS,          /* a rank's status in an all-gather (a record): code
				     * 0 or its failure; body the sentence. The Python
				     * package's: arg its phase, aux the error's kind,
				     * body 32 bytes of host, then the sentence */
	SSEG_FRAME_KINDS
};

struct sseg_frame {
	uint32_t kind;
	int32_t code;
	uint32_t arg, aux;
	uint32_t len;
};

/* The most body bytes a kind may carry. */
SSEG_HIDDEN uint32_t sseg_frame_max(uint32_t kind);

SSEG_HIDDEN void sseg_frame_encode(uint8_t head[SSEG_FRAME_HEAD], const struct sseg_frame *f);
/* 0, or -EPROTO with the sentence: another magic or format, a kind other
 * than kind, a body longer than the kind allows, a code that is neither 0
 * nor a negative errno. */
SSEG_HIDDEN int sseg_frame_decode(const uint8_t head[SSEG_FRAME_HEAD], uint32_t kind,
				  struct sseg_frame *f);

/* The head and f->len bytes of body, fd (when >= 0) riding on the first
 * byte; sets the sentence. */
SSEG_HIDDEN int sseg_frame_send(int sock, const struct sseg_frame *f, const void *body, int fd,
				double deadline);
/* A head of kind and its body into body (cap bytes; a longer body is
 * -EPROTO); with fd non-NULL, the fd that rides on it (-1 when none came).
 * The body is NUL-ended when there is room. Sets the sentence. */
SSEG_HIDDEN int sseg_frame_recv(int sock, uint32_t kind, struct sseg_frame *f, void *body,
				size_t cap, int *fd, double deadline);

/* The one failure record: a frame of kind whose code is err (a negative
 * errno) and whose body is the sentence; sent best effort, the caller's
 * sentence kept. */
SSEG_HIDDEN void sseg_frame_send_failure(int sock, uint32_t kind, int err, const char *why,
					 double deadline);
/* A received frame's failure as this thread's error: -code with its body's
 * sentence (prefixed by who, when not NULL); 0 for a frame that is none. */
SSEG_HIDDEN int sseg_frame_failure(const struct sseg_frame *f, const char *body, const char *who);

/* A frame as a fixed-size record of len bytes (at least the head): what an
 * all-gather carries; the body cut to fit. */
SSEG_HIDDEN void sseg_frame_record(uint8_t *rec, size_t len, const struct sseg_frame *f,
				   const void *body);
/* The frame a record holds and its body (in rec); -EPROTO as decode. */
SSEG_HIDDEN int sseg_frame_from_record(const uint8_t *rec, size_t len, uint32_t kind,
				       struct sseg_frame *f, const uint8_t **body);

#endif
