/* peer.c - a Python process the benchmarks talk to line by line (peer.h). */
#include "peer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *script_of; /* for messages */

const char *peer_python(void)
{
    const char *p = getenv("BENCH_PYTHON");
    return p && *p ? p : "/usr/bin/python3";
}

void peer_start(peer *p, const char *script, const char *arg)
{
    int in[2], outp[2];
    script_of = script;
    if (pipe(in) != 0 || pipe(outp) != 0) {
        fprintf(stderr, "bench: pipe: %s\n", strerror(errno));
        exit(1);
    }
    p->pid = fork();
    if (p->pid < 0) {
        fprintf(stderr, "bench: fork: %s\n", strerror(errno));
        exit(1);
    }
    if (p->pid == 0) {
        dup2(in[0], 0);
        dup2(outp[1], 1);
        close(in[0]);
        close(in[1]);
        close(outp[0]);
        close(outp[1]);
        execl(peer_python(), "python3", script, arg, (char *)NULL);
        fprintf(stderr, "bench: cannot run %s: %s\n", peer_python(), strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(outp[1]);
    p->to = fdopen(in[1], "w");
    p->from = fdopen(outp[0], "r");
}

const char *peer_cmd(peer *p, const char *fmt, ...)
{
    static char line[256];
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->to, fmt, ap);
    va_end(ap);
    fputc('\n', p->to);
    fflush(p->to);
    if (!fgets(line, sizeof line, p->from)) {
        fprintf(stderr, "bench: the Python peer (%s %s) stopped; are its Debian packages "
                        "installed (tools/deps.sh bench)?\n",
                peer_python(), script_of ? script_of : "");
        exit(1);
    }
    line[strcspn(line, "\n")] = '\0';
    return line;
}

void peer_stop(peer *p)
{
    peer_cmd(p, "info");
    fprintf(p->to, "quit\n");
    fclose(p->to);
    fclose(p->from);
    waitpid(p->pid, NULL, 0);
}
