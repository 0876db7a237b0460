/*
 * blascore.c - the OpenBLAS kernel the benchmark's peers run with. OpenBLAS 0.3.21 picks its
 * kernels from the CPU's family and model, and does not know every recent CPU: on an Intel Xeon
 * of model 207 it runs its generic kernel (sgemm 28 GFLOP/s on one core instead of 151 with its
 * AVX-512 one). The peers run with the best core type the CPU's flags allow, so that nest is
 * never compared with a crippled peer; the report prints the core OpenBLAS then says it runs.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blascore.h"

/* Whether the space-separated flag list has flag. */
static bool has_flag(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)); p += n)
        if ((p == flags || p[-1] == ' ' || p[-1] == '\t') &&
            (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

const char *blascore_best(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    static char line[8192];
    const char *flags = NULL;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0 && strchr(line, ':')) {
            flags = strchr(line, ':') + 1;
            break;
        }
    if (f)
        fclose(f);
    if (!flags)
        return NULL;
    bool avx512 = has_flag(flags, "avx512f") && has_flag(flags, "avx512bw") &&
                  has_flag(flags, "avx512vl") && has_flag(flags, "avx512dq") &&
                  has_flag(flags, "avx512cd");
    if (avx512 && has_flag(flags, "avx512_bf16"))
        return "Cooperlake";
    if (avx512)
        return "SkylakeX";
    if (has_flag(flags, "avx2") && has_flag(flags, "fma"))
        return "Haswell";
    return NULL;
}

/* The core type OpenBLAS picks by itself (no OPENBLAS_CORETYPE), asked in a child process so
 * that this one never loads OpenBLAS (its threads would spin beside the benchmark). */
static void own_choice(char *name, size_t size)
{
    snprintf(name, size, "?");
    int fd[2];
    if (pipe(fd) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv("OPENBLAS_L2_SIZE");
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
        char *(*corename)(void) = NULL;
        if (h)
            *(void **)&corename = dlsym(h, "openblas_get_corename");
        const char *s = corename ? corename() : "?";
        (void)!write(fd[1], s, strlen(s));
        _exit(0);
    }
    close(fd[1]);
    if (pid > 0) {
        ssize_t n = read(fd[0], name, size - 1);
        name[n > 0 ? n : 0] = '\0';
        if (n <= 0)
            snprintf(name, size, "?");
        waitpid(pid, NULL, 0);
    }
    close(fd[0]);
}

/* 3: AVX-512 with BF16, 2: AVX-512, 1: AVX2 and FMA, 0: older or unknown. */
static int tier(const char *core)
{
    static const char *const names[][2] = {
        {"Cooperlake", "3"}, {"SapphireRapids", "3"}, {"SkylakeX", "2"},
        {"Haswell", "1"},    {"Zen", "1"},            {"Excavator", "1"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(core, names[i][0]) == 0)
            return names[i][1][0] - '0';
    return 0;
}

void blascore_force(char *note, size_t size)
{
    const char *best = blascore_best();
    const char *was = getenv("OPENBLAS_CORETYPE"), *l2 = getenv("OPENBLAS_L2_SIZE");
    char before[160] = "", own[64];
    if (was || l2)
        snprintf(before, sizeof before, "; the environment had OPENBLAS_CORETYPE=%s, "
                                        "OPENBLAS_L2_SIZE=%s",
                 was ? was : "(unset)", l2 ? l2 : "(unset)");
    own_choice(own, sizeof own);
    unsetenv("OPENBLAS_L2_SIZE");
    if (!best || tier(own) >= tier(best)) {
        unsetenv("OPENBLAS_CORETYPE");
        snprintf(note, size, "OpenBLAS's own choice, %s (the best the CPU's flags allow: %s)%s",
                 own, best ? best : "none of its AVX2 or AVX-512 types", before);
        return;
    }
    setenv("OPENBLAS_CORETYPE", best, 1);
    snprintf(note, size, "OPENBLAS_CORETYPE=%s, the best the CPU's flags allow (OpenBLAS's own "
                         "choice: %s)%s", best, own, before);
}
