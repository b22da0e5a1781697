/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the fuzz targets: reading a structured input a field at a time
 * (a short input reads as zeros, so every input means something), and the
 * check that stops a run with the input that broke an invariant. */
#ifndef SSEG_FUZZ_H
#define SSEG_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fz {
	const uint8_t *p;
	size_t n;
};

static inline uint8_t fz_u8(struct fz *in)
{
	uint8_t v = 0;

	if (in->n) {
		v = *in->p++;
		in->n--;
	}
	return v;
}

static inline uint64_t fz_u64(struct fz *in)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)fz_u8(in) << (8 * i);
	return v;
}

/* A number of any magnitude that small inputs can still reach: a byte
 * picks how many low bits of the next eight bytes are kept. */
static inline uint64_t fz_number(struct fz *in)
{
	unsigned bits = fz_u8(in) % 65;
	uint64_t v = fz_u64(in);

	return bits == 64 ? v : v & ((1ull << bits) - 1);
}

/* Up to max bytes into a NUL-ended string; a length byte comes first. */
static inline char *fz_text(struct fz *in, char *buf, size_t max)
{
	size_t len = fz_u8(in);

	if (len > max - 1)
		len = max - 1;
	if (len > in->n)
		len = in->n;
	memcpy(buf, in->p, len);
	buf[len] = '\0';
	in->p += len;
	in->n -= len;
	return buf;
}

/* An invariant broke: say which and abort, so libFuzzer keeps the input. */
#define FUZZ_CHECK(cond)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__,    \
				__LINE__, #cond);                                     \
			abort();                                                      \
		}                                                                     \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
