/* SPDX-License-Identifier: Apache-2.0 */
/* A listing as JSON (list_json.c); sseg_list_json is the public form. */
#ifndef SSEG_LIST_JSON_H
#define SSEG_LIST_JSON_H

#include "list.h"

/* The document of a scan, as sseg_list_json writes it. */
SSEG_HIDDEN int sseg_list_render(const struct sseg_list *l, char *buf, size_t len);

#endif
