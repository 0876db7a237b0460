/*
 * peer.h - a Python process the benchmarks talk to, one command line and one reply line at a
 * time (bench.c with peers.py, ops.c with ops_peers.py).
 */
#ifndef NEST_BENCH_PEER_H
#define NEST_BENCH_PEER_H

#include <stdio.h>
#include <sys/types.h>

typedef struct peer {
    pid_t pid;
    FILE *to, *from;
} peer;

/* The interpreter: $BENCH_PYTHON, or Debian's /usr/bin/python3 (which has python3-numpy). */
const char *peer_python(void);
/* Runs the interpreter on script with one argument. Exits the program when it cannot. */
void peer_start(peer *p, const char *script, const char *arg);
/* Sends one command (printf-style) and returns the reply line (static storage, no newline).
 * Exits the program when the peer stopped. */
const char *peer_cmd(peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Asks for "info" (which keeps the pipe in step), sends "quit" and waits for the process. */
void peer_stop(peer *p);

#endif
