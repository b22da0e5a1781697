/* SPDX-License-Identifier: Apache-2.0 */
/* The control API of the fake CUDA driver (libsseg_fake_cuda.so). A test
 * reaches the instance the library under test loaded with
 * dlopen(path, RTLD_NOW | RTLD_NOLOAD) and dlsym; these prototypes give the
 * types (__typeof__(sseg_fake_cuda_fail) *).
 *
 * Configuration, read at the first call into the fake ("key=value;..."; the
 * defaults enforce what the real driver enforces):
 *   devices=1          device count; numa=0,1 the host node of device i % n
 *   driver=13000       cuDriverGetVersion; attributes newer than it answer
 *                      INVALID_VALUE (141 HOST_NUMA VMM needs 12090)
 *   vmm=1 host_numa_vmm=1 posix_fd=1 fabric=0 host_register=1 ro_register=1
 *                      attributes 102, 141, 103, 128, 99, 113
 *   vmm_ctx=1          every VMM call needs a current context (201)
 *   need_ctx=1         host registration, device memory and copies need a
 *                      current context (201), as documented (cuCtxSynchronize
 *                      always does)
 *   peer=all           peer access matrix: peer=0-1,2-3 (only those pairs) or
 *                      nopeer=0-2 (take pairs away); cuDeviceCanAccessPeer,
 *                      and an import, or cuMemSetAccess to device memory,
 *                      across a missing pair answer
 *                      CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (217); access to
 *                      HOST_NUMA memory needs no peer
 *   novmm=none         devices without VMM (novmm=2,3): attributes 102 and
 *                      141 read 0, cuMemSetAccess for them NOT_SUPPORTED
 *   imex_channel=1     FABRIC create/export permitted (0: NOT_PERMITTED)
 *   imex=0             FABRIC import permitted (0: NOT_PERMITTED)
 *   fabric_works=B     sets imex_channel and imex together
 *   host_numa_blocked=0  HOST_NUMA cuMemCreate fails with 304 (seccomp)
 *   map_offset=0       cuMemMap offsets other than 0 accepted
 *   fork_works=0       a forked child of an initialized process may go on
 *   uva=1              cuMemHostGetDevicePointer without DEVICEMAP;
 *                      attribute 41
 *   host_pointer=1     attribute 91: registered memory's device pointer is
 *                      its host pointer (0: each registration elsewhere)
 *   pageable_host_pt=0 attribute 100: without it, registering memory the
 *                      CPU cannot write needs READ_ONLY (INVALID_VALUE)
 *   register_aligned=0 cuMemHostRegister refuses unaligned addresses
 *   granularity=2097152 max_register=549755813887
 * Scripted failures:
 *   SSEG_FAKE_CUDA_FAIL="cuMemMap:2:CUDA_ERROR_OUT_OF_MEMORY,cuMemUnmap:1-:999"
 *     (entry:call numbers N, N- or N-M:error name or number; calls counted
 *     from the first call of the process)
 * A malformed value aborts the process. */
#ifndef SSEG_FAKE_CUDA_H
#define SSEG_FAKE_CUDA_H

#include <stddef.h>

#include "fake/kit/control.h"

/* sseg_fake_cuda_fail, _configure, _calls, _bugs, _reset and _live_handles,
 * _reservations, _mappings, _registrations, as fake/kit/control.h describes
 * them. The bugs are double or unknown
 * releases, frees of unknown reservations or of reservations with
 * mappings, unmaps of ranges that are not whole mappings, maps over
 * mappings, access on unmapped ranges, unregisters of unregistered memory,
 * context releases without a retain. Reset also zeroes the access record
 * (sseg_fake_cuda_access); live handles, reservations, mappings,
 * registrations and contexts stay. */
FK_CONTROL_DECLARE(sseg_fake_cuda);
/* Primary context retains not yet released, over all devices. */
int sseg_fake_cuda_live_contexts(void);
/* The i-th live registration in address order; 0, or -ENOENT. */
int sseg_fake_cuda_registration(int i, void **p, size_t *bytes, unsigned *flags);
/* 1 when the last cuMemSetAccess granted device access (READ or READWRITE). */
int sseg_fake_cuda_access(int device);
/* The devices that may access the mapping holding p, over every
 * cuMemSetAccess on it (bit d: device d), and the id of the last HOST_NUMA
 * entry (-1: none; the driver ignores it, a test may not; host_node may be
 * NULL); 0, or -ENOENT where p is mapped by no cuMemMap. */
int sseg_fake_cuda_granted(const void *p, unsigned *devices, int *host_node);

#endif
