/* SPDX-License-Identifier: Apache-2.0 */
/* The layout differ: it names the first difference between two ranks'
 * layout descriptions, which arrive in blobs from other processes (cut at
 * the blob's limit, or anything at all from a corrupt blob). The input is
 * the two descriptions separated by the first NUL (without one, it is
 * compared with itself), and the last byte, when there is a NUL, bounds
 * the output. Invariants: no crash or undefined behaviour; equal texts do
 * not differ; an answer is 0 or -ENOENT, NUL-ended within its bound. */
#include <string.h>

#include "fuzz.h"
#include "internal.h"
#include "layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *a = (const char *)data, *b = a;
	const uint8_t *nul = memchr(data, 0, size);
	size_t a_len = size, b_len = size, out_len = 512;
	char out[512 + 1];
	int rc;

	if (nul) {
		a_len = (size_t)(nul - data);
		b = (const char *)nul + 1;
		b_len = size - a_len - 1;
		if (b_len) {
			out_len = 1 + data[size - 1] % 512;
			b_len--;
		}
	}
	memset(out, 'x', sizeof(out));
	rc = sseg_layout_diff(a, a_len, "rank 1", b, b_len, "rank 0", out, out_len);
	FUZZ_CHECK(rc == 0 || rc == -ENOENT);
	if (a_len == b_len && !memcmp(a, b, a_len))
		FUZZ_CHECK(rc == -ENOENT);
	if (rc == 0)
		FUZZ_CHECK(memchr(out, 0, out_len) != NULL && out[out_len] == 'x');
	return 0;
}
