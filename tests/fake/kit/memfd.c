/* SPDX-License-Identifier: Apache-2.0 */
/* Nonces and another process's memfd. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/random.h>
#include <unistd.h>

#include "memfd.h"

uint64_t fk_nonce(void)
{
	static uint64_t counter;
	uint64_t nonce = 0;

	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce) || nonce == 0)
		nonce = ((uint64_t)getpid() << 32) ^ ++counter;
	return nonce;
}

int fk_open_exported(uint32_t pid, int fd)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%u/fd/%d", pid, fd);
	return open(path, O_RDWR | O_CLOEXEC);
}
