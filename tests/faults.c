/* faults.c - the allocation and write wrappers of faults.h (linked with --wrap). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faults.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static atomic_bool armed, persist, fired;
static atomic_long target, seen;
/* failalloc_arm_thread: the arming thread's token; only its allocations count */
static _Thread_local char thread_token;
static _Atomic(const char *) only_thread;

static void arm(long k, bool persistent, bool this_thread_only)
{
    atomic_store(&armed, false);
    atomic_store(&only_thread, this_thread_only ? &thread_token : NULL);
    atomic_store(&seen, 0);
    atomic_store(&target, k);
    atomic_store(&persist, persistent);
    atomic_store(&fired, false);
    atomic_store(&armed, true);
}

void failalloc_arm(long k, bool persistent) { arm(k, persistent, false); }
void failalloc_arm_thread(long k, bool persistent) { arm(k, persistent, true); }

long failalloc_disarm(void)
{
    atomic_store(&armed, false);
    return atomic_load(&seen);
}

void failalloc_resume(long n)
{
    atomic_store(&seen, n);
    atomic_store(&armed, true);
}

bool failalloc_fired(void) { return atomic_load(&fired); }

/* Whether this allocation fails. */
static bool fail_now(void)
{
    if (!atomic_load(&armed))
        return false;
    const char *only = atomic_load(&only_thread);
    if (only && only != &thread_token)
        return false;
    long n = atomic_fetch_add(&seen, 1) + 1, k = atomic_load(&target);
    if (n == k || (n > k && atomic_load(&persist))) {
        atomic_store(&fired, true);
        errno = ENOMEM;
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t align, size_t n)
{
    return fail_now() ? NULL : __real_aligned_alloc(align, n);
}
int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
    return fail_now() ? ENOMEM : __real_posix_memalign(p, align, n);
}
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return fail_now() ? NULL : __real_strndup(s, n); }

/* ---- writes ---- */

ssize_t __real_write(int fd, const void *p, size_t n);
ssize_t __wrap_write(int fd, const void *p, size_t n);

static atomic_bool wr_armed;
static atomic_long wr_left, wr_seen;
static atomic_int wr_err;

void failwrite_arm(long n, int err)
{
    atomic_store(&wr_left, n);
    atomic_store(&wr_seen, 0);
    atomic_store(&wr_err, err);
    atomic_store(&wr_armed, true);
}

long failwrite_disarm(void)
{
    atomic_store(&wr_armed, false);
    return atomic_load(&wr_seen);
}

ssize_t __wrap_write(int fd, const void *p, size_t n)
{
    if (!atomic_load(&wr_armed) || n == 0)
        return __real_write(fd, p, n);
    long left = atomic_load(&wr_left);
    if ((long)n <= left) {
        ssize_t r = __real_write(fd, p, n);
        if (r > 0) {
            atomic_fetch_sub(&wr_left, (long)r);
            atomic_fetch_add(&wr_seen, (long)r);
        }
        return r;
    }
    if (left > 0) { /* what fits goes through: the caller sees a short write first */
        ssize_t r = __real_write(fd, p, (size_t)left);
        if (r > 0) {
            atomic_fetch_sub(&wr_left, (long)r);
            atomic_fetch_add(&wr_seen, (long)r);
        }
        return r;
    }
    if (atomic_load(&wr_err) == 0)
        _exit(0);
    errno = atomic_load(&wr_err);
    return -1;
}
