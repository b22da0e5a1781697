/* SPDX-License-Identifier: Apache-2.0 */
/* The control API of the fake ACL runtime (libsseg_fake_acl.so). A test
 * reaches the instance the library under test loaded with
 * dlopen(path, RTLD_NOW | RTLD_NOLOAD) and dlsym; these prototypes give the
 * types (__typeof__(sseg_fake_acl_fail) *).
 *
 * Configuration, read at the first call into the fake:
 *   SSEG_FAKE_ACL="devices=2;version=1.15.0;granularity=2097152;fabric=1;
 *                  host_register=1;bare_tgid_offset=0;need_ctx=1;need_init=1;
 *                  hccs=1;host_numa=1;v1_host_import=0;huge1g=0;fork_works=0"
 *   (huge1g=0: 1 GiB host pages refused at allocation; 1: taken; map,
 *   access, export: allocated, then refused at that step)
 *   SSEG_FAKE_ACL_FAIL="aclrtMapMem:2:ACL_ERROR_RT_MEMORY_ALLOCATION,aclrtUnmapMem:1-:507000"
 *     (entry:call numbers N, N- or N-M:error name or number; calls counted
 *     from the first call of the process)
 * ASCEND_RT_VISIBLE_DEVICES="2,3" is read as the runtime reads it: user
 * ordinals 0 and 1 are logical devices 2 and 3 of the `devices` there are.
 * Defaults: one device, version 1.0.0, 2 MiB granularity, no fabric
 * handles (as on A2), host registration supported, the runtime's pid equal
 * to getpid(), a context and aclInit needed, devices on HCCS, HOST_NUMA
 * allocations supported, the V1 import of host memory failing (as the
 * current runtime's does), no 1 GiB host pages, no runtime in a forked
 * child. A malformed value aborts the process. */
#ifndef SSEG_FAKE_ACL_H
#define SSEG_FAKE_ACL_H

#include <stddef.h>
#include <stdint.h>

#include "fake/kit/control.h"

/* sseg_fake_acl_fail, _configure, _calls, _bugs, _reset and _live_handles,
 * _reservations, _mappings, _registrations, as fake/kit/control.h describes
 * them. The bugs are frees of unknown or freed handles, releases of unknown
 * reservations or of reservations with mappings, unmaps and unregisters of
 * what is not mapped or registered, resets without a set. */
FK_CONTROL_DECLARE(sseg_fake_acl);
/* aclrtSetDevice references not yet reset, over all devices. */
int sseg_fake_acl_live_devices(void);
/* The i-th live registration in address order; 0, or -ENOENT. */
int sseg_fake_acl_registration(int i, void **p, size_t *bytes, int *device);
/* The trust list of an in-server handle this process exported: the number
 * of pids (up to max copied), or -ENOENT. */
int sseg_fake_acl_trusted(uint64_t shareable, int32_t *pids, int max);
/* The i-th live mapping in address order and the logical devices granted
 * access to it (a bit mask); 0, or -ENOENT. */
int sseg_fake_acl_mapping(int i, void **p, size_t *bytes, int *devices);
/* The configPath of the aclInit that initialized the runtime ("" for
 * NULL), or NULL while none did. */
const char *sseg_fake_acl_init_config(void);

#endif
