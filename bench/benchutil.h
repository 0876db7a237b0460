/*
 * benchutil.h - what the drivers of `make bench` share (bench/benchutil.c): the clock, medians,
 * input arrays allocated and filled the same way for every contender, and a Python peer process
 * answering commands on a pipe.
 */
#ifndef NEST_BENCHUTIL_H
#define NEST_BENCHUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define PYTHON_DEFAULT "/usr/bin/python3"

double now_s(void);
void sleep_ms(int ms);
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* The median of n values (sorts them). */
double median(double *v, int n);

/* A float32 array of count elements in its own page-aligned mapping, huge pages from 4 MiB
 * (numpy's own policy), zeroed. */
float *alloc_f32(int64_t count);
void free_f32(float *p, int64_t count);
/* The values the Python peers' fill() writes: a hash of the index mapped to [-1, 1). */
void fill(float *a, int64_t count, int seed);

/* The interpreter of the Python peers: $BENCH_PYTHON, else Debian's /usr/bin/python3. */
const char *python_path(void);

/* A Python peer: `python script --serve`, one reply line per command line. */
typedef struct peer {
    pid_t pid;
    FILE *to, *from;
    const char *script;
} peer;

void peer_start(peer *p, const char *script);
/* Sends one command and returns the reply line (static storage); dies if the peer stopped. */
const char *peer_cmd(peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void peer_stop(peer *p);

#endif
