/* SPDX-License-Identifier: Apache-2.0 */
/* The segment object: what every part of the library knows of a segment.
 * Only types and inline accessors live here; each unit that acts on a
 * segment has its own header. */
#ifndef SSEG_SEGMENT_TYPES_H
#define SSEG_SEGMENT_TYPES_H

#include "blob.h"
#include "internal.h"
#include "os/host.h"

/* Stages a segment holds; a bit is set when the stage was taken and
 * cleared only after its release succeeded, so destroy resumes. */
enum sseg_stage {
	SSEG_HELD_CHANNEL = 1u << 0, /* the owner's listening fd channel */
	SSEG_HELD_PEERS = 1u << 1,   /* connections to local peers: awaiting their ack, or
				      * kept for the background work's word */
	SSEG_HELD_BACKEND = 1u << 2, /* the backend's state: memory, mapping, driver handles */
	SSEG_HELD_HOSTREG = 1u << 3, /* host registration chunks and their device */
};

struct sseg_backend_ops;
struct sseg_hostreg;
struct sseg_owner_link;

/* The owner's fd channel (fdchannel.c). */
struct sseg_channel {
	int fd;                       /* the listening socket; -1 */
	int *peer_fds;                /* connections awaiting acks, indexed by rank */
	char sock_name[SSEG_SOCK_NAME_MAX + 1];
	uint8_t token[SSEG_TOKEN_LEN];
};

struct sseg {
	char name[SSEG_NAME_MAX + 1];
	char keeper[SSEG_NAME_MAX + 1]; /* opts.keeper's copy */
	struct sseg_opts opts;        /* copy; name, keeper and layout point into this object */
	struct sseg_layout *layout;   /* own copy, or NULL */
	const struct sseg_backend_ops *ops;
	enum sseg_backend backend;

	uint64_t size;                /* declared */
	uint64_t mapped_size;         /* rounded up to page_size */
	uint64_t page_size;           /* obtained */
	enum sseg_pages pages;        /* obtained */
	int pages_verified;
	uint64_t huge_bytes;
	char pages_reason[320];
	uint64_t numa_nodes;

	int is_owner;
	int kept;                     /* the owner took its memory from the keeper */
	int completed;
	int readonly;
	void *base;                   /* this rank's mapping, set by the backend */
	void *tag;                    /* the tag page for `sharedseg ls` (tag.c); NULL */
	void *backend_state;          /* the backend's own */
	struct sseg_channel channel;  /* the owner's fd channel */
	struct sseg_hostreg *hostreg;
	struct sseg_background *background; /* populate=background's work (owner) */
	struct sseg_owner_link *owner_link; /* a peer's connection to that work */
	uint32_t group_pid, group_nonce; /* the owner's blob: which group (tags) */

	uint8_t blob[SSEG_BLOB_SIZE]; /* what create gave the caller */
	int failed;                   /* complete failed: destroy is all that is left */
	uint32_t held;                /* enum sseg_stage bits */
	int pins;
	int destroy_failures;
	double create_s, complete_s, populate_s;
	struct sseg_os_host_id host;
	struct sseg *next;            /* registry: the live or the pending list */
	struct sseg *next_any;        /* registry: every segment not yet freed */
};

static inline int sseg_timeout_ms(const struct sseg *seg)
{
	return seg->opts.timeout_ms ? seg->opts.timeout_ms : SSEG_DEFAULT_TIMEOUT_MS;
}

#endif
