/* SPDX-License-Identifier: Apache-2.0 */
/* Option scanning and value parsing for the subcommands. Values are parsed
 * by the library (sseg_parse_*), so the CLI, the Python package and the C
 * API accept the same spellings; this file only words the errors. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"

/* How many bytes the UTF-8 sequence at p takes, when it is well formed and
 * no control (C1 included); 0 otherwise. Sets *cp to its code point. */
static int printable_utf8(const unsigned char *p, unsigned *cp)
{
	static const unsigned least[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	int len = 0;

	while (len < 5 && (p[0] << len & 0x80))
		len++; /* the lead byte's leading ones */
	len = len == 0 ? 1 : len == 1 || len > 4 ? 0 : len;
	*cp = len == 1 ? p[0] : p[0] & (0x7fu >> len);
	for (int i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (p[i] & 0x3f);
	}
	if (!len || *cp < 0x20 || (*cp >= 0x7f && *cp < 0xa0) || *cp < least[len] ||
	    *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
		return 0;
	return len;
}

/* Characters that reorder or break the line a terminal shows. */
static bool bidi_control(unsigned cp)
{
	return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

const char *cli_visible(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p && n + 7 < len;) {
		unsigned cp;
		int seq = printable_utf8(p, &cp);

		if (!seq)
			n += (size_t)snprintf(buf + n, len - n, "\\x%02x", *p++);
		else if (bidi_control(cp))
			n += (size_t)snprintf(buf + n, len - n, "\\u%04x", cp);
		else if (cp == '\\')
			n += (size_t)snprintf(buf + n, len - n, "\\\\");
		else
			n += (size_t)snprintf(buf + n, len - n, "%.*s", seq, (const char *)p);
		p += seq;
	}
	buf[n] = '\0';
	return buf;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sharedseg%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CLI_USAGE;
}

static const struct cli_opt *find_opt(const struct cli_opt *opts, const char *name, size_t len)
{
	for (; opts->name; opts++)
		if (strlen(opts->name) == len && !strncmp(opts->name, name, len))
			return opts;
	return NULL;
}

int cli_next(struct cli_args *a, const struct cli_opt *opts, const char **value)
{
	char shown[CLI_SHOWN], name[CLI_SHOWN / 4];
	const struct cli_opt *o;
	const char *arg, *eq;
	size_t len;

	*value = NULL;
	if (a->next >= a->argc)
		return CLI_OPT_END;
	arg = a->argv[a->next++];
	if (!strcmp(arg, "-h") || !strcmp(arg, "--help"))
		return CLI_OPT_HELP;
	if (strncmp(arg, "--", 2) || !arg[2]) {
		cli_usage_error(a->cmd, "unexpected argument '%s' (see sharedseg %s --help)",
				cli_visible(arg, shown, sizeof(shown)), a->cmd);
		return CLI_OPT_BAD;
	}
	eq = strchr(arg + 2, '=');
	len = eq ? (size_t)(eq - (arg + 2)) : strlen(arg + 2);
	o = find_opt(opts, arg + 2, len);
	if (!o) {
		snprintf(name, sizeof(name), "%.*s", (int)len + 2, arg);
		cli_usage_error(a->cmd, "unknown option '%s' (see sharedseg %s --help)",
				cli_visible(name, shown, sizeof(shown)), a->cmd);
		return CLI_OPT_BAD;
	}
	if (!o->has_value) {
		if (eq) {
			cli_usage_error(a->cmd, "--%s takes no value", o->name);
			return CLI_OPT_BAD;
		}
		return o->id;
	}
	if (eq) {
		*value = eq + 1;
	} else if (a->next < a->argc) {
		*value = a->argv[a->next++];
	} else {
		cli_usage_error(a->cmd, "--%s needs a value", o->name);
		return CLI_OPT_BAD;
	}
	return o->id;
}

int cli_parse_size(const char *cmd, const char *opt, const char *text, uint64_t *bytes)
{
	char shown[CLI_SHOWN];

	if (sseg_parse_size(text, bytes) || *bytes == 0)
		return cli_usage_error(cmd, "%s: '%s' is not a size (use 4096, 256MiB, 4G)", opt,
				       cli_visible(text, shown, sizeof(shown)));
	return 0;
}

int cli_parse_int(const char *cmd, const char *opt, const char *text, int min, int max,
		  int *value)
{
	char *end, shown[CLI_SHOWN];
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || end == text || *end || v < min || v > max)
		return cli_usage_error(cmd, "%s: '%s' is not a whole number from %d to %d", opt,
				       cli_visible(text, shown, sizeof(shown)), min, max);
	*value = (int)v;
	return 0;
}

/* rc of a library parser; on failure one line saying what would do. */
static int choice(int rc, const char *cmd, const char *opt, const char *text, const char *what,
		  const char *choices)
{
	char shown[CLI_SHOWN];

	if (rc)
		return cli_usage_error(cmd, "%s: '%s' is not %s (use %s)", opt,
				       cli_visible(text, shown, sizeof(shown)), what, choices);
	return 0;
}

static const char *nth_name(enum cli_names kind, int value)
{
	switch (kind) {
	case CLI_PAGES:
		return sseg_pages_name((enum sseg_pages)value);
	case CLI_BACKENDS:
	case CLI_DEVICE_BACKENDS:
		return sseg_backend_name((enum sseg_backend)value);
	case CLI_POPULATES:
		return sseg_populate_name((enum sseg_populate)value);
	}
	return "unknown";
}

const char *cli_names(enum cli_names kind)
{
	static char lists[CLI_POPULATES + 1][160];
	char *out = lists[kind];
	size_t n = 0;

	if (out[0])
		return out;
	/* The backends' names from the first after auto: the ones a probe lists. */
	for (int v = kind == CLI_DEVICE_BACKENDS ? 1 : 0; v < 64; v++) {
		const char *name = nth_name(kind, v);

		if (!strcmp(name, "unknown"))
			break;
		n += (size_t)snprintf(out + n, sizeof(lists[0]) - n, "%s%s", n ? ", " : "", name);
		if (n >= sizeof(lists[0]))
			break;
	}
	return out;
}

int cli_parse_pages(const char *cmd, const char *opt, const char *text, enum sseg_pages *pages)
{
	return choice(sseg_parse_pages(text, pages), cmd, opt, text, "a page kind",
		      cli_names(CLI_PAGES));
}

int cli_parse_backend(const char *cmd, const char *text, enum sseg_backend *backend)
{
	return choice(sseg_parse_backend(text, backend), cmd, "--backend", text, "a backend",
		      cli_names(CLI_BACKENDS));
}

int cli_parse_populate(const char *cmd, const char *opt, const char *text,
		       enum sseg_populate *populate)
{
	return choice(sseg_parse_populate(text, populate), cmd, opt, text, "a population mode",
		      cli_names(CLI_POPULATES));
}

int cli_parse_numa(const char *cmd, const char *opt, const char *text, enum sseg_numa *numa,
		   int *node)
{
	return choice(sseg_parse_numa(text, numa, node), cmd, opt, text, "a placement",
		      "none, interleave, device-local or a node number");
}

void cli_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return;
	}
	while (v >= 1024.0 && u < 4) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, units[u]);
}

double cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
