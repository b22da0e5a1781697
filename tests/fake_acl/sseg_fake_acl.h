/* The control API of the fake ACL runtime (libsseg_fake_acl.so). A test
 * reaches the instance the library under test loaded with
 * dlopen(path, RTLD_NOW | RTLD_NOLOAD) and dlsym; these prototypes give the
 * types (__typeof__(sseg_fake_acl_fail) *).
 *
 * Configuration, read at the first call into the fake:
 *   SSEG_FAKE_ACL="devices=2;version=1.15.0;granularity=2097152;fabric=1;
 *                  host_register=1;bare_tgid_offset=0;need_ctx=1"
 *   SSEG_FAKE_ACL_FAIL="aclrtMapMem:2:ACL_ERROR_RT_MEMORY_ALLOCATION,aclrtUnmapMem:1-:507000"
 *     (entry:call numbers N, N- or N-M:error name or number; calls counted
 *     from the first call of the process)
 * Defaults: one device, version 1.0.0, 2 MiB huge granularity, no fabric
 * handles (as on A2), host registration supported, the runtime's pid equal
 * to getpid(), a context needed. A malformed value aborts the process. */
#ifndef SSEG_FAKE_ACL_H
#define SSEG_FAKE_ACL_H

#include <stddef.h>
#include <stdint.h>

/* Fails calls nth .. nth+count-1 of entry ("aclrtMapMem"), counted from
 * now: nth 1 is the next call; count -1 fails every call from there.
 * entry NULL clears every scripted failure. */
void sseg_fake_acl_fail(const char *entry, int nth, int count, int err);
/* Applies a configuration string (the SSEG_FAKE_ACL syntax) over the
 * current one; 0, or -EINVAL with nothing changed. */
int sseg_fake_acl_configure(const char *spec);
/* Calls of entry since the start or the last reset (NULL: of all entries;
 * -1 for an unknown name). */
long sseg_fake_acl_calls(const char *entry);
/* What this process holds: physical handles (allocated or imported),
 * reservations, mappings, host registrations, and aclrtSetDevice
 * references not yet reset. */
int sseg_fake_acl_live_handles(void);
int sseg_fake_acl_live_reservations(void);
int sseg_fake_acl_live_mappings(void);
int sseg_fake_acl_live_registrations(void);
int sseg_fake_acl_live_devices(void);
/* Rule violations so far: frees of unknown or freed handles, releases of
 * unknown reservations or of reservations with mappings, unmaps and
 * unregisters of what is not mapped or registered, resets without a set.
 * Each is also told on stderr. */
int sseg_fake_acl_bugs(void);
/* The i-th live registration in address order; 0, or -ENOENT. */
int sseg_fake_acl_registration(int i, void **p, size_t *bytes, int *device);
/* The trust list of an in-server handle this process exported: the number
 * of pids (up to max copied), or -ENOENT. */
int sseg_fake_acl_trusted(uint64_t shareable, int32_t *pids, int max);
/* Zeroes the call counters and the bug counter and clears scripted
 * failures; what is held stays. */
void sseg_fake_acl_reset(void);

#endif
