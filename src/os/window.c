/* SPDX-License-Identifier: Apache-2.0 */
/* Address windows: a peer reserves the segment's span before it knows the
 * owner's fd, so that mapping later cannot fail for lack of address space,
 * and aligns it so that 2 MiB / 1 GiB pages can be mapped with PMD/PUD. */
#define _GNU_SOURCE /* Linux interfaces beyond POSIX */
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "os/host.h"
#include "os/window.h"

int sseg_os_window_reserve(uint64_t size, uint64_t align, void **base)
{
	uintptr_t start, aligned;
	uint64_t span;
	void *raw;

	if (size == 0 || !sseg_is_pow2(align))
		return sseg_err(-EINVAL, "cannot reserve %" PRIu64 " bytes aligned to %" PRIu64
				": size must be > 0 and the alignment a power of two", size, align);
	if (align < sseg_os_base_page_size())
		align = sseg_os_base_page_size();
	if (size > UINT64_MAX - align || size % sseg_os_base_page_size())
		return sseg_err(-EINVAL, "cannot reserve %" PRIu64 " bytes: not a multiple of "
				"the page size or too large", size);
	/* Over-reserve by align, then trim: mmap has no alignment argument. */
	span = size + align;
	raw = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (raw == MAP_FAILED)
		return sseg_err(-errno, "cannot reserve %" PRIu64 " bytes of address space: %s",
				span, strerror(errno));
	start = (uintptr_t)raw;
	aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
	if (aligned > start)
		munmap(raw, aligned - start);
	if (start + span > aligned + size)
		munmap((void *)(aligned + size), start + span - (aligned + size));
	*base = (void *)aligned;
	return 0;
}

int sseg_os_window_map(void *base, uint64_t size, int fd, bool readonly)
{
	int prot = PROT_READ | (readonly ? 0 : PROT_WRITE);
	int rc = sseg_fault("window_map");
	void *addr;

	if (rc)
		return sseg_err(rc, "cannot map %" PRIu64 " bytes of the segment at %p: injected "
				"fault", size, base);
	addr = mmap(base, size, prot, MAP_SHARED | MAP_FIXED, fd, 0);
	if (addr == MAP_FAILED && errno == EPERM && !readonly)
		return sseg_err(-EPERM, "cannot map %" PRIu64 " bytes of the segment writable: the "
				"memfd is sealed against writing (F_SEAL_WRITE or F_SEAL_FUTURE_WRITE); "
				"map it read-only", size);
	if (addr == MAP_FAILED)
		return sseg_err(-errno, "cannot map %" PRIu64 " bytes of the segment at %p: %s",
				size, base, strerror(errno));
	return 0;
}

int sseg_os_window_release(void *base, uint64_t size)
{
	int rc = sseg_fault("munmap");

	if (rc)
		return sseg_err(rc, "munmap of %" PRIu64 " bytes at %p failed: injected fault",
				size, base);
	if (munmap(base, size))
		return sseg_err(-errno, "munmap of %" PRIu64 " bytes at %p failed: %s", size,
				base, strerror(errno));
	return 0;
}

int sseg_os_window_tag(void *addr, uint64_t len, const char *tag)
{
	int fd = memfd_create(tag, MFD_CLOEXEC);
	void *at;

	if (fd < 0)
		return -errno;
	at = mmap(addr, len, PROT_NONE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, fd, 0);
	close(fd);
	return at == MAP_FAILED ? -errno : 0;
}

int sseg_os_tag_page(const char *tag, void **at)
{
	uint64_t page = sseg_os_base_page_size();
	void *p = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	int rc;

	if (p == MAP_FAILED)
		return -errno;
	rc = sseg_os_window_tag(p, page, tag);
	if (!rc && madvise(p, (size_t)page, MADV_DONTFORK))
		rc = -errno;
	if (rc) {
		munmap(p, (size_t)page);
		return rc;
	}
	*at = p;
	return 0;
}

void sseg_os_untag_page(void *at)
{
	if (at)
		munmap(at, (size_t)sseg_os_base_page_size());
}
