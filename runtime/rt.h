/*
 * rt.h - the runtime: turning generated C into callable code. One section per file.
 *
 * The runtime knows nothing of graphs: it takes a C translation unit and flags and gives back
 * code (JIT) or a shared object (AOT). Errors are returned as a NEST_* status with a malloc'd
 * message in *err (the caller frees it); the runtime never prints.
 */
#ifndef NEST_RT_H
#define NEST_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------
 * The contract of libnest_jit.so (jit.cpp: C++, clang and LLVM 14). libnest loads it with
 * dlopen on first use (loader.c) and takes its one export, `const rt_shim_api *nest_jit_shim(void)`,
 * so a program that never JITs never loads LLVM.
 * ------------------------------------------------------------------------------------------- */

#define RT_SHIM_ABI 2 /* the table's abi() must return this */

typedef struct rt_shim_code rt_shim_code; /* code loaded into the process; freed by ..._free */

typedef struct rt_shim_api {
    int (*abi)(void);
    /* "triple cpu-name +feature,+feature,..." of the host, for cache keys; static storage. */
    const char *(*host)(void);
    /* Compiles C source (len bytes, named `name` in diagnostics) with the clang arguments
     * args[0..nargs) (e.g. "-O3", "-march=native") to an ELF object in memory: *obj is
     * malloc'd (the caller frees it). The shim adds only "-c -x c" and plain diagnostics.
     * Returns a NEST_* status: on failure (NEST_ERR_COMPILE) *err holds clang's diagnostics,
     * "name:line:col: error: ..." with the source line and a caret (malloc'd). Thread-safe:
     * compiles run in parallel. */
    int (*compile)(const char *src, size_t len, const char *name, const char *const *args,
                   int nargs, void **obj, size_t *objlen, char **err);
    /* Links a copy of an object into the process: undefined symbols resolve against the
     * process (libm's expf, ...), libmvec (_ZGV* vector math) and libomp (__kmpc_*, omp_*,
     * always LLVM's, never a libgomp the program may have), each library opened on first
     * need. Every global symbol is resolved now: a missing one fails the load with
     * NEST_ERR_COMPILE and the linker's message. Thread-safe (loads are serialized). */
    int (*load)(const void *obj, size_t len, rt_shim_code **out, char **err);
    /* The address of a global function or variable the object defines, or NULL. No lock. */
    void *(*lookup)(rt_shim_code *c, const char *symbol);
    /* Unloads the code (NULL is a no-op): every address it gave becomes invalid. */
    void (*free)(rt_shim_code *c);
    /* The version of LLVM the library was built with ("14.0.6"); static storage. */
    const char *(*llvm_version)(void);
} rt_shim_api;

/* ---------------------------------------------------------------------------------------------
 * loader.c: finding and loading libnest_jit.so
 * ------------------------------------------------------------------------------------------- */

/* The shim's entry points, loading the library on the first call (thread-safe). Looks in
 * $NEST_JIT_LIB (when set, only there), beside libnest.so (or the program, when libnest is
 * linked statically) and in its nest/ subdirectory, in ../lib/nest of the program, and at the
 * path the build put it. NULL with *err (NEST_ERR_UNAVAILABLE) when it cannot be loaded: the
 * message names every path tried and why it failed. The library stays loaded. */
const rt_shim_api *rt_shim(char **err);

/* A malloc'd printf-formatted message for *err (NULL when out of memory), shared by the
 * runtime's files. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 1, 2)))
#endif
char *rt_strf(const char *fmt, ...);

/* ---------------------------------------------------------------------------------------------
 * cache.c: the compile cache
 * ------------------------------------------------------------------------------------------- */

/* The cache directory: $XDG_CACHE_HOME/nest, else $HOME/.cache/nest; NULL when NEST_CACHE=0 or
 * neither variable is set. Malloc'd. */
char *rt_cache_dir(void);

/* Looks up the entry for key (keylen bytes: the source, the flags and the host). Returns the
 * object (malloc'd) or NULL when absent, unreadable, truncated or corrupt (a corrupt entry is
 * removed so that it is rebuilt), a symlink, or not owned by this user. */
void *rt_cache_get(const char *dir, const void *key, size_t keylen, size_t *objlen);

/* Writes all n bytes to fd (retrying short writes and EINTR); false on an error. */
bool rt_write_all(int fd, const void *p, size_t n);

/* Makes the directory if needed (mode 0700) and checks that the cache may use it: a directory
 * owned by this user (after symlinks) and writable by no one else; code loaded from it runs in
 * the process. Returns NEST_OK, or NEST_ERR_IO with the reason in *why (malloc'd: "the cache
 * directory D belongs to user 1001, ...: not using the cache"), or NEST_ERR_NOMEM. */
int rt_cache_open(const char *dir, char **why);

/* Stores an entry atomically (a temporary file renamed into place), creating the directory if
 * needed. Returns 0, or the errno of the failure (ENOSPC: a full disk); a failed store leaves
 * nothing behind, and the cache being an optimization, the caller goes on without it. */
int rt_cache_put(const char *dir, const void *key, size_t keylen, const void *obj,
                 size_t objlen);

/* ---------------------------------------------------------------------------------------------
 * jit.c: C source to callable code, through the cache
 * ------------------------------------------------------------------------------------------- */

typedef struct rt_code rt_code;

typedef struct rt_opts {
    int opt_level;     /* 0..3 */
    const char *march; /* "native", "x86-64-v2", ... */
    bool openmp;       /* -fopenmp (else only -fopenmp-simd) */
    bool cache;
} rt_opts;

/* Compiles src in process (or takes it from the cache) and loads it. *cache_hit (cache_hit may
 * be NULL) tells which. The clang arguments are -O<n> -march=<m> -mtune=generic -std=c99 -fPIC
 * -fopenmp-simd [-fopenmp] -fno-math-errno -fveclib=libmvec; diagnostics name the source
 * "nest.c". The cache key is the source, those arguments, the host's CPU and features and
 * RT_SHIM_ABI; an entry that does not load is compiled again. Returns NEST_OK, NEST_ERR_ARG (no
 * options, an opt_level outside 0..3, a march that is not a CPU-like name), NEST_ERR_UNAVAILABLE
 * (no JIT library), NEST_ERR_COMPILE (clang's diagnostics or the linker's message) or
 * NEST_ERR_NOMEM, with a malloc'd message in *err (err may be NULL). Thread-safe. */
int rt_jit(const char *src, size_t len, const rt_opts *o, rt_code **out, bool *cache_hit,
           char **err);
/* A global function or variable of the code, or NULL (also for c NULL). Valid until
 * rt_code_free; code from several rt_jit calls may define the same names. */
void *rt_code_symbol(rt_code *c, const char *name);
/* Why the cache was not used for the code (a directory refused by rt_cache_open, a store that
 * failed: "... No space left on device"), or "" when it was or was turned off. Lives as c. */
const char *rt_code_cache_note(const rt_code *c);
/* Unloads the code; NULL is a no-op. */
void rt_code_free(rt_code *c);

/* ---------------------------------------------------------------------------------------------
 * aot.c: C source to a shared object with the system compiler
 * ------------------------------------------------------------------------------------------- */

/* Writes src to a temporary file ($TMPDIR or /tmp, removed afterwards) and runs
 * `cc -std=c99 -shared -fPIC -O<n> -march=<m> -fopenmp-simd [-fopenmp -Wl,-z,nodelete]
 * -o so_path FILE.c -lm` (argv, no shell) with cc split on spaces ("gcc", "clang-14",
 * "ccache gcc"; NULL or "" is "cc"). A clang also gets -mllvm
 * -enable-interleaved-mem-accesses=0, as the JIT does. With openmp the .so is never unmapped
 * by dlclose(): the OpenMP runtime's idle threads would be left in unmapped code. With `log`
 * not NULL, *log
 * receives the command line, its wall time ("(12.3 ms)") and any compiler output (malloc'd).
 * Returns NEST_OK, NEST_ERR_ARG, NEST_ERR_IO (the temporary file), NEST_ERR_UNAVAILABLE (the
 * compiler cannot be run: "gcc-99: not found ...") or NEST_ERR_COMPILE (it failed: *err holds
 * the command, its exit status and its output). */
int rt_build_so(const char *src, size_t len, const char *so_path, const char *cc,
                const rt_opts *o, char **log, char **err);

/* Binary data linked into a shared object under a symbol (hidden: not exported). */
typedef struct rt_blob {
    const char *symbol;
    const void *data;
    size_t size;
} rt_blob;

/* rt_build_so with n blobs that the C declares extern: they go into one binary file beside the
 * source, and an assembler file places each (64-byte aligned, read-only) with .incbin, so that
 * weights never pass through the C compiler as text. */
int rt_build_so_data(const char *src, size_t len, const rt_blob *blobs, int n, const char *so_path,
                     const char *cc, const rt_opts *o, char **log, char **err);

#endif /* NEST_RT_H */
