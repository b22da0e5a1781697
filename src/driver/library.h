/* SPDX-License-Identifier: Apache-2.0 */
/* Which driver library to dlopen (library.c). */
#ifndef SSEG_DRIVER_LIBRARY_H
#define SSEG_DRIVER_LIBRARY_H

#include "internal.h"

/* The library named by the environment variable env (SHAREDSEG_..., read
 * through sseg_env: the tests' fake drivers), honoured only when the real and effective user and group ids
 * agree, so that a set-id program cannot be made to load one; else
 * fallback. */
SSEG_HIDDEN const char *sseg_driver_path(const char *env, const char *fallback);

#endif
