/* jit.c - C source to callable code in this process: the clang arguments, the cache key, and
 * the path cache lookup -> (compile -> store) -> load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nest.h"
#include "rt.h"

struct rt_code {
    const rt_shim_api *api;
    rt_shim_code *code;
    char *note; /* why the cache was not used, or NULL */
};

#define MAX_ARGS 24

/* -march's value goes into an argument of its own, but keep it to what CPU names look like so
 * that a mistake reads as "bad -march", not as a strange clang error. */
static bool valid_march(const char *m)
{
    size_t n = strlen(m);
    if (n == 0 || n > 64)
        return false;
    for (; *m; m++)
        if (!((*m >= 'a' && *m <= 'z') || (*m >= 'A' && *m <= 'Z') || (*m >= '0' && *m <= '9') ||
              *m == '-' || *m == '_' || *m == '.' || *m == '+'))
            return false;
    return true;
}

/* The clang arguments for o. olevel and march are the caller's buffers. */
static int make_args(const rt_opts *o, char *olevel, char *march, const char **args)
{
    int n = 0;
    snprintf(olevel, 8, "-O%d", o->opt_level);
    snprintf(march, 80, "-march=%s", o->march ? o->march : "native");
    args[n++] = olevel;
    args[n++] = march;
    /* With -march=native on some CPUs (znver3) LLVM fully unrolls constant-trip loops: seconds
     * of compile time for no speed. Generic tuning keeps the ISA and avoids it. */
    args[n++] = "-mtune=generic";
    args[n++] = "-std=c99";
    args[n++] = "-fPIC";
    /* `#pragma omp simd` (reductions vectorize) without the OpenMP runtime. */
    args[n++] = "-fopenmp-simd";
    if (o->openmp)
        args[n++] = "-fopenmp";
    /* The generated code never reads errno: math calls become pure, so loops of expf, logf,
     * sinf vectorize against glibc's vector math library (libmvec). */
    args[n++] = "-fno-math-errno";
    args[n++] = "-fveclib=libmvec";
    /* LLVM 14's loop vectorizer can move a load of an interleave group above a store to the
     * same address in the same iteration (llvm/llvm-project#63602): the emitter's row loops
     * (a reduction stored, then read back) gave wrong values. */
    args[n++] = "-mllvm";
    args[n++] = "-enable-interleaved-mem-accesses=0";
    /* The full unroller's default budget (300) unrolls small constant-trip loops with strided
     * stores into thousands of instructions: a 10-line graph (a column-major result written
     * through a broadcast) took 0.5 s to compile, 0.06 s with 100, and the kernels that matter
     * (folds, row groups, tiled products) run as fast with either. */
    args[n++] = "-mllvm";
    args[n++] = "-unroll-threshold=100";
    return n;
}

/* The cache key: everything the object depends on, NUL-separated, the source last. */
static char *make_key(const rt_shim_api *api, const char *const *args, int nargs,
                      const char *src, size_t len, size_t *keylen)
{
    char head[64];
    int hn = snprintf(head, sizeof head, "nest-jit abi=%d", RT_SHIM_ABI);
    const char *host = api->host();
    size_t n = (size_t)hn + 1 + strlen(host) + 1 + 1 + len;
    for (int i = 0; i < nargs; i++)
        n += strlen(args[i]) + 1;
    char *key = malloc(n), *p = key;
    if (!key)
        return NULL;
    memcpy(p, head, (size_t)hn + 1);
    p += hn + 1;
    memcpy(p, host, strlen(host) + 1);
    p += strlen(host) + 1;
    for (int i = 0; i < nargs; i++) {
        memcpy(p, args[i], strlen(args[i]) + 1);
        p += strlen(args[i]) + 1;
    }
    *p++ = '\0';
    if (len)
        memcpy(p, src, len);
    *keylen = n;
    return key;
}

int rt_jit(const char *src, size_t len, const rt_opts *o, rt_code **out, bool *cache_hit,
           char **err)
{
    char *e = NULL;
    *out = NULL;
    if (cache_hit)
        *cache_hit = false;
    if (err)
        *err = NULL;
    if ((!src && len) || !o) {
        e = rt_strf("rt_jit: no source or no options");
        goto fail_arg;
    }
    if (o->opt_level < 0 || o->opt_level > 3) {
        e = rt_strf("optimization level %d is not 0..3", o->opt_level);
        goto fail_arg;
    }
    if (o->march && !valid_march(o->march)) {
        e = rt_strf("bad -march value \"%.80s\"", o->march);
        goto fail_arg;
    }

    const rt_shim_api *api = rt_shim(err);
    if (!api)
        return NEST_ERR_UNAVAILABLE;

    char olevel[8], march[80];
    const char *args[MAX_ARGS];
    int nargs = make_args(o, olevel, march, args);

    rt_code *c = calloc(1, sizeof *c);
    if (!c) {
        if (err)
            *err = rt_strf("out of memory");
        return NEST_ERR_NOMEM;
    }
    c->api = api;

    /* The cache: a missing key (no memory) or directory only means no cache. */
    size_t keylen = 0;
    char *dir = o->cache ? rt_cache_dir() : NULL;
    if (dir && rt_cache_open(dir, &c->note) != NEST_OK) {
        free(dir);
        dir = NULL;
    }
    char *key = dir ? make_key(api, args, nargs, src ? src : "", len, &keylen) : NULL;
    if (key) {
        size_t objlen;
        void *obj = rt_cache_get(dir, key, keylen, &objlen);
        if (obj) {
            char *lerr = NULL;
            int st = api->load(obj, objlen, &c->code, &lerr);
            free(obj);
            free(lerr); /* a stored object that does not load is compiled again */
            if (st == NEST_OK) {
                if (cache_hit)
                    *cache_hit = true;
                goto done;
            }
        }
    }

    void *obj = NULL;
    size_t objlen = 0;
    int st = api->compile(src ? src : "", len, "nest.c", args, nargs, &obj, &objlen, &e);
    if (st == NEST_OK)
        st = api->load(obj, objlen, &c->code, &e);
    if (st != NEST_OK) {
        free(obj);
        free(key);
        free(dir);
        free(c->note);
        free(c);
        if (err)
            *err = e;
        else
            free(e);
        return st == NEST_ERR_NOMEM || st == NEST_ERR_UNAVAILABLE ? st : NEST_ERR_COMPILE;
    }
    int perr = key ? rt_cache_put(dir, key, keylen, obj, objlen) : 0;
    if (perr) /* a full disk, say: the code is good, only not stored */
        c->note = rt_strf("the code was not stored in the cache %s: %s", dir, strerror(perr));
    free(obj);

done:
    free(key);
    free(dir);
    *out = c;
    return NEST_OK;

fail_arg:
    if (err)
        *err = e;
    else
        free(e);
    return NEST_ERR_ARG;
}

void *rt_code_symbol(rt_code *c, const char *name)
{
    return c && name ? c->api->lookup(c->code, name) : NULL;
}

const char *rt_code_cache_note(const rt_code *c)
{
    return c && c->note ? c->note : "";
}

void rt_code_free(rt_code *c)
{
    if (!c)
        return;
    c->api->free(c->code);
    free(c->note);
    free(c);
}
