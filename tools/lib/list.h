/* SPDX-License-Identifier: Apache-2.0 */
/* What `sharedseg ls` sees (list.c scans, list_store.c holds, list_doc.c
 * renders): the segments live on this host, from /proc: the tools' work,
 * in their helper library, not the library's.
 * Every process may be hostile: only whole mapping lines of its smaps
 * count, a tag names the rank of the mapping its window starts with, and
 * what is said of a process (uid, command) is read once, at scan time. */
#ifndef SSEG_LIST_H
#define SSEG_LIST_H

#include "list_store.h"

/* Fills l from /proc; sseg_list_free (list_store.h) releases it. */
SSEG_HIDDEN int sseg_list_scan(struct sseg_list *l);

#endif
