/* SPDX-License-Identifier: Apache-2.0 */
/* A process that imports what env exports: forked before env loads the
 * driver, since a forked child of an initialized process cannot use it. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "driver.h"
#include "importer.h"

struct import_req {
	int type;
	int device;
	CUmemFabricHandle fabric;
};

static int send_fd_msg(int sock, const void *msg, size_t len, int fd)
{
	char control[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { (void *)msg, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	if (fd >= 0) {
		m.msg_control = control;
		m.msg_controllen = sizeof(control);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &m, 0) == (ssize_t)len ? 0 : -1;
}

static int recv_fd_msg(int sock, void *msg, size_t len, int *fd)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { msg, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			    .msg_controllen = sizeof(control) };
	struct cmsghdr *c;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != (ssize_t)len)
		return -1;
	c = CMSG_FIRSTHDR(&m);
	*fd = -1;
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(c), sizeof(int));
	return 0;
}

static CUresult helper_import(const struct import_req *req, int fd)
{
	CUmemGenericAllocationHandle handle;
	void *os = req->type == CU_MEM_HANDLE_TYPE_FABRIC ? (void *)&req->fabric
							  : (void *)(uintptr_t)fd;
	CUresult r = enter_device(req->device);

	if (r == CUDA_SUCCESS)
		r = cu.cuMemImportFromShareableHandle(&handle, os, req->type);
	if (r == CUDA_SUCCESS)
		cu.cuMemRelease(handle);
	return r;
}

static int helper_main(int sock)
{
	char why[256];
	int loaded = -1, fd;
	struct import_req req;

	while (recv_fd_msg(sock, &req, sizeof(req), &fd) == 0) {
		CUresult r = CUDA_ERROR_NOT_INITIALIZED;

		if (loaded < 0)
			loaded = load_driver(why, sizeof(why)) == 0;
		if (loaded && cu.cuMemImportFromShareableHandle)
			r = helper_import(&req, fd);
		if (fd >= 0)
			close(fd);
		if (write(sock, &r, sizeof(r)) != sizeof(r))
			break;
	}
	return 0;
}

int helper_start(pid_t *pid)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	fflush(stdout);
	*pid = fork();
	if (*pid == 0) {
		close(sv[0]);
		_exit(helper_main(sv[1]));
	}
	close(sv[1]);
	return sv[0];
}

CUresult other_process_imports(int helper, int type, int device, const void *handle)
{
	struct import_req req = { .type = type, .device = device };
	CUresult r = CUDA_ERROR_UNKNOWN;
	int fd = -1;

	if (type == CU_MEM_HANDLE_TYPE_FABRIC)
		memcpy(&req.fabric, handle, sizeof(req.fabric));
	else
		fd = *(const int *)handle;
	if (helper < 0 || send_fd_msg(helper, &req, sizeof(req), fd) ||
	    read(helper, &r, sizeof(r)) != sizeof(r))
		return CUDA_ERROR_UNKNOWN;
	return r;
}
