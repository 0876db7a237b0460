/*
 * faults.h - fault injection for the tests: failing the k-th allocation (tests/test_oom.c) and
 * failing or dying in writes (tests/test_faults.c).
 *
 * A test binary linked with -Wl,--wrap=malloc,--wrap=calloc,...,--wrap=write (FAULT_WRAP in
 * the Makefile) and tests/faults.c sends every allocation and write that libnest.a and the test
 * make through the wrappers below; the C library's own (stdio, dlopen) and those of other shared
 * libraries (the JIT shim, clang, LLVM, cmocka) are not counted. The wrappers are thread-safe.
 *
 * Allocations
 *   failalloc_arm(k, persistent)  count allocations from now on; the k-th fails (returns NULL
 *                                 with errno ENOMEM), and with persistent every later one too
 *   failalloc_arm_thread(k, persistent)  likewise, counting only the calling thread's
 *                                 allocations (the other threads' never fail)
 *   failalloc_disarm()            stop failing; returns how many allocations were counted
 *   failalloc_resume(n)           arm again where failalloc_disarm stopped (n: what it returned),
 *                                 so that the test's own work in between is not counted
 *   failalloc_fired()             whether an allocation failed since the last arm
 *
 * Writes (write(2) on any descriptor)
 *   failwrite_arm(n, err)         the first n bytes written from now on go through; a write past
 *                                 them writes what fits and then fails with errno err (ENOSPC:
 *                                 a disk that fills up), or with err 0 ends the process at once
 *                                 (_exit(0): a process killed in the middle of a write)
 *   failwrite_disarm()            writes go through again; returns the bytes counted
 */
#ifndef NEST_FAULTS_H
#define NEST_FAULTS_H

#include <stdbool.h>

void failalloc_arm(long k, bool persistent);
void failalloc_arm_thread(long k, bool persistent);
long failalloc_disarm(void);
void failalloc_resume(long seen);
bool failalloc_fired(void);

void failwrite_arm(long n, int err);
long failwrite_disarm(void);

#endif /* NEST_FAULTS_H */
