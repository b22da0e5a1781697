/* SPDX-License-Identifier: Apache-2.0 */
/* The probe's document (probe_doc.c): `sharedseg probe --json` and Python's
 * sharedseg.probe(), written once from the library's structs. */
#ifndef SSEG_PROBE_DOC_H
#define SSEG_PROBE_DOC_H

#include "internal.h"
#include "json.h"

/* Probes for a segment of size bytes (0: none in mind) and writes what it
 * found; 0, or the probe's -errno (nothing written) with the sentence. */
SSEG_HIDDEN int sseg_probe_document(struct sseg_json *j, uint64_t size);

#endif
