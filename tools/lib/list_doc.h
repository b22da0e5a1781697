/* SPDX-License-Identifier: Apache-2.0 */
/* A listing's document and facts (list_doc.c): what `sharedseg ls` prints,
 * as a table or as JSON, and what Python's sharedseg.list_segments() gives,
 * written once. */
#ifndef SSEG_LIST_DOC_H
#define SSEG_LIST_DOC_H

#include "json.h"
#include "list.h"

/* What a segment's holders say of it. */
struct sseg_list_facts {
	const char *kind;     /* page kind: mapped ("thp"), or declared by a tag */
	uint64_t page;        /* page size */
	uint64_t resident;    /* bytes */
	uint64_t size;
	int64_t uid;          /* whose it is; -1 unknown or several */
	const struct sseg_holder *owner; /* the owner rank's mapping, or NULL */
	int owner_pid;        /* -1 unknown */
	const char *kept_by;  /* a keeper's name, or NULL */
	bool mapped;          /* some process maps it */
};

SSEG_HIDDEN void sseg_list_facts(const struct sseg_list *l, const struct sseg_listed *s,
				 struct sseg_list_facts *f);
/* The document of a scan: schema, truncated, segments [...]. */
SSEG_HIDDEN void sseg_list_document(struct sseg_json *j, const struct sseg_list *l);

#endif
