/*
 * benchutil.h - what the drivers of `make bench` share (bench/benchutil.c): the clock, medians,
 * input arrays allocated and filled the same way for every contender. (The Python peers' process
 * is peer.h's.)
 */
#ifndef NEST_BENCHUTIL_H
#define NEST_BENCHUTIL_H

#include <stdint.h>
#include <stdio.h>

double now_s(void);
/* The CPU time of the process (all its threads), in seconds. */
double cpu_s(void);
void sleep_ms(int ms);
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* The median of n values (sorts them). */
double median(double *v, int n);
/* The 1-minute load average (from /proc/loadavg), or -1: a table says how busy the machine was,
 * since the figures of a shared machine move with its load. */
double load_1min(void);
/* A field of /proc/self/status in KiB ("VmRSS", "VmHWM"), or -1. */
long status_kib(const char *field);

/* The cores of a round. The vCPUs of a shared guest need not run at one speed: on the machine of
 * docs/performance.md one of its two ran the same convolution 12-15% slower than the other, in
 * CPU time, for nest and PyTorch alike, so a one-thread comparison went to whichever side the
 * scheduler had put on the faster core. The tables' one-thread rounds pin both sides (this
 * process with pin_core, the peer's with its "core" argument) to round_core(r): the same core
 * for both within a round, the cores in turn from round to round. pin_core(-1) gives the
 * thread back every core it started with (before two-thread rounds, so that the OpenMP threads
 * created then may run anywhere). round_core is -1 when the process may run on one core only. */
int round_core(int round);
void pin_core(int core);
/* Pins this thread for round r of a row on `threads` threads (one: round_core(r); more: every
 * core) and writes the peer's argument for the same round to arg: " core K", or "". */
void pin_round(int threads, int round, char *arg, size_t n);

/* A float32 array of count elements in its own page-aligned mapping, huge pages from 4 MiB
 * (numpy's own policy), zeroed. */
float *alloc_f32(int64_t count);
void free_f32(float *p, int64_t count);
/* The values the Python peers' fill() writes: a hash of the index mapped to [-1, 1). */
void fill(float *a, int64_t count, int seed);

/* Notes for the end of a report: note() appends (printf-style), notes() is all of them. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *notes(void);

#endif
