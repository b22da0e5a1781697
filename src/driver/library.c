/* SPDX-License-Identifier: Apache-2.0 */
/* Which driver library to dlopen. */
#include <unistd.h>

#include "driver/library.h"

const char *sseg_driver_path(const char *env, const char *fallback)
{
	const char *named = sseg_env(env);

	if (named && *named && getuid() == geteuid() && getgid() == getegid())
		return named;
	return fallback;
}
