/* SPDX-License-Identifier: Apache-2.0 */
/* Linked into every test program: a test run by hand
 * (`build/tests/test_keeper`, no ctest) finds its build and source
 * directories, compiler and flags as ctest gives them: the ones it was
 * built with, unless the environment names others. */
#include <stdlib.h>

__attribute__((constructor)) static void tu_default_env(void)
{
	setenv("SSEG_BUILD_DIR", SSEG_DEFAULT_BUILD_DIR, 0);
	setenv("SSEG_SOURCE_DIR", SSEG_DEFAULT_SOURCE_DIR, 0);
	setenv("SSEG_CC", SSEG_DEFAULT_CC, 0);
	setenv("SSEG_CFLAGS", SSEG_DEFAULT_CFLAGS, 0);
}
