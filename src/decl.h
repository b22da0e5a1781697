/* SPDX-License-Identifier: Apache-2.0 */
/* The declaration (decl.c): what a group's ranks declare of their segment,
 * and what a keeper compares before it gives a kept segment, written once.
 * One row a field: its member of struct sseg_decl, its name in sentences,
 * its kind (how it is shown), and who compares it:
 *   GROUP  every rank declares it the same: in the blob's fingerprint, and
 *          compared in sseg_complete ("rank 2 declared size=8 MiB, rank 0
 *          declared size=4 MiB");
 *   KEPT   a keeper gives a kept segment only to an owner that declares it
 *          the same ("size: kept 8 MiB, declared now 16 MiB").
 * The first row that differs is the one named. Adding a field: a row here,
 * a member below, where it is set (options.c's sseg_decl_of), its test and
 * its docs;
 * the blob, the keeper's frame, the fingerprint, the comparisons and their
 * sentences follow from the row. (A rank's tag page, which `sharedseg ls`
 * reads, describes its mapping, not the declaration: tag.c.) */
#ifndef SSEG_DECL_H
#define SSEG_DECL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

enum sseg_decl_where {
	SSEG_DECL_GROUP = 1u << 0,
	SSEG_DECL_KEPT = 1u << 1,
};

enum sseg_decl_kind {
	SSEG_DECL_KIND_NAME,     /* text: "name" */
	SSEG_DECL_KIND_HASH,     /* hex */
	SSEG_DECL_KIND_BYTES,    /* "8 MiB", or "8388609 bytes" */
	SSEG_DECL_KIND_PAGES,    /* sseg_pages_name */
	SSEG_DECL_KIND_BACKEND,  /* sseg_backend_name */
	SSEG_DECL_KIND_FLAGS,    /* "readonly-peers|host-register", "none" */
	SSEG_DECL_KIND_POPULATE, /* sseg_populate_name */
	SSEG_DECL_KIND_NUMA,     /* sseg_numa_name */
	SSEG_DECL_KIND_NUMBER,   /* decimal */
};

#define SSEG_DECL_GK (SSEG_DECL_GROUP | SSEG_DECL_KEPT)

/* X(member, kind, where). A rank's own owner_rank is its host's owner:
 * ranks of several hosts name several, which verify.c checks as such. */
#define SSEG_DECL_FIELDS(X)                                                                    \
	X(name, NAME, SSEG_DECL_GK)                                                            \
	X(layout, HASH, SSEG_DECL_GK)                                                          \
	X(size, BYTES, SSEG_DECL_GK)                                                           \
	X(pages, PAGES, SSEG_DECL_GK)                                                          \
	X(backend, BACKEND, SSEG_DECL_GK)                                                      \
	X(flags, FLAGS, SSEG_DECL_GK)                                                          \
	X(populate, POPULATE, SSEG_DECL_GROUP)                                                 \
	X(world_size, NUMBER, SSEG_DECL_GK)                                                    \
	X(owner_rank, NUMBER, SSEG_DECL_KEPT)                                                  \
	X(numa, NUMA, SSEG_DECL_KEPT)                                                          \
	X(numa_node, NUMBER, SSEG_DECL_KEPT)

/* Every field but the name is a number, as wide as the widest. */
struct sseg_decl {
	char name[SSEG_NAME_MAX + 1];
	uint64_t layout;     /* the layout's hash; 0 without one */
	uint64_t size;       /* bytes declared (the layout's, or opts.size) */
	uint64_t pages;      /* enum sseg_pages asked for */
	uint64_t backend;    /* enum sseg_backend asked for (resolved: auto is none) */
	uint64_t flags;      /* SSEG_F_* */
	uint64_t populate;   /* enum sseg_populate */
	uint64_t world_size;
	uint64_t owner_rank;
	uint64_t numa;       /* enum sseg_numa */
	uint64_t numa_node;  /* with SSEG_NUMA_NODE; else 0 */
};

enum sseg_decl_field {
#define SSEG_DECL_ENUM(member, kind, where) SSEG_DECL_##member,
	SSEG_DECL_FIELDS(SSEG_DECL_ENUM)
#undef SSEG_DECL_ENUM
	SSEG_DECL_NFIELDS
};

/* Bytes of a declaration on the wire (the blob, the keeper's frame):
 * the name, then every number as a little-endian u64, in row order. */
#define SSEG_DECL_WIRE (SSEG_NAME_MAX + 1 + 8 * (SSEG_DECL_NFIELDS - 1))

SSEG_HIDDEN void sseg_decl_encode(const struct sseg_decl *d, uint8_t *out);
SSEG_HIDDEN void sseg_decl_decode(const uint8_t *in, struct sseg_decl *d);
/* A hash of the fields of the rows marked where. */
SSEG_HIDDEN uint64_t sseg_decl_fingerprint(const struct sseg_decl *d, unsigned where);

/* The first row marked where whose values differ: its field and its name,
 * each value as text; false where none does. */
struct sseg_decl_diff {
	enum sseg_decl_field field;
	const char *name;
	char a[80], b[80];
};
SSEG_HIDDEN bool sseg_decl_differs(const struct sseg_decl *a, const struct sseg_decl *b,
				   unsigned where, struct sseg_decl_diff *diff);

#endif
