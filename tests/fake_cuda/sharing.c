/* SPDX-License-Identifier: Apache-2.0 */
/* test_fake_cuda: sharing with a peer process, fabric handles and IMEX channels. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "fake_cuda/cases.h"
#include "fake_cuda/harness.h"

struct shared {
	int fd;                   /* the exported POSIX fd */
	CUmemFabricHandle fabric; /* or the fabric handle */
	CUmemAllocationHandleType type;
	size_t size;
};

/* A peer process, forked before this one initializes the driver (a child
 * forked after could not use it); it gets the handle over a pipe. */
struct peer {
	const char *config;
	int device;
	CUresult import_rc; /* what its import must answer */
	int pipe[2];
	pid_t pid;
};

/* The handle travels over a pipe; a POSIX fd is opened again through
 * /proc (the peer is the owner's child), as it would arrive over a socket. */
static void send_shared(int out, const struct shared *s)
{
	CHECK(write(out, s, sizeof(*s)) == (ssize_t)sizeof(*s));
}

static void recv_shared(int in, struct shared *s)
{
	char path[64];

	CHECK(read(in, s, sizeof(*s)) == (ssize_t)sizeof(*s));
	if (s->type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getppid(), s->fd);
	s->fd = open(path, O_RDWR | O_CLOEXEC);
	CHECK(s->fd >= 0);
}

/* Imports, maps, checks the owner's bytes and writes its own in the second
 * half; or checks that the import is refused as it must be. */
static void peer_use(const struct shared *s, CUresult import_rc, int device)
{
	void *os_handle = s->type == CU_MEM_HANDLE_TYPE_FABRIC ? (void *)&s->fabric
							       : (void *)(uintptr_t)s->fd;
	CUmemGenericAllocationHandle handle = 0;
	unsigned char *p;

	CHECK_CU(cu.cuMemImportFromShareableHandle(&handle, os_handle, s->type), import_rc);
	if (import_rc != CUDA_SUCCESS)
		return;
	p = map_new(handle, s->size);
	CU_OK(cu.cuMemRelease(handle));
	CHECK(touch(p) == SEGV_EXIT);
	set_access(va_of(p), s->size, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, device + 1);
	CHECK(holds(p, s->size / 2, 0));
	fill(p + s->size / 2, s->size / 2, 1);
	unmap_free(p, s->size);
}

static int peer_main(void *arg)
{
	struct peer *peer = arg;
	struct shared s;

	close(peer->pipe[1]);
	recv_shared(peer->pipe[0], &s);
	load(peer->config, NULL);
	CU_OK(cu.cuInit(0));
	enter_device(peer->device);
	peer_use(&s, peer->import_rc, peer->device);
	if (s.type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		close(s.fd);
	leave_device(peer->device);
	check_back_to((struct live){ 0 });
	return 0;
}

static void peer_start(struct peer *peer)
{
	CHECK(pipe2(peer->pipe, O_CLOEXEC) == 0);
	peer->pid = tu_fork(peer_main, peer);
	close(peer->pipe[0]);
}

static int peer_finish(struct peer *peer, const struct shared *s)
{
	send_shared(peer->pipe[1], s);
	close(peer->pipe[1]);
	return tu_wait(peer->pid, 30000);
}

static void check_fault_until_access(unsigned char *p, size_t size)
{
	CHECK(touch(p) == SEGV_EXIT);
	CHECK(cu.sseg_fake_cuda_access(0) == 0);
	set_access(va_of(p), size, CU_MEM_ACCESS_FLAGS_PROT_READ, 0);
	CHECK(touch(p) == 0);
	CHECK(cu.sseg_fake_cuda_access(0) == 0);
	set_access(va_of(p), size, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 2);
	CHECK(cu.sseg_fake_cuda_access(0) == 1 && cu.sseg_fake_cuda_access(1) == 1);
}

/* Owner side of a share: the owner fills the first half, the peer the
 * second; the owner's handle is released before the peer maps. */
static void share(struct shared *s, unsigned types, struct peer *peer)
{
	CUmemGenericAllocationHandle handle = create(s->size, types);
	unsigned char *p = map_new(handle, s->size);

	check_fault_until_access(p, s->size);
	fill(p, s->size / 2, 0);
	if (s->type == CU_MEM_HANDLE_TYPE_FABRIC)
		CU_OK(cu.cuMemExportToShareableHandle(&s->fabric, handle, s->type, 0));
	else
		CU_OK(cu.cuMemExportToShareableHandle(&s->fd, handle, s->type, 0));
	CHECK(peer_finish(peer, s) == 0);
	if (peer->import_rc == CUDA_SUCCESS)
		CHECK(holds(p + s->size / 2, s->size / 2, 1));
	CU_OK(cu.cuMemRelease(handle));
	CHECK(holds(p, s->size / 2, 0)); /* the mapping keeps the memory */
	unmap_free(p, s->size);
	check_clean();
}

int case_posix_fd(void *arg)
{
	struct shared s = { .type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, .size = 4 * GRAN };
	struct peer peer = { .config = "devices=2", .device = 1 };

	peer_start(&peer);
	start("devices=2", NULL);
	share(&s, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, &peer);
	CHECK(close(s.fd) == 0);
	finish();
	return 0;
}

/* ---- fabric handles and IMEX channels ---- */

static void check_bad_fabric(void)
{
	CUmemGenericAllocationHandle handle = create(GRAN, CU_MEM_HANDLE_TYPE_FABRIC), imported = 0;
	CUmemFabricHandle fabric, forged;

	CU_OK(cu.cuMemExportToShareableHandle(&fabric, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0));
	forged = fabric;
	forged.data[0] ^= 1;
	CHECK_CU(cu.cuMemImportFromShareableHandle(&imported, &forged, CU_MEM_HANDLE_TYPE_FABRIC),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK(imported == 0);
	CHECK_CU(cu.cuMemExportToShareableHandle(&forged, handle,
						 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		 CUDA_ERROR_INVALID_VALUE); /* not requested at creation */
	CU_OK(cu.cuMemRelease(handle));
	/* The exporter may import its own handle, until it is released. */
	CHECK_CU(cu.cuMemImportFromShareableHandle(&imported, &fabric, CU_MEM_HANDLE_TYPE_FABRIC),
		 CUDA_ERROR_INVALID_VALUE);
}

int case_fabric(void *arg)
{
	struct shared s = { .type = CU_MEM_HANDLE_TYPE_FABRIC, .size = 2 * GRAN };
	struct peer peer = { .config = "devices=2;fabric=1;imex=1", .device = 1 };

	peer_start(&peer);
	start("devices=2;fabric=1;imex=1", NULL);
	share(&s, CU_MEM_HANDLE_TYPE_FABRIC | CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, &peer);
	check_bad_fabric();
	finish();
	return 0;
}

/* Rule (IMEX): with a channel, FABRIC allocations are created and exported,
 * and a process that does not share the exporter's channel cannot import
 * them (NOT_PERMITTED); without one, creating fails (NOT_PERMITTED) though
 * the attribute says 1. */
static void check_no_channel(void)
{
	CUmemAllocationProp prop = host_prop(0, CU_MEM_HANDLE_TYPE_FABRIC);
	CUmemGenericAllocationHandle handle;
	CUmemFabricHandle fabric;

	CU_OK(cu.sseg_fake_cuda_configure("imex_channel=0"));
	CHECK_CU(cu.cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_NOT_PERMITTED);
	handle = create(GRAN, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CHECK_CU(cu.cuMemExportToShareableHandle(&fabric, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0),
		 CUDA_ERROR_NOT_PERMITTED);
	CU_OK(cu.cuMemRelease(handle));
	CU_OK(cu.sseg_fake_cuda_configure("fabric_works=1"));
	CU_OK(cu.cuMemCreate(&handle, GRAN, &prop, 0));
	CU_OK(cu.cuMemRelease(handle));
	CU_OK(cu.sseg_fake_cuda_configure("fabric=0"));
	CHECK_CU(cu.cuMemCreate(&handle, GRAN, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
}

int case_imex(void *arg)
{
	struct shared s = { .type = CU_MEM_HANDLE_TYPE_FABRIC, .size = GRAN };
	struct peer peer = { .config = "devices=2;fabric=1", .import_rc = CUDA_ERROR_NOT_PERMITTED };
	int value = 0;

	peer_start(&peer);
	start("devices=2;fabric=1", NULL);
	CU_OK(cu.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0));
	CHECK(value == 1);
	share(&s, CU_MEM_HANDLE_TYPE_FABRIC, &peer);
	check_no_channel();
	check_clean();
	finish();
	return 0;
}
