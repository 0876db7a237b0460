/*
 * benchutil.c - what the drivers of `make bench` share (see benchutil.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "benchutil.h"

double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/* The cores this process started with, in order. */
static int start_cores[CPU_SETSIZE], nstart = -1;
static cpu_set_t start_set;

static void read_cores(void)
{
    if (nstart >= 0)
        return;
    nstart = 0;
    if (sched_getaffinity(0, sizeof start_set, &start_set) != 0)
        return;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &start_set))
            start_cores[nstart++] = c;
}

int round_core(int round)
{
    read_cores();
    return nstart > 1 ? start_cores[round % nstart] : -1;
}

void pin_core(int core)
{
    read_cores();
    if (nstart <= 1)
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    if (core >= 0)
        CPU_SET(core, &one);
    if (sched_setaffinity(0, sizeof one, core >= 0 ? &one : &start_set) != 0)
        die("cannot run on core %d: %s", core, strerror(errno));
}

void pin_round(int threads, int round, char *arg, size_t n)
{
    int core = threads == 1 ? round_core(round) : -1;
    pin_core(core);
    if (core >= 0)
        snprintf(arg, n, " core %d", core);
    else if (n > 0)
        arg[0] = '\0';
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double load_1min(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

float *alloc_f32(int64_t count)
{
    size_t bytes = (size_t)(count > 0 ? count : 1) * sizeof(float);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        die("cannot map %zu bytes: %s", bytes, strerror(errno));
    if (bytes >= (4u << 20))
        madvise(p, bytes, MADV_HUGEPAGE);
    memset(p, 0, bytes);
    return p;
}

void free_f32(float *p, int64_t count)
{
    if (p)
        munmap(p, (size_t)(count > 0 ? count : 1) * sizeof(float));
}

void fill(float *a, int64_t count, int seed)
{
    for (int64_t i = 0; i < count; i++) {
        uint64_t h = ((uint64_t)i * 2654435761u + (uint64_t)seed * 40503u) % (1ull << 32);
        a[i] = (float)((h >> 8) & 1023) / 512.0f - 1.0f;
    }
}

static char note_text[4096];

void note(const char *fmt, ...)
{
    size_t len = strlen(note_text);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note_text + len, sizeof note_text - len, fmt, ap);
    va_end(ap);
}

const char *notes(void) { return note_text; }
