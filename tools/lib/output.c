/* SPDX-License-Identifier: Apache-2.0 */
/* A command's output, checked at its end. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "output.h"

/* Output a full disk or a closed stdout refused is a failure, as in
 * coreutils: the command did not do its job (EBADF counts too). errno is
 * the flush's; a write that failed earlier may have left none. */
int cli_output_written(int rc)
{
	int err;

	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return rc;
	err = errno;
	if (err)
		fprintf(stderr, "sharedseg: write error: %s\n", strerror(err));
	else
		fprintf(stderr, "sharedseg: write error\n");
	return rc == CLI_OK ? CLI_FAIL : rc;
}
