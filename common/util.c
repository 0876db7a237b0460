/* util.c - arenas, the string builder, growing arrays, the clock, overflow-checked arithmetic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

struct arena_chunk {
    arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

#define CHUNK_SIZE ((size_t)64 * 1024)

void *arena_alloc(arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (size == 0)
        size = 16;
    arena_chunk *c = a->head;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > CHUNK_SIZE / 4 ? size : CHUNK_SIZE;
        if (cap > SIZE_MAX - sizeof(arena_chunk))
            return NULL;
        c = malloc(sizeof(arena_chunk) + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        if (size == cap && a->head) {
            /* a large block: keep filling the current chunk afterwards */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

void *arena_array(arena *a, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    return arena_alloc(a, count * size);
}

void *arena_memdup(arena *a, const void *p, size_t size)
{
    void *q = arena_alloc(a, size);
    if (q && size)
        memcpy(q, p, size);
    return q;
}

void *arena_grow(arena *a, void *items, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return items;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = arena_array(a, c, size);
    if (!p)
        return NULL;
    if (n)
        memcpy(p, items, n * size);
    *cap = c;
    return p;
}

char *arena_strdup(arena *a, const char *s)
{
    return arena_memdup(a, s, strlen(s) + 1);
}

void arena_free(arena *a)
{
    arena_chunk *c = a->head;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

static bool buf_reserve(buf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->failed = true;
        return false;
    }
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void buf_vprintf(buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if (!buf_reserve(b, (size_t)n))
        return;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void buf_printf(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void buf_write(buf *b, const char *s, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void buf_puts(buf *b, const char *s) { buf_write(b, s, strlen(s)); }

void buf_putc(buf *b, char c) { buf_write(b, &c, 1); }

char *buf_finish(buf *b)
{
    char *s = NULL;
    if (!b->failed) {
        s = b->data ? b->data : calloc(1, 1);
        b->data = NULL;
    }
    buf_reset(b);
    return s;
}

void buf_reset(buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}

void *grow_array(void *items, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return items;
    size_t c = *cap ? *cap * 2 : 16;
    if (c > SIZE_MAX / size)
        return NULL;
    void *p = realloc(items, c * size);
    if (p)
        *cap = c;
    return p;
}

double clock_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

bool mul_overflows(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

bool add_overflows(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_add_overflow(a, b, out);
}

int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}
