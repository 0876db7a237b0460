/* aot.c - C source to a shared object with the system C compiler, run as a child process
 * (posix_spawnp with an argv array: no shell ever sees the source path or the flags). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nest.h"
#include "util.h"
#include "rt.h"

#define MAX_CC_WORDS 32
#define MAX_OUTPUT (256 * 1024) /* of the compiler's messages kept; the rest is drained */

/* The command line as a shell would need it (for the log and messages only). */
static void add_command(buf *t, char *const *argv)
{
    for (int i = 0; argv[i]; i++) {
        const char *a = argv[i];
        if (i)
            buf_putc(t, ' ');
        if (a[0] && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              "0123456789-_=+./,:@%") == strlen(a)) {
            buf_puts(t, a);
            continue;
        }
        buf_putc(t, '\'');
        for (; *a; a++) {
            if (*a == '\'')
                buf_puts(t, "'\\''");
            else
                buf_putc(t, *a);
        }
        buf_putc(t, '\'');
    }
}

/* Runs argv with stdin from /dev/null and stdout+stderr into *output. Returns 0 and the wait
 * status, or an errno value when the program could not be started. */
static int run(char *const *argv, buf *output, int *status)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return errno;
    posix_spawn_file_actions_t fa;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0) {
        close(fds[0]);
        close(fds[1]);
        return rc;
    }
    if ((rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) == 0 &&
        (rc = posix_spawn_file_actions_adddup2(&fa, fds[1], 1)) == 0 &&
        (rc = posix_spawn_file_actions_adddup2(&fa, fds[1], 2)) == 0) {
        pid_t pid;
        rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        close(fds[1]);
        fds[1] = -1;
        if (rc == 0) {
            char chunk[4096];
            for (;;) {
                ssize_t r = read(fds[0], chunk, sizeof chunk);
                if (r < 0 && errno == EINTR)
                    continue;
                if (r <= 0)
                    break;
                if (output->len < MAX_OUTPUT)
                    buf_write(output, chunk, (size_t)r);
            }
            while (waitpid(pid, status, 0) < 0) {
                if (errno != EINTR) {
                    *status = -1; /* SIGCHLD ignored by the program: no status to be had */
                    break;
                }
            }
        }
    }
    posix_spawn_file_actions_destroy(&fa);
    close(fds[0]);
    if (fds[1] >= 0)
        close(fds[1]);
    return rc;
}

/* The data file and the assembler file that places the blobs: tmp_s gets the .s path. */
static char *write_data(const char *tmpdir, const rt_blob *blobs, int n, char *tmp_s, size_t cap,
                        char *tmp_bin, size_t capbin, int *st)
{
    *st = NEST_ERR_IO;
    int nb = snprintf(tmp_bin, capbin, "%s/nest-XXXXXX.bin", tmpdir);
    int ns = snprintf(tmp_s, cap, "%s/nest-XXXXXX.s", tmpdir);
    int fd = -1;
    if (nb < 0 || (size_t)nb >= capbin || ns < 0 || (size_t)ns >= cap ||
        strpbrk(tmpdir, "\"\\\n"))
        return rt_strf("the temporary folder %s cannot be named in an assembler file", tmpdir);
    if ((fd = mkstemps(tmp_bin, 4)) < 0) {
        tmp_bin[0] = '\0';
        return rt_strf("cannot create a temporary file in %s: %s", tmpdir, strerror(errno));
    }
    buf as = {0};
    static const char pad[64];
    uint64_t off = 0;
    bool ok = true;
    buf_puts(&as, "\t.section .rodata.nest_data,\"a\",@progbits\n");
    for (int i = 0; i < n && ok; i++) {
        size_t gap = (size_t)((64 - off % 64) % 64);
        ok = rt_write_all(fd, pad, gap) && rt_write_all(fd, blobs[i].data, blobs[i].size);
        off += gap;
        buf_printf(&as, "\t.balign 64\n\t.globl %s\n\t.hidden %s\n\t.type %s, @object\n"
                   "\t.size %s, %zu\n%s:\n", blobs[i].symbol, blobs[i].symbol, blobs[i].symbol,
                   blobs[i].symbol, blobs[i].size, blobs[i].symbol);
        if (blobs[i].size)
            buf_printf(&as, "\t.incbin \"%s\", %llu, %zu\n", tmp_bin, (unsigned long long)off,
                       blobs[i].size);
        else
            buf_puts(&as, "\t.byte 0\n");
        off += blobs[i].size;
    }
    buf_puts(&as, "\t.section .note.GNU-stack,\"\",@progbits\n");
    if (close(fd) != 0)
        ok = false;
    if (!ok) {
        buf_reset(&as);
        return rt_strf("cannot write %s: %s", tmp_bin, strerror(errno));
    }
    char *text = buf_finish(&as);
    if (!text) {
        *st = NEST_ERR_NOMEM;
        return rt_strf("out of memory");
    }
    if ((fd = mkstemps(tmp_s, 2)) < 0) {
        tmp_s[0] = '\0';
        free(text);
        return rt_strf("cannot create a temporary file in %s: %s", tmpdir, strerror(errno));
    }
    ok = rt_write_all(fd, text, strlen(text));
    if (close(fd) != 0)
        ok = false;
    free(text);
    if (!ok)
        return rt_strf("cannot write %s: %s", tmp_s, strerror(errno));
    *st = NEST_OK;
    return NULL;
}

int rt_build_so(const char *src, size_t len, const char *so_path, const char *cc,
                const rt_opts *o, char **log, char **err)
{
    return rt_build_so_data(src, len, NULL, 0, so_path, cc, o, log, err);
}

int rt_build_so_data(const char *src, size_t len, const rt_blob *blobs, int nblobs,
                     const char *so_path, const char *cc, const rt_opts *o, char **log, char **err)
{
    if (log)
        *log = NULL;
    if (err)
        *err = NULL;
    char *e = NULL;
    int st = NEST_OK;
    if ((!src && len) || !o || !so_path || !*so_path) {
        e = rt_strf("rt_build_so: no source, options or output path");
        st = NEST_ERR_ARG;
        goto out;
    }
    if (o->opt_level < 0 || o->opt_level > 3) {
        e = rt_strf("optimization level %d is not 0..3", o->opt_level);
        st = NEST_ERR_ARG;
        goto out;
    }

    /* The compiler command, split on spaces ("ccache gcc"). */
    char *words = rt_strf("%s", cc && *cc ? cc : "cc");
    char olevel[8], march[80], tmp[4096], tmp_s[4096], tmp_bin[4096];
    char *argv[MAX_CC_WORDS + 20];
    int argc = 0, fd = -1;
    buf output = {0}, cmd = {0};
    tmp[0] = tmp_s[0] = tmp_bin[0] = '\0';
    if (!words) {
        st = NEST_ERR_NOMEM;
        goto out;
    }
    char *save = NULL;
    for (char *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (argc == MAX_CC_WORDS) {
            e = rt_strf("the compiler command \"%.200s\" has too many words", cc);
            st = NEST_ERR_ARG;
            goto cleanup;
        }
        argv[argc++] = w;
    }
    int ncc = argc;
    if (argc == 0) {
        e = rt_strf("no C compiler given");
        st = NEST_ERR_ARG;
        goto cleanup;
    }

    /* The source, in a file of its own. */
    const char *tmpdir = getenv("TMPDIR");
    if (!tmpdir || tmpdir[0] != '/')
        tmpdir = "/tmp";
    int n = snprintf(tmp, sizeof tmp, "%s/nest-XXXXXX.c", tmpdir);
    if (n < 0 || (size_t)n >= sizeof tmp || (fd = mkstemps(tmp, 2)) < 0) {
        e = rt_strf("cannot create a temporary file in %s: %s", tmpdir, strerror(errno));
        st = NEST_ERR_IO;
        goto cleanup;
    }
    bool wrote = rt_write_all(fd, src ? src : "", len);
    if (close(fd) != 0)
        wrote = false;
    if (!wrote) {
        e = rt_strf("cannot write %s: %s", tmp, strerror(errno));
        st = NEST_ERR_IO;
        goto cleanup;
    }

    if (nblobs > 0 && (e = write_data(tmpdir, blobs, nblobs, tmp_s, sizeof tmp_s, tmp_bin,
                                      sizeof tmp_bin, &st)) != NULL)
        goto cleanup;

    snprintf(olevel, sizeof olevel, "-O%d", o->opt_level);
    snprintf(march, sizeof march, "-march=%.60s", o->march ? o->march : "native");
    argv[argc++] = "-std=c99";
    argv[argc++] = "-shared";
    argv[argc++] = "-fPIC";
    argv[argc++] = olevel;
    argv[argc++] = march;
    /* Generic tuning keeps the ISA and drops the CPU's preferences, as the JIT does: with
     * -march=native on an AVX-512 Xeon, clang tunes for 256-bit vectors and the generated
     * products, written for the full width, ran 2.6-3 times slower (MobileNetV2 30 ms against
     * 10, ResNet-18 75 against 29); gcc's code is the same speed either way. */
    argv[argc++] = "-mtune=generic";
    argv[argc++] = "-fopenmp-simd";
    if (o->openmp) {
        argv[argc++] = "-fopenmp";
        /* The OpenMP runtime's worker threads outlive a parallel region: if dlclose() unloaded
         * the library, and with it libgomp, they would run unmapped code. */
        argv[argc++] = "-Wl,-z,nodelete";
    }
    /* clang 14's loop vectorizer miscompiles some interleaved accesses, and its full unroller
     * can take seconds on small strided loops (see jit.c) */
    for (int i = 0; i < ncc; i++) {
        const char *base = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
        if (strncmp(base, "clang", 5) == 0) {
            argv[argc++] = "-mllvm";
            argv[argc++] = "-enable-interleaved-mem-accesses=0";
            argv[argc++] = "-mllvm";
            argv[argc++] = "-unroll-threshold=100";
            break;
        }
    }
    argv[argc++] = "-o";
    argv[argc++] = (char *)so_path;
    argv[argc++] = tmp;
    if (nblobs > 0)
        argv[argc++] = tmp_s;
    argv[argc++] = "-lm";
    argv[argc] = NULL;

    add_command(&cmd, argv);
    double t0 = clock_ms();
    int status = 0;
    int rc = run(argv, &output, &status);
    double ms = clock_ms() - t0;
    if (cmd.failed || output.failed) {
        st = NEST_ERR_NOMEM;
        goto cleanup;
    }
    if (rc != 0) {
        if (rc == ENOENT)
            e = rt_strf("%s: not found (cannot run the C compiler: %s)", argv[0], strerror(rc));
        else
            e = rt_strf("%s: cannot run the C compiler: %s", argv[0], strerror(rc));
        st = NEST_ERR_UNAVAILABLE;
        goto cleanup;
    }
    if (log)
        *log = rt_strf("%s\n(%.1f ms)%s%s", cmd.data, ms, output.len ? "\n" : "",
                       output.len ? output.data : "");
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[64];
        if (status != -1 && WIFSIGNALED(status))
            snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(status));
        else if (status != -1)
            snprintf(how, sizeof how, "failed with exit status %d", WEXITSTATUS(status));
        else
            snprintf(how, sizeof how, "ended with an unknown status");
        e = rt_strf("%s %s:\n%s", cmd.data, how, output.len ? output.data : "(no output)\n");
        st = NEST_ERR_COMPILE;
    }

cleanup:
    if (tmp[0] && fd >= 0)
        unlink(tmp);
    if (tmp_s[0])
        unlink(tmp_s);
    if (tmp_bin[0])
        unlink(tmp_bin);
    buf_reset(&cmd);
    buf_reset(&output);
    free(words);
out:
    if (st == NEST_ERR_NOMEM && !e)
        e = rt_strf("out of memory");
    if (err)
        *err = e;
    else
        free(e);
    return st;
}
