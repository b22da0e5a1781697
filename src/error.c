/* SPDX-License-Identifier: Apache-2.0 */
/* The thread-local sentence behind every negative errno the API returns. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "log.h"

static __thread char last_error[SSEG_ERR_MAX];

static void set_message(const char *fmt, va_list ap)
{
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
}

int sseg_err(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_message(fmt, ap);
	va_end(ap);
	sseg_log(SSEG_LOG_DEBUG, "error %d: %s", err, last_error);
	return err;
}

/* Appends text at *used, cutting it at the buffer's end: a truncated
 * sentence keeps its start, which carries the context. */
static void append(size_t *used, const char *text)
{
	size_t n = strnlen(text, sizeof(last_error) - 1 - *used);

	memcpy(last_error + *used, text, n);
	*used += n;
	last_error[*used] = '\0';
}

static void join(const char *outer, const char *inner)
{
	size_t used = 0;

	append(&used, outer);
	append(&used, ": ");
	append(&used, inner);
}

int sseg_err_wrap(int err, const char *fmt, ...)
{
	char inner[SSEG_ERR_MAX];
	char outer[SSEG_ERR_MAX];
	va_list ap;

	memcpy(inner, last_error, sizeof(inner));
	va_start(ap, fmt);
	vsnprintf(outer, sizeof(outer), fmt, ap);
	va_end(ap);
	join(outer, inner[0] ? inner : strerror(-err));
	return err;
}

void sseg_err_clear(void)
{
	last_error[0] = '\0';
}

const char *sseg_last_error(void)
{
	return last_error;
}
