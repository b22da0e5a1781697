/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "util.h"

double sseg_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t sseg_hash64(const void *data, size_t len, uint64_t seed)
{
	const uint8_t *p = data;
	uint64_t h = 0xcbf29ce484222325ull ^ seed;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

bool sseg_is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int sseg_round_up(uint64_t v, uint64_t align, uint64_t *out)
{
	uint64_t r;

	if (!align)
		return -EINVAL;
	r = v % align;
	if (!r) {
		*out = v;
		return 0;
	}
	if (v > UINT64_MAX - (align - r))
		return -EOVERFLOW;
	*out = v + (align - r);
	return 0;
}

/* "2 MiB" when exact, else one decimal of the largest unit: "22.4 GiB". */
void sseg_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	size_t u = 0;
	uint64_t v = bytes;
	double d = (double)bytes;

	while (u + 1 < ARRAY_SIZE(units) && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (v < 1024) {
		snprintf(buf, len, "%llu %s", (unsigned long long)v, units[u]);
		return;
	}
	for (u = 0; u + 1 < ARRAY_SIZE(units) && d >= 1024; u++)
		d /= 1024;
	snprintf(buf, len, "%.1f %s", d, units[u]);
}
