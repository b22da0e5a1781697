/* SPDX-License-Identifier: Apache-2.0 */
/* The option parsers the CLI and the Python package feed with user text:
 * sizes, pages, NUMA placements, backends, population modes. The input is
 * the text (NUL-ended at its first NUL). Invariants: no crash or undefined
 * behaviour; a refusal has a sentence and writes nothing; what is accepted
 * reads back the same through the canonical names; a size is exact. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "internal.h"

static void check_size(const char *text)
{
	uint64_t bytes = 0x5a5a5a5a5a5a5a5aull, again = 0;
	char printed[32];
	int rc;

	sseg_err_clear();
	rc = sseg_parse_size(text, &bytes);
	if (rc) {
		FUZZ_CHECK(rc == -EINVAL || rc == -EOVERFLOW);
		FUZZ_CHECK(bytes == 0x5a5a5a5a5a5a5a5aull && sseg_last_error()[0]);
		return;
	}
	/* Digits alone are bytes, as strtoull reads them. */
	if (strspn(text, "0123456789") == strlen(text))
		FUZZ_CHECK(bytes == strtoull(text, NULL, 10));
	snprintf(printed, sizeof(printed), "%" PRIu64, bytes);
	FUZZ_CHECK(sseg_parse_size(printed, &again) == 0 && again == bytes);
}

static void check_names(const char *text)
{
	enum sseg_pages pages = SSEG_PAGES_AUTO, pages2 = SSEG_PAGES_AUTO;
	enum sseg_populate pop = SSEG_POPULATE_OWNER, pop2 = SSEG_POPULATE_OWNER;
	enum sseg_backend backend = SSEG_BACKEND_AUTO, backend2 = SSEG_BACKEND_AUTO;

	if (!sseg_parse_pages(text, &pages)) {
		FUZZ_CHECK(!sseg_parse_pages(sseg_pages_name(pages), &pages2) && pages2 == pages);
	} else {
		FUZZ_CHECK(sseg_last_error()[0]);
	}
	if (!sseg_parse_populate(text, &pop)) {
		FUZZ_CHECK(!sseg_parse_populate(sseg_populate_name(pop), &pop2) && pop2 == pop);
	} else {
		FUZZ_CHECK(sseg_last_error()[0]);
	}
	if (!sseg_parse_backend(text, &backend)) {
		FUZZ_CHECK(!sseg_parse_backend(sseg_backend_name(backend), &backend2) &&
			   backend2 == backend);
	} else {
		FUZZ_CHECK(sseg_last_error()[0]);
	}
}

static void check_numa(const char *text)
{
	enum sseg_numa numa = SSEG_NUMA_NONE, numa2 = SSEG_NUMA_NONE;
	int node = -7, node2 = -7;
	char name[16];

	if (sseg_parse_numa(text, &numa, &node)) {
		FUZZ_CHECK(numa == SSEG_NUMA_NONE && node == -7 && sseg_last_error()[0]);
		return;
	}
	if (numa == SSEG_NUMA_NODE) {
		FUZZ_CHECK(node >= 0 && node <= 63);
		snprintf(name, sizeof(name), "%d", node);
	} else {
		FUZZ_CHECK(node == -1);
		snprintf(name, sizeof(name), "%s", sseg_numa_name(numa));
	}
	FUZZ_CHECK(!sseg_parse_numa(name, &numa2, &node2) && numa2 == numa && node2 == node);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[256];
	size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;

	memcpy(text, data, n);
	text[n] = '\0';
	check_size(text);
	check_names(text);
	check_numa(text);
	return 0;
}
