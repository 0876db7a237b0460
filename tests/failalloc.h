/*
 * failalloc.h - failing the k-th allocation, for the out-of-memory tests (tests/test_oom.c).
 *
 * A test binary linked with -Wl,--wrap=malloc,--wrap=calloc,... (FAILALLOC_LDFLAGS in the
 * Makefile) and tests/failalloc.c sends every allocation that libnest.a and the test make
 * through the counting wrappers below; the C library's own allocations (stdio, dlopen) and
 * those of other shared libraries (the JIT shim, clang, LLVM, cmocka) are not counted. The
 * wrappers are thread-safe.
 *
 *   failalloc_arm(k, persistent)  count allocations from now on; the k-th fails (returns NULL
 *                                 with errno ENOMEM), and with persistent every later one too
 *   failalloc_disarm()            stop failing; returns how many allocations were counted
 *   failalloc_resume(n)           arm again where failalloc_disarm stopped (n: what it returned),
 *                                 so that the test's own work in between is not counted
 *   failalloc_fired()             whether an allocation failed since the last arm
 */
#ifndef NEST_FAILALLOC_H
#define NEST_FAILALLOC_H

#include <stdbool.h>

void failalloc_arm(long k, bool persistent);
long failalloc_disarm(void);
void failalloc_resume(long seen);
bool failalloc_fired(void);

#endif /* NEST_FAILALLOC_H */
