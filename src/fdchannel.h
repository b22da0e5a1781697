/* SPDX-License-Identifier: Apache-2.0 */
/* The owner's fd channel (fdchannel.c): an abstract unix socket opened in
 * create and named in the owner's blob. Each local peer connects in
 * complete, proves membership with the owner's random token, receives the
 * fd (SCM_RIGHTS) or only the go-ahead, maps, and acks; the owner's
 * complete returns once every local peer has acked, which is also the
 * barrier that keeps the owner from tearing down too early. */
#ifndef SSEG_FDCHANNEL_H
#define SSEG_FDCHANNEL_H

#include <sys/types.h>

#include "blob.h"
#include "internal.h"

struct sseg;
struct sseg_channel; /* its state inside the segment: segment_types.h */

SSEG_HIDDEN void sseg_channel_init(struct sseg_channel *ch);
/* Owner, in create: open the socket (SSEG_HELD_CHANNEL). */
SSEG_HIDDEN int sseg_channel_listen(struct sseg *seg);
/* The owner's handle section: obtained pages, sizes, socket name, token. */
SSEG_HIDDEN void sseg_channel_describe(const struct sseg *seg, struct sseg_blob_handle *h);
/* Called for each local peer after it proved membership and before it is
 * answered: a backend whose handles need the importer named first (a trust
 * list of pids) does it here. pid is the peer's as this process's PID
 * namespace sees it (SO_PEERCRED; 0 when outside it); peer is its blob. */
typedef int (*sseg_channel_admit_fn)(struct sseg *seg, const struct sseg_blob *peer, pid_t pid);

/* Owner, in complete: hand fd to every local peer (fd < 0: the peers import
 * by handle and only need the barrier; admit may be NULL), then collect
 * every ack. The peers' connections stay open where the background work
 * will need them (sseg_link_wanted): sseg_channel_take_peers takes them. */
SSEG_HIDDEN int sseg_channel_hand_over(struct sseg *seg, const struct sseg_blob *blobs, int fd,
				       sseg_channel_admit_fn admit);
/* Peer, in complete: reach the owner, prove membership, receive its fd
 * (fd NULL: only the go-ahead); *owner_sock stays open for the ack. */
SSEG_HIDDEN int sseg_channel_fetch(struct sseg *seg, const struct sseg_blob *owner, int *fd,
				   int *owner_sock);
/* Owner, after hand_over: the peers' open connections (malloc'd, *n of
 * them; NULL with *n 0 when none), which the caller now closes. */
SSEG_HIDDEN int *sseg_channel_take_peers(struct sseg *seg, int *n);
/* Peer: report the mapping's status to the owner; the socket is closed,
 * or kept for the owner's word on background work (sseg_link_keep). */
SSEG_HIDDEN int sseg_channel_ack(struct sseg *seg, int owner_sock, int status);
SSEG_HIDDEN int sseg_channel_release(struct sseg *seg);
/* In a child after fork(): close the channel's descriptors. */
SSEG_HIDDEN void sseg_channel_forget(struct sseg *seg);

#endif
