/* SPDX-License-Identifier: Apache-2.0 */
/* Which driver library to dlopen. */
#include <stdlib.h>
#include <unistd.h>

#include "driver/library.h"

const char *sseg_driver_path(const char *env, const char *fallback)
{
	const char *named = getenv(env);

	if (named && *named && getuid() == geteuid() && getgid() == getegid())
		return named;
	return fallback;
}
