/* SPDX-License-Identifier: Apache-2.0 */
/* The OS primitives against the real kernel: memfd seals, windows, fd
 * passing between processes, THP and HugeTLB as measured in smaps,
 * population, NUMA placement, host facts. Changes the THP knobs and the
 * HugeTLB pool (restored at exit), so it runs serially. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os/file.h"
#include "os/host.h"
#include "os/memory.h"
#include "os/hugepage.h"
#include "os/memfd.h"
#include "os/numa.h"
#include "os/populate.h"
#include "os/sock.h"
#include "os/window.h"
#include "testutil.h"

#define MiB (1ull << 20)
#define THP_GLOBAL "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
#define THP_PER2M "/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled"

/* A memfd of size bytes mapped read-write at a 2 MiB-aligned address. */
static uint8_t *map_new(uint64_t size, uint64_t hugetlb, int *fd_out)
{
	void *base;
	int fd;

	CHECK_RC(sseg_os_memfd_create("test", size, hugetlb, &fd), 0);
	CHECK_RC(sseg_os_window_reserve(size, SSEG_2M, &base), 0);
	CHECK_RC(sseg_os_window_map(base, size, fd, false), 0);
	CHECK_RC(sseg_os_memfd_seal(fd, false), 0);
	if (fd_out)
		*fd_out = fd;
	else
		close(fd);
	return base;
}

static void test_memfd(void)
{
	uint64_t page;
	int fd, raw;
	char path[] = "/tmp/sseg-test-XXXXXX";

	CHECK_RC(sseg_os_memfd_create("test", 8 * MiB, 0, &fd), 0);
	/* Not yet sealed for good: a peer would refuse it. */
	CHECK_RC(sseg_os_memfd_check(fd, 8 * MiB, &page), -EPERM);
	CHECK_RC(sseg_os_memfd_seal(fd, false), 0);
	CHECK_RC(sseg_os_memfd_check(fd, 8 * MiB, &page), 0);
	CHECK(page == sseg_os_base_page_size());
	CHECK(ftruncate(fd, 4 * MiB) < 0 && errno == EPERM); /* sealed */
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	CHECK_RC(sseg_os_memfd_check(fd, 4 * MiB, &page), -EINVAL);
	CHECK_ERR_HAS("received fd has 8388608 bytes, expected 4194304");
	close(fd);

	raw = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CHECK(raw >= 0 && ftruncate(raw, MiB) == 0 && fcntl(raw, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
	CHECK_RC(sseg_os_memfd_check(raw, MiB, &page), -EPERM);
	CHECK_ERR_HAS("missing seals F_SEAL_GROW F_SEAL_SEAL");
	close(raw);

	raw = mkstemp(path);
	CHECK(raw >= 0 && ftruncate(raw, MiB) == 0);
	unlink(path);
	CHECK(sseg_os_memfd_check(raw, MiB, &page) == -EBADF);
	CHECK_ERR_HAS("not a memfd");
	close(raw);
	raw = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (raw >= 0) { /* a tmpfs file that is no memfd: it has no seals */
		CHECK(ftruncate(raw, MiB) == 0);
		CHECK_RC(sseg_os_memfd_check(raw, MiB, &page), -EPERM);
		CHECK_ERR_HAS("missing seals F_SEAL_SHRINK F_SEAL_GROW");
		close(raw);
	}

	sseg_test_fault("memfd_create", 0, 1, -EMFILE);
	CHECK_RC(sseg_os_memfd_create("test", MiB, 0, &fd), -EMFILE);
	sseg_test_fault(NULL, 0, 0, 0);
	CHECK_RC(sseg_os_memfd_create("test", MiB, 3 * MiB, &fd), -EINVAL);
}

static void test_window(void)
{
	uint64_t sizes[] = { 8 * MiB, 2 * SSEG_1G };
	uint64_t aligns[] = { SSEG_2M, SSEG_1G };
	void *base;
	uint8_t *p;
	int fd;

	for (int i = 0; i < 2; i++) {
		CHECK_RC(sseg_os_window_reserve(sizes[i], aligns[i], &base), 0);
		CHECK(((uintptr_t)base & (aligns[i] - 1)) == 0);
		/* Exactly the window stays: the trimmed head and tail are free. */
		CHECK(mmap((uint8_t *)base + sizes[i], 4096, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != MAP_FAILED ||
		      errno != EEXIST);
		munmap((uint8_t *)base + sizes[i], 4096);
		CHECK_RC(sseg_os_window_release(base, sizes[i]), 0);
	}
	CHECK_RC(sseg_os_window_reserve(MiB, 3 * MiB, &base), -EINVAL);

	p = map_new(4 * MiB, 0, &fd);
	p[4 * MiB - 1] = 0x5a;
	CHECK_RC(sseg_os_window_reserve(4 * MiB, SSEG_2M, &base), 0);
	CHECK_RC(sseg_os_window_map(base, 4 * MiB, fd, true), 0);
	CHECK(((uint8_t *)base)[4 * MiB - 1] == 0x5a); /* one object, two views */
	CHECK_RC(sseg_os_window_release(base, 4 * MiB), 0);
	close(fd);
	sseg_test_fault("munmap", 0, 1, -EIO);
	CHECK_RC(sseg_os_window_release(p, 4 * MiB), -EIO);
	CHECK(p[4 * MiB - 1] == 0x5a); /* a failed release leaves the mapping */
	CHECK_RC(sseg_os_window_release(p, 4 * MiB), 0);
	sseg_test_fault(NULL, 0, 0, 0);
}

static int peer_side(void *arg)
{
	const char *name = arg;
	uint64_t page;
	char data[5];
	int sock, fd;
	void *base;

	CHECK_RC(sseg_os_connect_abstract(name, &sock), 0);
	CHECK_RC(sseg_os_recv_fd(sock, &fd, data, sizeof(data), sseg_os_deadline(5000)), 0);
	CHECK(memcmp(data, "owner", 5) == 0);
	CHECK_RC(sseg_os_memfd_check(fd, 8 * MiB, &page), 0);
	CHECK_RC(sseg_os_window_reserve(8 * MiB, SSEG_2M, &base), 0);
	CHECK_RC(sseg_os_window_map(base, 8 * MiB, fd, false), 0);
	close(fd);
	for (uint64_t off = 0; off < 8 * MiB; off += 4093)
		CHECK(((uint8_t *)base)[off] == tu_pattern(0, off));
	((uint8_t *)base)[0] = 0xee;
	/* Data without an fd must be refused, not mistaken for one. */
	CHECK_RC(sseg_os_recv_fd(sock, &fd, data, sizeof(data), sseg_os_deadline(5000)), -EPROTO);
	CHECK_RC(sseg_os_send_all(sock, "done", 4, sseg_os_deadline(5000)), 0);
	close(sock);
	return 0;
}

static void test_fd_passing(void)
{
	char name[64], reply[4];
	uid_t uid;
	int lsock, sock, fd;
	uint8_t *p;
	pid_t pid;

	tu_name(name, sizeof(name), "sseg-test-os");
	CHECK_RC(sseg_os_connect_abstract(name, &sock), -ECONNREFUSED);
	CHECK_RC(sseg_os_listen_abstract(name, 4, &lsock), 0);
	CHECK_RC(sseg_os_listen_abstract(name, 4, &sock), -EADDRINUSE);
	p = map_new(8 * MiB, 0, &fd);
	for (uint64_t off = 0; off < 8 * MiB; off += 4093)
		p[off] = tu_pattern(0, off);
	pid = tu_fork(peer_side, name);
	CHECK_RC(sseg_os_accept(lsock, sseg_os_deadline(5000), &sock), 0);
	CHECK_RC(sseg_os_peer_cred(sock, NULL, &uid), 0);
	CHECK(uid == getuid());
	CHECK_RC(sseg_os_send_fd(sock, fd, "owner", 5, sseg_os_deadline(5000)), 0);
	CHECK_RC(sseg_os_send_all(sock, "plain", 5, sseg_os_deadline(5000)), 0);
	CHECK_RC(sseg_os_recv_all(sock, reply, 4, sseg_os_deadline(5000)), 0);
	CHECK(memcmp(reply, "done", 4) == 0);
	CHECK(tu_wait(pid, 10000) == 0);
	CHECK(p[0] == 0xee); /* the peer wrote into the same pages */
	CHECK_RC(sseg_os_recv_all(sock, reply, 1, sseg_os_deadline(1000)), -ECONNRESET);
	CHECK_RC(sseg_os_send_all(sock, reply, 1, sseg_os_deadline(1000)), -EPIPE); /* not SIGPIPE */
	CHECK_RC(sseg_os_accept(lsock, sseg_os_deadline(50), &fd), -ETIMEDOUT);
	close(sock);
	close(lsock);
	close(fd);
	sseg_os_window_release(p, 8 * MiB);
}

static int open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static void test_socket_edges(void)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} control = { { 0 } };
	int pair[2], fds[2], got, before;
	struct iovec iov = { .iov_base = "x", .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
	double t0;
	char c;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
	t0 = sseg_now();
	CHECK_RC(sseg_os_recv_all(pair[0], &c, 1, sseg_os_deadline(100)), -ETIMEDOUT);
	CHECK(sseg_now() - t0 >= 0.09);
	CHECK_RC(sseg_os_recv_fd(pair[0], &got, &c, 1, sseg_os_deadline(50)), -ETIMEDOUT);

	/* Two fds in one message: one is taken, the other closed. */
	CHECK(pipe2(fds, O_CLOEXEC) == 0);
	before = open_fds();
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(2 * sizeof(int));
	memcpy(CMSG_DATA(cmsg), fds, sizeof(fds));
	CHECK(sendmsg(pair[1], &msg, 0) == 1);
	CHECK_RC(sseg_os_recv_fd(pair[0], &got, &c, 1, sseg_os_deadline(1000)), 0);
	CHECK(fcntl(got, F_GETFD) & FD_CLOEXEC);
	close(got);
	CHECK(open_fds() == before); /* the second fd was closed, not leaked */
	close(fds[0]);
	close(fds[1]);

	sseg_test_fault("send_fd", 0, 1, -EIO);
	CHECK_RC(sseg_os_send_fd(pair[1], 0, "x", 1, sseg_os_deadline(1000)), -EIO);
	sseg_test_fault("connect", 0, 1, -EAGAIN);
	CHECK_RC(sseg_os_connect_abstract("anything", &got), -EAGAIN);
	sseg_test_fault(NULL, 0, 0, 0);
	close(pair[0]);
	close(pair[1]);
}

static void test_knobs(void)
{
	char value[16], global[16], per2m[16], reason[256];

	CHECK_RC(sseg_os_knob_choice("always within_size advise [never] deny force", value, 16), 0);
	CHECK(strcmp(value, "never") == 0);
	CHECK_RC(sseg_os_knob_choice("always inherit", value, 16), -EINVAL);
	CHECK_RC(sseg_os_knob_choice("[]", value, 16), -EINVAL);

	CHECK(!sseg_os_thp_shmem_allows("never", "", reason, sizeof(reason)));
	CHECK(strstr(reason, THP_GLOBAL " is [never]: echo advise > " THP_GLOBAL));
	CHECK(sseg_os_thp_shmem_allows("advise", "", reason, sizeof(reason)));
	CHECK(sseg_os_thp_shmem_allows("within_size", "inherit", reason, sizeof(reason)));
	CHECK(sseg_os_thp_shmem_allows("force", "", reason, sizeof(reason)));
	CHECK(!sseg_os_thp_shmem_allows("deny", "always", reason, sizeof(reason)));
	CHECK(sseg_os_thp_shmem_allows("never", "advise", reason, sizeof(reason)));
	CHECK(!sseg_os_thp_shmem_allows("always", "never", reason, sizeof(reason)));
	CHECK(strstr(reason, THP_PER2M " is [never]"));
	CHECK(!sseg_os_thp_shmem_allows("never", "inherit", reason, sizeof(reason)));
	CHECK(strstr(reason, "[inherit]"));

	if (access(THP_GLOBAL, R_OK) == 0) {
		CHECK_RC(sseg_os_thp_shmem_knobs(global, per2m), 0);
		CHECK(global[0] && strchr(global, '[') == NULL);
	}
}

static void test_populate_numa_meminfo(void)
{
	uint64_t shmem0, shmem1, huge, nodes, where;
	unsigned char vec[64 * MiB / 4096];
	uint8_t *p, *q;

	CHECK_RC(sseg_os_meminfo(&shmem0, &huge), 0);
	p = map_new(64 * MiB, 0, NULL);
	CHECK_RC(sseg_os_populate(p, 0, 64 * MiB, 4096, 1, true), 0);
	CHECK_RC(sseg_os_meminfo(&shmem1, &huge), 0);
	CHECK(shmem1 >= shmem0 + 60 * MiB);
	CHECK_RC(sseg_os_numa_where(p, 64 * MiB, 4096, &where), 0);
	CHECK(where & 1);

	q = map_new(64 * MiB, 0, NULL);
	CHECK_RC(sseg_os_numa_nodes(&nodes), 0);
	CHECK(nodes & 1);
	CHECK_RC(sseg_os_numa_bind(q, 64 * MiB, 0), 0);
	CHECK_RC(sseg_os_numa_bind(q, 64 * MiB, 63), -EINVAL);
	CHECK_ERR_HAS("nodes with memory: 0");
	CHECK_RC(sseg_os_numa_interleave(q, 64 * MiB, nodes), 0);
	CHECK_RC(sseg_os_numa_where(q, 64 * MiB, 4096, &where), 0);
	CHECK(where == 0); /* nothing faulted yet */
	for (uint64_t off = 0; off < 64 * MiB; off += 64 * 4096 + 1)
		q[off] = tu_pattern(1, off);
	CHECK_RC(sseg_os_populate(q, 0, 64 * MiB, 4096, 2, true), 0);
	CHECK(mincore(q, 64 * MiB, vec) == 0);
	for (size_t i = 0; i < sizeof(vec); i++)
		CHECK(vec[i] & 1);
	CHECK_RC(sseg_os_populate(q, 0, 64 * MiB - 12288, 4096, 3, false), 0);
	for (uint64_t off = 0; off < 64 * MiB; off += 4096) {
		bool written = off % (64 * 4096 + 1) == 0;

		CHECK(written || q[off] == 0);
	}
	for (uint64_t off = 0; off < 64 * MiB; off += 64 * 4096 + 1)
		CHECK(q[off] == tu_pattern(1, off));
	CHECK_RC(sseg_os_numa_where(q, 64 * MiB, 4096, &where), 0);
	CHECK(where == (nodes & where) && where != 0);
	CHECK_RC(sseg_os_populate(q, 0, 4096, 3000, 1, true), -EINVAL);
	sseg_os_window_release(p, 64 * MiB);
	sseg_os_window_release(q, 64 * MiB);
}

/* 8 MiB of memfd THP: all of it on PMDs with advise, none with never. */
static uint64_t thp_bytes(void)
{
	uint64_t bytes;
	uint8_t *p = map_new(8 * MiB, 0, NULL);

	CHECK_RC(sseg_os_madvise_hugepage(p, 8 * MiB), 0);
	CHECK_RC(sseg_os_populate(p, 0, 8 * MiB, SSEG_2M, 2, true), 0);
	CHECK_RC(sseg_os_huge_bytes(p, 8 * MiB, &bytes), 0);
	sseg_os_window_release(p, 8 * MiB);
	return bytes;
}

static void test_thp(void)
{
	bool per2m = access(THP_PER2M, W_OK) == 0;
	char reason[256];

	if (tu_knob_set(THP_GLOBAL, "advise")) {
		fprintf(stderr, "skipping THP: cannot write %s\n", THP_GLOBAL);
		return;
	}
	if (per2m)
		CHECK_RC(tu_knob_set(THP_PER2M, "inherit"), 0);
	CHECK(sseg_os_thp_shmem_usable(reason, sizeof(reason)));
	CHECK(thp_bytes() == 8 * MiB);

	CHECK_RC(tu_knob_set(THP_GLOBAL, "never"), 0);
	CHECK(!sseg_os_thp_shmem_usable(reason, sizeof(reason)));
	CHECK(strstr(reason, "is [never]"));
	CHECK(thp_bytes() == 0);
	if (!per2m)
		return;
	/* The per-size knob overrides a global never, even for a memfd. */
	CHECK_RC(tu_knob_set(THP_PER2M, "advise"), 0);
	CHECK(sseg_os_thp_shmem_usable(reason, sizeof(reason)));
	CHECK(thp_bytes() == 8 * MiB);
}

/* More than the pool holds, mapped MAP_NORESERVE so that mmap does not
 * refuse it up front: population must say ENOMEM, not SIGBUS. */
static void populate_beyond_pool(uint64_t size)
{
	int fd;
	void *p;

	CHECK_RC(sseg_os_memfd_create("test", size, SSEG_2M, &fd), 0);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	CHECK(p != MAP_FAILED);
	CHECK_RC(sseg_os_populate(p, 0, size, SSEG_2M, 2, true), -ENOMEM);
	CHECK_ERR_HAS("out of memory (HugeTLB pool or memory limit)");
	munmap(p, size);
	close(fd);
}

static void test_hugetlb(void)
{
	struct sseg_hugetlb_pool pools[8], pool;
	uint64_t page, bytes, shmem, used;
	int fd, n;
	uint8_t *p;

	n = sseg_os_hugetlb_pools(pools, 8);
	for (int i = 1; i < n; i++)
		CHECK(pools[i - 1].page_size < pools[i].page_size);
	CHECK_RC(sseg_os_hugetlb_pool(3 * MiB, &pool), -ENOENT);
	if (tu_hugetlb_reserve(4) != 0) {
		fprintf(stderr, "skipping HugeTLB: no 4 free 2 MiB pages\n");
		return;
	}
	CHECK_RC(sseg_os_hugetlb_pool(SSEG_2M, &pool), 0);
	CHECK(pool.page_size == SSEG_2M && pool.free >= 4);
	CHECK_RC(sseg_os_memfd_create("test", 3 * MiB, SSEG_2M, &fd), -EINVAL);
	CHECK_ERR_HAS("multiple of its 2097152-byte pages");
	p = map_new(8 * MiB, SSEG_2M, &fd);
	CHECK_RC(sseg_os_memfd_check(fd, 8 * MiB, &page), 0);
	CHECK(page == SSEG_2M);
	CHECK_RC(sseg_os_populate(p, 0, 8 * MiB, SSEG_2M, 2, true), 0);
	CHECK_RC(sseg_os_huge_bytes(p, 8 * MiB, &bytes), 0);
	CHECK(bytes == 8 * MiB);
	CHECK_RC(sseg_os_meminfo(&shmem, &used), 0);
	CHECK(used >= 8 * MiB);
	close(fd);
	sseg_os_window_release(p, 8 * MiB);
	CHECK_RC(sseg_os_hugetlb_pool(SSEG_2M, &pool), 0);
	if (pool.free - pool.reserved < 64)
		populate_beyond_pool((pool.free - pool.reserved + 1) * SSEG_2M);
}

static void test_host(void)
{
	struct sseg_os_host_id a, b;
	static const uint8_t zero[16];
	uint8_t r1[32], r2[32];

	CHECK_RC(sseg_os_host_id(&a), 0);
	CHECK_RC(sseg_os_host_id(&b), 0);
	CHECK(memcmp(&a, &b, sizeof(a)) == 0);
	CHECK(memcmp(a.boot_id, zero, 16) != 0 && a.netns && a.pidns && a.uid == getuid());
	CHECK_RC(sseg_os_random(r1, sizeof(r1)), 0);
	CHECK_RC(sseg_os_random(r2, sizeof(r2)), 0);
	CHECK(memcmp(r1, r2, sizeof(r1)) != 0);
	CHECK(sseg_os_base_page_size() >= 4096 && sseg_os_cpu_count() >= 1);
	CHECK_RC(sseg_os_read_u64("/proc/sys/kernel/random/boot_id", &b.netns), -EINVAL);
	CHECK_RC(sseg_os_read_text("/nonexistent/knob", (char *)r1, sizeof(r1)), -ENOENT);
	CHECK_ERR_HAS("/nonexistent/knob");
}

int main(void)
{
	tu_lock_machine();
	test_memfd();
	test_window();
	test_fd_passing();
	test_socket_edges();
	test_knobs();
	test_populate_numa_meminfo();
	test_thp();
	test_hugetlb();
	test_host();
	printf("os: ok\n");
	return 0;
}
