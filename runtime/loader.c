/* loader.c - finding and loading libnest_jit.so on first use, so that a program that never
 * JITs never loads LLVM (170 MB of libraries, ~30 ms of process start). */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nest.h"
#include "rt.h"

#ifndef NEST_JIT_PATH
#define NEST_JIT_PATH ""
#endif

#define JIT_NAME "libnest_jit.so"

char *rt_strf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* The outcome of the one load, kept for the life of the process. */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static const rt_shim_api *api;
static char why[4096]; /* what was tried, when api is NULL */

/* Appends to `why`, silently truncating. */
static void note(const char *fmt, ...)
{
    size_t len = strlen(why);
    if (len + 1 >= sizeof why)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + len, sizeof why - len, fmt, ap);
    va_end(ap);
}

/* Tries one path; true when the shim is loaded and its ABI fits. */
static bool try_path(const char *path)
{
    if (access(path, F_OK) != 0) {
        note("\n  %s: not found", path);
        return false;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        note("\n  %s: %s", path, e ? e : "dlopen failed");
        return false;
    }
    const rt_shim_api *(*entry)(void);
    *(void **)&entry = dlsym(h, "nest_jit_shim");
    const rt_shim_api *a = entry ? entry() : NULL;
    if (!a || !a->abi) {
        note("\n  %s: no nest_jit_shim entry point", path);
        dlclose(h);
        return false;
    }
    /* the ABI first: an older table may be shorter than this one */
    if (a->abi() != RT_SHIM_ABI) {
        note("\n  %s: ABI version %d, this libnest needs %d", path, a->abi(), RT_SHIM_ABI);
        dlclose(h);
        return false;
    }
    if (!a->host || !a->compile || !a->load || !a->lookup || !a->free || !a->llvm_version) {
        note("\n  %s: an entry of the nest_jit_shim table is missing", path);
        dlclose(h);
        return false;
    }
    api = a; /* loaded for good: code it produces may live until exit */
    return true;
}

/* The directory part of path (without the slash) into out; false if there is none. */
static bool dir_of(const char *path, char *out, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return false;
    size_t n = (size_t)(slash - path);
    if (n == 0)
        n = 1; /* "/x" is in "/" */
    if (n >= size)
        return false;
    memcpy(out, path, n);
    out[n] = '\0';
    return true;
}

static bool try_in(const char *dir, const char *sub)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s%s", dir, sub, JIT_NAME);
    return n > 0 && (size_t)n < sizeof path && try_path(path);
}

static void load(void)
{
    const char *env = getenv("NEST_JIT_LIB");
    if (env && *env) {
        try_path(env); /* an explicit choice: no silent fallback to another file */
        return;
    }

    char exe[PATH_MAX], exedir[PATH_MAX] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        if (!dir_of(exe, exedir, sizeof exedir))
            exedir[0] = '\0';
    }

    /* Beside libnest.so, or beside the program when libnest is linked into it (the main
     * program's link map has an empty name). Any object of libnest names its file. */
    Dl_info info;
    struct link_map *lm = NULL;
    char dir[PATH_MAX];
    if (dladdr1((void *)&once, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm && lm->l_name &&
        strchr(lm->l_name, '/') && dir_of(lm->l_name, dir, sizeof dir)) {
        if (try_in(dir, "") || try_in(dir, "nest/"))
            return;
    } else if (exedir[0] && try_in(exedir, "")) {
        return;
    }
    if (exedir[0] && try_in(exedir, "../lib/nest/"))
        return;
    if (NEST_JIT_PATH[0])
        try_path(NEST_JIT_PATH);
}

const rt_shim_api *rt_shim(char **err)
{
    if (err)
        *err = NULL;
    pthread_once(&once, load);
    if (!api && err)
        *err = rt_strf("the JIT library %s cannot be loaded (set NEST_JIT_LIB to its path); "
                       "tried:%s",
                       JIT_NAME, why);
    return api;
}
