/* SPDX-License-Identifier: Apache-2.0 */
/* The host pools in a listing (list_pools.c): this user's, found by their
 * record files in the user's runtime directory, each opened map-only (no
 * slot taken, nothing changed) to read what it holds; a pool that no
 * process has open is asked of every keeper running for this user. */
#ifndef SSEG_LIST_POOLS_H
#define SSEG_LIST_POOLS_H

#include "json.h"
#include "list_store.h"

/* Adds this user's pools to l; a pool that cannot be read is left out. */
SSEG_HIDDEN void sseg_list_pools(struct sseg_list *l);
/* "pools": [...] in a listing's document. */
SSEG_HIDDEN void sseg_list_pools_document(struct sseg_json *j, const struct sseg_list *l);

#endif
