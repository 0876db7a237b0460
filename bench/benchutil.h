/* benchutil.h - the small helpers the benchmark programs share (bench.c, train.c). */
#ifndef NEST_BENCHUTIL_H
#define NEST_BENCHUTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The program's name in messages ("bench", "bench/train"). */
extern const char *bench_program;

static inline double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static inline void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", bench_program);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of n values (sorts them). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A Python peer: `PYTHON SCRIPT --serve` on two pipes, one command line in, one reply line out. */
typedef struct peer {
    pid_t pid;
    FILE *to, *from;
    const char *python, *script;
} peer;

static inline void peer_start(peer *p, const char *python, const char *script)
{
    int in[2], outp[2];
    p->python = python;
    p->script = script;
    if (pipe(in) != 0 || pipe(outp) != 0)
        die("pipe: %s", strerror(errno));
    p->pid = fork();
    if (p->pid < 0)
        die("fork: %s", strerror(errno));
    if (p->pid == 0) {
        dup2(in[0], 0);
        dup2(outp[1], 1);
        close(in[0]);
        close(in[1]);
        close(outp[0]);
        close(outp[1]);
        execl(python, "python3", script, "--serve", (char *)NULL);
        fprintf(stderr, "%s: cannot run %s: %s\n", bench_program, python, strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(outp[1]);
    p->to = fdopen(in[1], "w");
    p->from = fdopen(outp[0], "r");
}

/* Sends one command and returns the reply line (static storage). */
static inline const char *peer_cmd(peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline const char *peer_cmd(peer *p, const char *fmt, ...)
{
    static char line[256];
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->to, fmt, ap);
    va_end(ap);
    fputc('\n', p->to);
    fflush(p->to);
    if (!fgets(line, sizeof line, p->from))
        die("the Python peer (%s %s) stopped; are its packages installed (tools/deps.sh bench)?",
            p->python, p->script);
    line[strcspn(line, "\n")] = '\0';
    return line;
}

static inline void peer_stop(peer *p)
{
    peer_cmd(p, "info"); /* keeps the pipe in step before quitting */
    fprintf(p->to, "quit\n");
    fclose(p->to);
    fclose(p->from);
    waitpid(p->pid, NULL, 0);
}

#endif /* NEST_BENCHUTIL_H */
