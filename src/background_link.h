/* SPDX-License-Identifier: Apache-2.0 */
/* populate=background across processes (background_link.c): each local
 * peer keeps its fd-channel connection to the owner while the owner's
 * threads populate, and the owner writes on each, once, how the work
 * ended. A peer's wait reads that word, or the connection's close when the
 * owner is gone (the kernel closes it whatever killed the owner), so no
 * wait outlives the work that could end it. */
#ifndef SSEG_BACKGROUND_LINK_H
#define SSEG_BACKGROUND_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "internal.h"

struct sseg;

/* Whether this rank's channel connections outlive complete: the owner's
 * to every local peer and each peer's to its owner (populate=background
 * on a backend whose pages are not resident from create). */
SSEG_HIDDEN bool sseg_link_wanted(const struct sseg *seg);

/* Owner: the word on how its work ended, written once on every
 * connection (rc 0: every page is resident), which it then closes. */
SSEG_HIDDEN void sseg_link_tell(int *conns, int n, int rc, const char *why);

/* Peer, once its mapping was acknowledged: keeps owner_sock (or closes it
 * when it cannot keep it). */
SSEG_HIDDEN void sseg_link_keep(struct sseg *seg, int owner_sock);
/* Peer: 0 while the owner's work may still end the wait (or nothing is
 * watched); 1 with the owner's result in *rc (and the sentence set when it
 * is an error) once its word came or its connection closed. */
SSEG_HIDDEN int sseg_link_outcome(struct sseg *seg, int *rc);
/* Peer: closes the connection (destroy). */
SSEG_HIDDEN void sseg_link_release(struct sseg *seg);
/* In a child after fork(): the same, touching no lock. */
SSEG_HIDDEN void sseg_link_forget_in_child(struct sseg *seg);

#endif
