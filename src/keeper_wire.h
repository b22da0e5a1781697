/* SPDX-License-Identifier: Apache-2.0 */
/* What an owner and a keeper say to each other (keeper_wire.c): one frame
 * each way (frame.h's, kind KEEPER, of a fixed size), over a unix socket of
 * this host, with the memfd attached where one changes hands. */
#ifndef SSEG_KEEPER_WIRE_H
#define SSEG_KEEPER_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decl.h"
#include "internal.h"

#define SSEG_KEEP_FRAME 1024
#define SSEG_KEEP_WHY 320

enum sseg_keep_op {
	SSEG_KEEP_TAKE = 1, /* owner: a segment of this declaration, if kept */
	SSEG_KEEP_HOLD = 2, /* owner: hold this one (its fd attached) */
	SSEG_KEEP_KEPT = 3, /* keeper: here it is (fd attached) */
	SSEG_KEEP_NONE = 4, /* keeper: none of that name */
	SSEG_KEEP_DISCARDED = 5, /* keeper: one of that name declared otherwise, now freed */
	SSEG_KEEP_HELD = 6, /* keeper: holding it */
	SSEG_KEEP_REFUSED = 7, /* keeper: cannot (why says) */
	SSEG_KEEP_LEND = 8, /* anyone of the user: the fd of the segment of this name, if held */
	SSEG_KEEP_BUSY = 9, /* keeper: the one of that name is mapped by a live group now */
};

/* What a HOLD asks beyond holding. */
enum sseg_keep_flag {
	/* the segment the keeper gave was unusable (why says how): let it go
	 * for this one, unless a live group maps it */
	SSEG_KEEP_REPLACE = 1u << 0,
};

/* What a segment was declared with (decl.h), and what its owner obtained.
 * A kept segment is given only to a declaration equal in every KEPT field,
 * and of this library's version. */
struct sseg_keep_decl {
	struct sseg_decl d;
	char version[16];           /* the library's, "0.2.0": a layout may change with it */
	/* obtained (HOLD, KEPT) */
	uint64_t mapped_size, page_size;
	uint32_t pages;
};

struct sseg_keep_msg {
	uint32_t op;
	uint32_t flags; /* enum sseg_keep_flag */
	struct sseg_keep_decl decl;
	char why[SSEG_KEEP_WHY];    /* DISCARDED, REFUSED, BUSY; HOLD with REPLACE */
};

SSEG_HIDDEN void sseg_keep_encode(const struct sseg_keep_msg *m, uint8_t out[SSEG_KEEP_FRAME]);
/* -EPROTO (with the sentence) for a frame of another kind or version. */
SSEG_HIDDEN int sseg_keep_decode(const uint8_t in[SSEG_KEEP_FRAME], struct sseg_keep_msg *m);
/* false when the version and every KEPT field (decl.h) are equal; else
 * true, and why says the first that differs ("size: kept 1 GiB, declared
 * now 2 GiB"). */
SSEG_HIDDEN bool sseg_keep_differs(const struct sseg_keep_decl *kept,
				   const struct sseg_keep_decl *asked, char *why, size_t len);
/* The file name of the socket a keeper listens on, in this user's runtime
 * directory (os/named.h). */
SSEG_HIDDEN void sseg_keep_socket(const char *keeper, char *buf, size_t len);
/* 0, or -EINVAL with the sentence: 1..SSEG_NAME_MAX bytes of [A-Za-z0-9._-]. */
SSEG_HIDDEN int sseg_keep_check_name(const char *keeper);

#endif
