/* SPDX-License-Identifier: Apache-2.0 */
/* Names of the option values and their parsers, shared by the CLI and the
 * Python package so that both accept exactly the same words. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/backend.h"

struct name_value {
	const char *name;
	int value;
};

/* "hugetlb" alone means 2 MiB pages, the size every x86 and arm64 kernel has. */
static const struct name_value pages[] = {
	{ "auto", SSEG_PAGES_AUTO },	     { "base", SSEG_PAGES_BASE },
	{ "thp", SSEG_PAGES_THP },	     { "hugetlb-2M", SSEG_PAGES_HUGETLB_2M },
	{ "hugetlb-1G", SSEG_PAGES_HUGETLB_1G }, { "hugetlb", SSEG_PAGES_HUGETLB_2M },
};

static const struct name_value numas[] = {
	{ "none", SSEG_NUMA_NONE },
	{ "node", SSEG_NUMA_NODE },
	{ "interleave", SSEG_NUMA_INTERLEAVE },
	{ "device-local", SSEG_NUMA_DEVICE_LOCAL },
};

static const struct name_value populates[] = {
	{ "owner", SSEG_POPULATE_OWNER },
	{ "spread", SSEG_POPULATE_SPREAD },
	{ "lazy", SSEG_POPULATE_LAZY },
	{ "background", SSEG_POPULATE_BACKGROUND },
};

/* The first name listed for value: the canonical one. */
static const char *name_of(const struct name_value *table, size_t n, int value)
{
	for (size_t i = 0; i < n; i++)
		if (table[i].value == value)
			return table[i].name;
	return "unknown";
}

/* Case-insensitive lookup; unknown text names every accepted word. */
static int parse_name(const struct name_value *table, size_t n, const char *what,
		      const char *text, int *value)
{
	char accepted[160] = "";

	for (size_t i = 0; text && i < n; i++) {
		if (!strcasecmp(text, table[i].name)) {
			*value = table[i].value;
			return 0;
		}
	}
	for (size_t i = 0; i < n; i++) {
		strcat(accepted, table[i].name);
		strcat(accepted, i + 2 < n ? ", " : i + 1 < n ? " or " : "");
	}
	return sseg_err(-EINVAL, "unknown %s '%s': expected %s", what, text ? text : "(null)",
			accepted);
}

/* Backend names are the backend table's. */
const char *sseg_backend_name(enum sseg_backend backend)
{
	const struct sseg_backend_ops *ops = sseg_backend_get(backend);

	if (backend == SSEG_BACKEND_AUTO)
		return "auto";
	return ops ? ops->name : "unknown";
}

const char *sseg_pages_name(enum sseg_pages p)
{
	return name_of(pages, ARRAY_SIZE(pages), (int)p);
}

const char *sseg_numa_name(enum sseg_numa numa)
{
	return name_of(numas, ARRAY_SIZE(numas), (int)numa);
}

const char *sseg_populate_name(enum sseg_populate populate)
{
	return name_of(populates, ARRAY_SIZE(populates), (int)populate);
}

int sseg_parse_backend(const char *text, enum sseg_backend *backend)
{
	struct name_value names[16] = { { "auto", SSEG_BACKEND_AUTO } };
	size_t n = 1;
	int v = 0, rc;

	for (int i = 0; n < ARRAY_SIZE(names); i++) {
		const struct sseg_backend_ops *ops = sseg_backend_nth(i);

		if (!ops)
			break;
		names[n++] = (struct name_value){ ops->name, (int)ops->kind };
	}
	rc = parse_name(names, n, "backend", text, &v);
	if (!rc)
		*backend = (enum sseg_backend)v;
	return rc;
}

int sseg_parse_pages(const char *text, enum sseg_pages *p)
{
	int v = 0, rc = parse_name(pages, ARRAY_SIZE(pages), "pages", text, &v);

	if (!rc)
		*p = (enum sseg_pages)v;
	return rc;
}

int sseg_parse_populate(const char *text, enum sseg_populate *populate)
{
	int v = 0, rc = parse_name(populates, ARRAY_SIZE(populates), "populate", text, &v);

	if (!rc)
		*populate = (enum sseg_populate)v;
	return rc;
}

/* ---- numbers ---- */

/* Decimal digits only, at most max; -1 when text is not such a number. */
static long long parse_decimal(const char *text, long long max)
{
	long long v = 0;

	if (!*text)
		return -1;
	for (const char *p = text; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
		if (v > max)
			return -1;
	}
	return v;
}

int sseg_parse_numa(const char *text, enum sseg_numa *numa, int *node)
{
	long long n;

	if (text && (n = parse_decimal(text, 63)) >= 0) {
		*numa = SSEG_NUMA_NODE;
		if (node)
			*node = (int)n;
		return 0;
	}
	if (text && (!strcasecmp(text, "none") || !strcasecmp(text, "interleave") ||
		     !strcasecmp(text, "device-local"))) {
		int v = 0;

		parse_name(numas, ARRAY_SIZE(numas), "numa", text, &v);
		*numa = (enum sseg_numa)v;
		if (node)
			*node = -1;
		return 0;
	}
	return sseg_err(-EINVAL,
			"unknown numa '%s': expected none, interleave, device-local or a node number 0..63",
			text ? text : "(null)");
}

/* The multiplier a unit suffix stands for ("", "K", "KiB", "M", ...); 0 when
 * the suffix is not one. */
/* Blanks around the number and the unit are no part of either: sizes are
 * printed "256.0 MiB" and pasted with what surrounds them. */
#define BLANKS " \t"

static bool is_word(const char *s, size_t n, const char *word)
{
	return n == strlen(word) && !strncasecmp(s, word, n);
}

static uint64_t unit_multiplier(const char *unit)
{
	static const char letters[] = "KMGTPE";
	const char *at;
	uint64_t mult = 1;
	size_t n;

	unit += strspn(unit, BLANKS);
	n = strcspn(unit, BLANKS);
	if (unit[n + strspn(unit + n, BLANKS)])
		return 0; /* something after the unit */
	if (!n || is_word(unit, n, "B"))
		return 1;
	at = strchr(letters, toupper((unsigned char)*unit));
	if (!at || !(n == 1 || is_word(unit + 1, n - 1, "iB") || is_word(unit + 1, n - 1, "B")))
		return 0;
	for (const char *l = letters; l <= at; l++)
		mult *= 1024;
	return mult;
}

struct size_text {
	uint64_t whole;     /* digits before the point */
	uint64_t frac;      /* digits after it, trailing zeros dropped */
	uint64_t frac_div;  /* 10^(digits kept after the point) */
	const char *unit;   /* where the suffix starts */
};

static int split_number(const char *text, struct size_text *st)
{
	const char *p = text;

	st->whole = 0;
	st->frac = 0;
	st->frac_div = 1;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++)
		if (__builtin_mul_overflow(st->whole, 10, &st->whole) ||
		    __builtin_add_overflow(st->whole, (uint64_t)(*p - '0'), &st->whole))
			return -EOVERFLOW;
	if (*p == '.') {
		if (*++p < '0' || *p > '9')
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (st->frac_div >= 1000000000000000000ull)
				return -EINVAL; /* more than 18 digits after the point */
			st->frac = st->frac * 10 + (uint64_t)(*p - '0');
			st->frac_div *= 10;
		}
		while (st->frac_div > 1 && st->frac % 10 == 0) {
			st->frac /= 10;
			st->frac_div /= 10;
		}
	}
	st->unit = p;
	return 0;
}

int sseg_parse_size(const char *text, uint64_t *bytes)
{
	struct size_text st;
	unsigned __int128 frac_bytes;
	uint64_t mult, total;
	int rc;

	if (!text || !text[strspn(text, BLANKS)])
		return sseg_err(-EINVAL, "empty size: expected a number of bytes such as 4096 or 256MiB");
	if (text[strspn(text, BLANKS)] == '-')
		return sseg_err(-EINVAL, "size '%s' is negative", text);
	rc = split_number(text + strspn(text, BLANKS), &st);
	if (rc == -EOVERFLOW)
		return sseg_err(-EOVERFLOW, "size '%s' is larger than 2^64 - 1 bytes", text);
	mult = rc ? 0 : unit_multiplier(st.unit);
	if (!mult)
		return sseg_err(-EINVAL,
				"size '%s' is not a number with an optional unit (K, M, G, T, P, E, with or without iB)",
				text);
	frac_bytes = (unsigned __int128)st.frac * mult;
	if (frac_bytes % st.frac_div)
		return sseg_err(-EINVAL, "size '%s' is not a whole number of bytes", text);
	if (__builtin_mul_overflow(st.whole, mult, &total) ||
	    __builtin_add_overflow(total, (uint64_t)(frac_bytes / st.frac_div), &total))
		return sseg_err(-EOVERFLOW, "size '%s' is larger than 2^64 - 1 bytes", text);
	*bytes = total;
	return 0;
}
