/* graphgen.h - large graphs in the text form (bench/graphgen.c). */
#ifndef NEST_GRAPHGEN_H
#define NEST_GRAPHGEN_H

#include <stdint.h>

/* The text of a graph of family "chain", "wide", "mlp" or "random" with about n nodes
 * (malloc'd), or NULL for an unknown family or out of memory. */
char *graphgen(const char *family, int n, uint64_t seed);

#endif
