/*
 * blascore.h - the OpenBLAS kernel the benchmark's peers run with (bench/blascore.c).
 */
#ifndef NEST_BENCH_BLASCORE_H
#define NEST_BENCH_BLASCORE_H

#include <stddef.h>

/* The best OpenBLAS core type this CPU supports, from the flags of /proc/cpuinfo: "Cooperlake"
 * (AVX-512 with BF16), "SkylakeX" (AVX-512 F, BW, VL, DQ, CD), "Haswell" (AVX2 and FMA), or NULL
 * (leave OpenBLAS's own choice). */
const char *blascore_best(void);

/* Chooses the OpenBLAS kernel of every process started from now on (the peers load OpenBLAS
 * after this): OpenBLAS's own choice when it is as good as blascore_best(), else
 * OPENBLAS_CORETYPE=blascore_best(); OPENBLAS_L2_SIZE, which only makes sense with the core type
 * it was set for, is unset. Writes what was chosen, and what the environment had, into note. */
void blascore_force(char *note, size_t size);

#endif
