/* SPDX-License-Identifier: Apache-2.0 */
/* The cases of test_fake_cuda written outside test_fake_cuda.c, by file;
 * each runs in a fresh child and returns its exit status. */
#ifndef SSEG_FAKE_CUDA_CASES_H
#define SSEG_FAKE_CUDA_CASES_H

/* fake_cuda_sharing.c */
int case_posix_fd(void *arg);
int case_fabric(void *arg);
int case_imex(void *arg);

/* fake_cuda_vmm.c */
int case_context(void *arg);
int case_peer(void *arg);
int case_map_offset(void *arg);
int case_access_locations(void *arg);
int case_host_numa_blocked(void *arg);

/* fake_cuda_hostreg.c */
int case_host_register(void *arg);

#endif
