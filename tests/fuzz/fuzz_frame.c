/* SPDX-License-Identifier: Apache-2.0 */
/* The one frame (src/frame.c), read as every conversation of the library
 * reads it: from a socket (sseg_frame_recv, an fd channel's fd slot asked
 * for) and from an all-gathered record (sseg_frame_from_record).
 *
 * Input: a byte naming the kind the reader expects, then the bytes the
 * other side sent (or the record).
 * Invariants: no crash or undefined behaviour; a frame accepted is of the
 * kind expected, its code 0 or a negative errno, its body within the kind's
 * bound and the reader's room; a failure's sentence is NUL-ended; a refusal
 * comes with a sentence; no descriptor is left open. */
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "fuzz.h"
#include "testutil.h"

#define ROOM 512

static void from_socket(uint32_t kind, const uint8_t *data, size_t size)
{
	struct sseg_frame f;
	uint8_t body[ROOM + 1];
	int sv[2], fd, rc;

	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	if (size)
		FUZZ_CHECK(write(sv[0], data, size < 65536 ? size : 65536) > 0);
	shutdown(sv[0], SHUT_WR);
	rc = sseg_frame_recv(sv[1], kind, &f, body, ROOM, &fd, sseg_now() + 1.0);
	if (rc) {
		FUZZ_CHECK(rc < 0 && sseg_last_error()[0]);
		FUZZ_CHECK(fd == -1);
	} else {
		FUZZ_CHECK(f.kind == kind && f.code <= 0 && f.code > -4096);
		FUZZ_CHECK(f.len <= ROOM && f.len <= sseg_frame_max(kind));
		if (fd >= 0)
			close(fd);
		if (f.code)
			FUZZ_CHECK(sseg_frame_failure(&f, (const char *)body, "peer") == f.code &&
				   strlen(sseg_last_error()) < SSEG_ERR_MAX);
	}
	close(sv[0]);
	close(sv[1]);
}

static void from_record(uint32_t kind, const uint8_t *data, size_t size)
{
	uint8_t rec[SSEG_FRAME_HEAD + ROOM];
	const uint8_t *body;
	struct sseg_frame f;

	memset(rec, 0, sizeof(rec));
	memcpy(rec, data, size < sizeof(rec) ? size : sizeof(rec));
	if (!sseg_frame_from_record(rec, sizeof(rec), kind, &f, &body))
		FUZZ_CHECK(f.kind == kind && f.len <= ROOM && body == rec + SSEG_FRAME_HEAD);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t kind = size ? data[0] % (SSEG_FRAME_KINDS + 1) : 0;
	int fds = tu_count_fds();

	sseg_set_log_level(SSEG_LOG_OFF);
	from_socket(kind, data + !!size, size - !!size);
	from_record(kind, data + !!size, size - !!size);
	FUZZ_CHECK(tu_count_fds() == fds);
	return 0;
}
