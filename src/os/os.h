/* OS primitives: small functions that return 0 or a negative errno and set
 * the error sentence (sseg_err) on failure. No policy lives here. */
#ifndef SSEG_OS_H
#define SSEG_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal.h"

#define SSEG_2M (2ull << 20)
#define SSEG_1G (1ull << 30)

/* ---- memfd (memfd.c) ---- */

/* An unnamed memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING, plus MFD_HUGETLB with
 * the page size when hugetlb_page_size != 0) of exactly size bytes, sealed
 * with F_SEAL_SHRINK | F_SEAL_GROW. */
SSEG_HIDDEN int os_memfd_create(const char *name, uint64_t size, uint64_t hugetlb_page_size,
				int *fd);
/* The last seals, once the owner has its writable mapping: F_SEAL_SEAL, and
 * F_SEAL_FUTURE_WRITE when no one else may ever map it writable (mappings
 * made later, the peers', then cannot gain write access by mprotect). */
SSEG_HIDDEN int os_memfd_seal(int fd, bool future_write);
/* Checks an fd received from another process before mapping it: a memfd
 * (tmpfs or hugetlbfs), of expect_size bytes, with SHRINK, GROW and SEAL
 * seals. On success *page_size is the fd's page size (hugetlbfs block size,
 * else the base page size). */
SSEG_HIDDEN int os_memfd_check(int fd, uint64_t expect_size, uint64_t *page_size);

/* ---- address windows (window.c) ---- */

/* Reserves size bytes of address space (PROT_NONE, MAP_NORESERVE) whose
 * start is a multiple of align (a power of two). */
SSEG_HIDDEN int os_window_reserve(uint64_t size, uint64_t align, void **base);
/* Maps size bytes of fd at offset 0 over the start of a reserved window
 * (MAP_FIXED | MAP_SHARED), read-only when readonly. */
SSEG_HIDDEN int os_window_map(void *base, uint64_t size, int fd, bool readonly);
SSEG_HIDDEN int os_window_release(void *base, uint64_t size);

/* ---- unix sockets and fd passing (sock.c) ---- */

/* name: without the leading NUL; at most 100 bytes. */
SSEG_HIDDEN int os_listen_abstract(const char *name, int backlog, int *fd);
/* One attempt. -ECONNREFUSED when nobody listens under that name. */
SSEG_HIDDEN int os_connect_abstract(const char *name, int *fd);
/* Waits (poll) up to timeout_ms for a connection; -ETIMEDOUT when none. */
SSEG_HIDDEN int os_accept(int listen_fd, int timeout_ms, int *fd);
/* Full reads and writes, bounded by timeout_ms in total; a read that meets
 * end of file returns -ECONNRESET. */
SSEG_HIDDEN int os_read_full(int fd, void *buf, size_t len, int timeout_ms);
SSEG_HIDDEN int os_write_full(int fd, const void *buf, size_t len, int timeout_ms);
/* Sends len bytes of data with one fd attached (SCM_RIGHTS). */
SSEG_HIDDEN int os_send_fd(int sock, int fd, const void *data, size_t len);
/* Receives len bytes and the fd attached to them (-EPROTO when none came). */
SSEG_HIDDEN int os_recv_fd(int sock, int *fd, void *data, size_t len, int timeout_ms);
SSEG_HIDDEN int os_peer_uid(int sock, uid_t *uid);
/* The peer's pid as this process's PID namespace sees it (0: outside). */
SSEG_HIDDEN int os_peer_pid(int sock, pid_t *pid);

/* ---- transparent and HugeTLB pages (hugepage.c) ---- */

/* The shmem THP knobs: global shmem_enabled and the 2 MiB per-size one
 * ("" when the kernel has no per-size knobs), the bracketed values. */
SSEG_HIDDEN int os_thp_shmem_knobs(char global[16], char per2m[16]);
/* The bracketed value of a choice knob's text ("always [never]" -> never). */
SSEG_HIDDEN int os_knob_choice(const char *text, char *value, size_t len);
/* The judgement behind os_thp_shmem_usable, for given knob values. */
SSEG_HIDDEN bool os_thp_shmem_allows(const char *global, const char *per2m, char *reason,
				     size_t len);
/* True when MADV_HUGEPAGE on a memfd mapping can get 2 MiB pages; when not,
 * reason says which knob is in the way. */
SSEG_HIDDEN bool os_thp_shmem_usable(char *reason, size_t len);
SSEG_HIDDEN int os_madvise_hugepage(void *addr, uint64_t len);
/* The HugeTLB pool of one page size; -ENOENT when the kernel has none. */
SSEG_HIDDEN int os_hugetlb_pool(uint64_t page_size, struct sseg_hugetlb_pool *pool);
/* Every pool, smallest page size first, at most max; returns how many
 * (0 on a kernel without HugeTLB). */
SSEG_HIDDEN int os_hugetlb_pools(struct sseg_hugetlb_pool *pools, int max);
/* Bytes of [addr, addr+len) mapped with PMD (2 MiB) or larger pages, from
 * /proc/self/smaps (ShmemPmdMapped and FilePmdMapped of the VMAs inside,
 * Shared_Hugetlb and Private_Hugetlb for HugeTLB ones). */
SSEG_HIDDEN int os_huge_bytes(const void *addr, uint64_t len, uint64_t *bytes);

/* ---- population (populate.c) ---- */

/* Faults every page of [addr, addr+len) in with MADV_POPULATE_WRITE (READ
 * when !writable), split over threads (>= 1) at page_size boundaries; a
 * kernel without it gets a first-touch fallback. -ENOMEM when memory ran
 * out (instead of a later SIGBUS). */
SSEG_HIDDEN int os_populate(void *addr, uint64_t len, uint64_t page_size, int threads,
			    bool writable);

/* ---- NUMA (numa.c), raw syscalls, no libnuma ---- */

/* Nodes that have memory (bit n = node n); at least node 0. */
SSEG_HIDDEN int os_numa_nodes(uint64_t *mask);
/* mbind(MPOL_BIND) to one node, or MPOL_INTERLEAVE over mask. */
SSEG_HIDDEN int os_numa_bind(void *addr, uint64_t len, int node);
SSEG_HIDDEN int os_numa_interleave(void *addr, uint64_t len, uint64_t mask);
/* Nodes where up to 64 pages sampled evenly over the range live
 * (move_pages query); 0 when none is faulted in yet. */
SSEG_HIDDEN int os_numa_where(const void *addr, uint64_t len, uint64_t page_size,
			      uint64_t *mask);

/* ---- host identity and facts (host.c) ---- */

struct os_host_id {
	uint8_t boot_id[16]; /* /proc/sys/kernel/random/boot_id */
	uint64_t netns;      /* inode of /proc/self/ns/net: abstract sockets live there */
	uint64_t pidns;      /* inode of /proc/self/ns/pid */
	uint32_t uid;
};
SSEG_HIDDEN int os_host_id(struct os_host_id *id);
/* Shmem and HugeTLB bytes in use host-wide, from /proc/meminfo. */
SSEG_HIDDEN int os_meminfo(uint64_t *shmem, uint64_t *hugetlb);
SSEG_HIDDEN int os_random(void *buf, size_t len);
SSEG_HIDDEN uint64_t os_base_page_size(void);
SSEG_HIDDEN int os_cpu_count(void);
/* Reads a small sysfs/proc file into buf (NUL-terminated, trailing newline
 * stripped). */
SSEG_HIDDEN int os_read_text(const char *path, char *buf, size_t len);
SSEG_HIDDEN int os_read_u64(const char *path, uint64_t *value);

#endif
