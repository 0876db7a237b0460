/*
 * cli.h - the command line nestc, one section per file, from the bottom up: cli.c (what the
 * commands share: options, input files), npy.c (numpy's .npy files), run.c (`nestc run`);
 * nestc.c (main: compiling, printing) stands on them. The command line stands above the driver
 * and uses the public API of nest.h (and the compiler's map for what nest.h does not show:
 * value names, plan dumps).
 */
#ifndef NEST_CLI_H
#define NEST_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nest.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };

/* ---------------------------------------------------------------------------------------------
 * cli.c: options and input files
 * ------------------------------------------------------------------------------------------- */

/* Prints "nestc: MESSAGE" and the hint to --help on stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Options that compiling and `nestc run` share (-O0..-O3, --march=, --no-openmp, --no-fuse,
 * --no-cache, -v) into o: 1 when `arg` is one, 0 when it is not, -1 after printing a usage
 * error. */
int cli_common_option(const char *arg, nest_options *o);

/* The options of an input file (--name NAME, --dim NAME=N ...): for an ONNX model, its import;
 * for a .nest file, the module's name and the sizes of its functions' symbolic dims. */
typedef struct cli_import {
    const char *name;
    int ndims;
    nest_dim dims[64];
    char names[64][256];
} cli_import;

/* Takes an import option at argv[*i] (and its value, moving *i): 1 when it is one, 0 when it is
 * not, -EXIT_USAGE after printing a usage error. */
int cli_import_option(int argc, char **argv, int *i, cli_import *imp);

/* The functions of an input file: a parsed .nest file or an imported ONNX model. */
typedef struct cli_input {
    nest_module *m;       /* a .nest file's */
    nest_function *f;     /* an ONNX model's */
    nest_function **fns;  /* in file order */
    int n;
    nest_function **spec; /* with --dim, a .nest file's functions at those sizes (fns) */
    nest_module *whole;   /* m when its own functions are what is emitted and built (with its
                           * state); NULL for an ONNX model, or when --dim made copies */
} cli_input;

/* Reads an input file ("-" is standard input; a name ending in .onnx is an ONNX model, imported
 * with imp; a .nest file's functions with symbolic dims are specialized to imp's --dim sizes)
 * into *in. On an error prints it (for a .nest file: file:line:col, the line and a
 * caret) and returns EXIT_INPUT (EXIT_USAGE for import options given to a .nest file); 0 on
 * success. The caller frees *in with cli_input_free, also after an error. */
int cli_load(const char *path, const cli_import *imp, cli_input *in);

void cli_input_free(cli_input *in);

/* ---------------------------------------------------------------------------------------------
 * run.c: nestc run FILE [--func NAME] [--in NAME=x.npy ...] [--random] [--out DIR] [--time]
 * [--check]
 * ------------------------------------------------------------------------------------------- */

/* The `nestc run` command: argv[0] is "run". Returns the exit status. */
int run_main(int argc, char **argv);

/* Fills count elements of type t with generated values: with random false, the fixed pattern
 * of nestc --run (element i of parameter p is ((7i + 3p) mod 11 - 5) / 8, integers without
 * the / 8, bool (i + p) mod 2); with random true, values from the seed: floats uniform in
 * [-1, 1), integers in [-10, 10], bool 0 or 1. */
void run_fill(void *data, nest_type t, int64_t count, int p, bool random, uint64_t *seed);

/* Prints up to `limit` values of an array as "[a, b, ... (N values)]" to stdout. */
void run_print_values(const void *data, nest_type t, int64_t count, int64_t limit);

/* The largest difference between a reference array and another, |a - b| / max(|a|, 1) for
 * floats (NaN against NaN is equal; NaN against a number, or infinities that differ, give
 * INFINITY), and 0 or 1 for integers and bool (whether any element differs). *where gets the
 * index of the largest. */
double run_difference(const void *ref, const void *got, nest_type t, int64_t count,
                      int64_t *where);

/* ---------------------------------------------------------------------------------------------
 * npy.c: numpy's .npy format, version 1.0, 2.0 and 3.0
 * (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html)
 * ------------------------------------------------------------------------------------------- */

/* An array read from a .npy file: dense, row-major, in this machine's byte order (a
 * Fortran-ordered or big-endian file is converted), bool as bytes 0 or 1. */
typedef struct npy_array {
    nest_type type;
    int rank;
    int64_t shape[NEST_MAX_RANK];
    int64_t count; /* elements: the product of the shape */
    void *data;    /* count elements, 64-byte aligned, malloc'd; never NULL after a success */
} npy_array;

/* The largest header a file may have (numpy writes tens of bytes). */
#define NPY_MAX_HEADER (1 << 20)

/* Parses a whole .npy file held in memory. Returns 0, or -1 with a message (the file's name is
 * not in it) in err[0..errlen): a bad magic, version or header, a dtype nest has no type for
 * (its numpy name is given), a shape of more than NEST_MAX_RANK axes or of more elements than
 * fit in memory, data shorter or longer than the shape says. Never reads past len. */
int npy_parse(const void *bytes, size_t len, npy_array *out, char *err, size_t errlen);

/* Reads a .npy file: as npy_parse, with the data read straight into its array. */
int npy_read(const char *path, npy_array *out, char *err, size_t errlen);

/* Writes the elements of an array of type t and the given shape, row-major (or column-major
 * with fortran), as a version 1.0 file with the header padded to 64 bytes, as numpy writes it.
 * Returns 0, or -1 with a message (the file is removed). */
int npy_write(const char *path, nest_type t, int rank, const int64_t *shape, const void *data,
              bool fortran, char *err, size_t errlen);

/* Copies the elements of an array of `shape` (elements of `size` bytes) from row-major src to
 * column-major dst (to_fortran) or back. */
void npy_reorder(void *dst, const void *src, size_t size, int rank, const int64_t *shape,
                 bool to_fortran);

/* The dtype text of a type ("<f4", "|b1"). */
const char *npy_descr(nest_type t);

/* Frees the data; NULL or an array that holds none is a no-op. */
void npy_free(npy_array *a);

#endif /* NEST_CLI_H */
