/*
 * util.h - what both the compiler and the runtime build on: arenas, the string builder, growing
 * arrays, the clock and overflow-checked arithmetic (common/util.c). Nothing here knows graphs
 * or code.
 */
#ifndef NEST_UTIL_H
#define NEST_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define FORMAT(a, b) __attribute__((format(printf, a, b)))
#else
#define FORMAT(a, b)
#endif

#define countof(a) (sizeof(a) / sizeof((a)[0]))

/* FNV-1a of the n bytes at s: the hash of the name indexes (nodes, states, symbols, C names). */
static inline uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

/* The ascending order of int32_t, for qsort and bsearch (lists of nodes, of buffers). */
int cmp_i32(const void *a, const void *b);

/* A bump allocator: passes allocate from their function's arena and never free; one call
 * releases everything. Allocations are zeroed and 16-byte aligned; NULL when out of memory. */
typedef struct arena_chunk arena_chunk;
typedef struct arena {
    arena_chunk *head;
} arena;

void *arena_alloc(arena *a, size_t size);
void *arena_array(arena *a, size_t count, size_t size); /* NULL also on overflow */
char *arena_strdup(arena *a, const char *s);
void *arena_memdup(arena *a, const void *p, size_t size);
/* Room for one more element in an arena array of *cap elements holding n, as grow_array: the
 * array, or a copy in a new block twice the size; NULL when out of memory. */
void *arena_grow(arena *a, void *items, size_t n, size_t *cap, size_t size);
void arena_free(arena *a);

/* A growing string with a sticky failure flag, checked once at buf_finish. */
typedef struct buf {
    char *data;
    size_t len, cap;
    bool failed;
} buf;

void buf_printf(buf *b, const char *fmt, ...) FORMAT(2, 3);
void buf_vprintf(buf *b, const char *fmt, va_list ap);
void buf_puts(buf *b, const char *s);
void buf_putc(buf *b, char c);
void buf_write(buf *b, const char *s, size_t n);
/* The string (owned by the caller, free()) or NULL if any append failed; b is reset. */
char *buf_finish(buf *b);
void buf_reset(buf *b);

/* Room for one more element in a malloc'd array of *cap elements of `size` bytes holding n:
 * returns the array (moved, *cap doubled) or NULL when out of memory (then the old one stands).
 * Used as  T *p = grow_array(v, &cap, n, sizeof *p); if (!p) fail; v = p; v[n++] = x;  */
void *grow_array(void *items, size_t *cap, size_t n, size_t size);

/* Milliseconds on the monotonic clock. */
double clock_ms(void);

/* Integer arithmetic that reports overflow instead of wrapping. */
bool mul_overflows(int64_t a, int64_t b, int64_t *out);
bool add_overflows(int64_t a, int64_t b, int64_t *out);

#endif /* NEST_UTIL_H */
