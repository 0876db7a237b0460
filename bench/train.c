/*
 * train.c - the training table of `make bench`: the time of one training step (forward,
 * backward, SGD with momentum) of nest's compiled step kernel against PyTorch eager
 * (bench/train_peers.py), on 1 and 2 threads, measured in turn in one run.
 *
 *   train [-o REPORT.md] [--quick] [--rounds N] [--print MODEL]
 *         (--rounds: N rounds, at most 64, for a busy machine; --print: model MODEL's text form)
 *
 * Models: the digits MLP of samples/ (64-256-256-10, batch 32) and a 784-1024-1024-10 MLP at
 * batch 64, random data. nest's step is generated from the same template as samples/mlp.nest:
 * one kernel per step, the update in place. "1t" compiles without OpenMP; "2t" with OpenMP on
 * two threads, and PyTorch gets torch.set_num_threads of the same. Each figure is the median
 * of several rounds; in each round every contender runs a batch of steps of at least 0.2 s.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nest.h"
#include "peer.h"

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench/train: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the model ---- */

typedef struct model {
    const char *title;
    int in, h1, h2, out, batch;
} model;

static const model models[] = {
    {"digits MLP 64-256-256-10", 64, 256, 256, 10, 32},
    {"MLP 784-1024-1024-10", 784, 1024, 1024, 10, 64},
};
#define NMODELS (int)(sizeof models / sizeof models[0])

/* The module of samples/mlp.nest for any sizes: weights, velocities, and step(x, y, lr). */
static char *module_text(const model *m)
{
    static const char *const ws[3] = {"w1", "w2", "w3"}, *const bs[3] = {"b1", "b2", "b3"};
    static const char *const vs[3] = {"v1", "v2", "v3"}, *const us[3] = {"u1", "u2", "u3"};
    int dims[4] = {m->in, m->h1, m->h2, m->out}, B = m->batch;
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    for (int l = 0; l < 3; l++) {
        double bound = 1 / __builtin_sqrt((double)dims[l]);
        fprintf(f, "var %s: f32[%d,%d] = uniform(%.9g, %.9g, seed=%d)\n", ws[l], dims[l],
                dims[l + 1], -bound, bound, l + 1);
        fprintf(f, "var %s: f32[%d] = zeros\n", bs[l], dims[l + 1]);
        fprintf(f, "persistent %s: f32[%d,%d] = zeros\n", vs[l], dims[l], dims[l + 1]);
        fprintf(f, "persistent %s: f32[%d] = zeros\n", us[l], dims[l + 1]);
    }
    fprintf(f, "func step(x: f32[%d,%d], y: f32[%d,%d], lr: f32[]) -> f32[] {\n", B, m->in, B,
            m->out);
    const char *prev = "x";
    char h[3][8] = {"h1", "h2", "z"};
    for (int l = 0; l < 3; l++) {
        int n = dims[l + 1];
        if (l < 2)
            fprintf(f, "  %s = maximum(add(dot(%s, %s), broadcast(%s, shape=[%d,%d], axes=[0])), "
                       "broadcast(constant(f32[], 0), shape=[%d,%d], axes=[0,1]))\n",
                    h[l], prev, ws[l], bs[l], B, n, B, n);
        else
            fprintf(f, "  z = add(dot(%s, %s), broadcast(%s, shape=[%d,%d], axes=[0]))\n", prev,
                    ws[l], bs[l], B, n);
        prev = h[l];
    }
    fprintf(f, "  zs = subtract(z, broadcast(max(z, axes=[1]), shape=[%d,%d], axes=[1]))\n", B,
            m->out);
    fprintf(f, "  lse = broadcast(log(sum(exp(zs), axes=[1])), shape=[%d,%d], axes=[1])\n", B,
            m->out);
    fprintf(f, "  loss = divide(negative(sum(multiply(y, subtract(zs, lse)), axes=[0,1])), "
               "constant(f32[], %d))\n",
            B);
    fprintf(f, "  g = grad(loss, w1, b1, w2, b2, w3, b3)\n");
    for (int l = 0; l < 3; l++) {
        int a = dims[l], b = dims[l + 1];
        fprintf(f, "  n%s = add(multiply(broadcast(constant(f32[], 0.9), shape=[%d,%d], "
                   "axes=[0,1]), %s), get(g, %d))\n",
                vs[l], a, b, vs[l], 2 * l);
        fprintf(f, "  n%s = add(multiply(broadcast(constant(f32[], 0.9), shape=[%d], axes=[0]), "
                   "%s), get(g, %d))\n",
                us[l], b, us[l], 2 * l + 1);
        fprintf(f, "  assign(%s, n%s)\n  assign(%s, n%s)\n", vs[l], vs[l], us[l], us[l]);
        fprintf(f, "  assign(%s, subtract(%s, multiply(broadcast(lr, shape=[%d,%d], axes=[0,1]), "
                   "n%s)))\n",
                ws[l], ws[l], a, b, vs[l]);
        fprintf(f, "  assign(%s, subtract(%s, multiply(broadcast(lr, shape=[%d], axes=[0]), "
                   "n%s)))\n",
                bs[l], bs[l], b, us[l]);
    }
    fprintf(f, "  return loss\n}\n");
    fclose(f);
    return s;
}

typedef struct nest_case {
    nest_module *m;
    nest_kernel *k;
    nest_state *st;
    float *x, *y, lr;
} nest_case;

static void nest_setup(nest_case *c, const model *m, bool openmp)
{
    char *text = module_text(m);
    c->m = nest_parse(text, strlen(text), "mlp.nest");
    free(text);
    if (!c->m || nest_module_errcode(c->m))
        die("%s", c->m ? nest_module_errmsg(c->m) : "out of memory");
    nest_options o;
    nest_options_init(&o);
    o.openmp = openmp;
    nest_function *f = nest_module_find(c->m, "step");
    c->k = nest_compile(f, &o);
    if (!c->k)
        die("%s", nest_errmsg(f));
    c->st = nest_state_new(c->m);
    c->x = malloc((size_t)m->batch * (size_t)m->in * sizeof *c->x);
    c->y = calloc((size_t)m->batch * (size_t)m->out, sizeof *c->y);
    if (!c->st || !c->x || !c->y)
        die("out of memory");
    uint64_t s = 1;
    for (int i = 0; i < m->batch * m->in; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        c->x[i] = (float)(s >> 40) / (float)(1 << 24);
    }
    for (int i = 0; i < m->batch; i++)
        c->y[i * m->out + i % m->out] = 1;
    c->lr = 0.01f;
}

static void nest_step(nest_case *c)
{
    float loss;
    void *args[3] = {c->x, c->y, &c->lr}, *res[1] = {&loss};
    if (nest_call_state(c->k, c->st, args, 3, res, 1) != NEST_OK)
        die("%s", nest_kernel_errmsg(c->k));
}

static double nest_time(nest_case *c, double seconds)
{
    for (int n = 1;; n *= 2) {
        double t0 = now_s();
        for (int i = 0; i < n; i++)
            nest_step(c);
        double t = now_s() - t0;
        if (t >= seconds)
            return t / n;
    }
}

static void nest_free(nest_case *c)
{
    nest_kernel_free(c->k);
    nest_state_free(c->st);
    nest_module_free(c->m);
    free(c->x);
    free(c->y);
}

/* ---- the table ---- */

/* The 1-minute load average (from /proc/loadavg), or -1: the table says how busy the machine
 * was, since the figures of a shared machine move with its load. */
static double load_average(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

int main(int argc, char **argv)
{
    const char *report = NULL;
    bool quick = false;
    int nrounds = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            report = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc && atoi(argv[i + 1]) >= 1 &&
                 atoi(argv[i + 1]) <= 64)
            nrounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--print") && i + 1 < argc && atoi(argv[i + 1]) >= 0 &&
                 atoi(argv[i + 1]) < NMODELS) {
            char *text = module_text(&models[atoi(argv[++i])]);
            fputs(text, stdout);
            free(text);
            return 0;
        } else
            die("usage: train [-o REPORT.md] [--quick] [--rounds N] [--print MODEL]");
    }
    int rounds = nrounds ? nrounds : quick ? 3 : 7;
    double secs = quick ? 0.1 : 0.2;
    FILE *rep = report ? fopen(report, "a") : NULL;
    peer py;
    peer_start(&py, "bench/train_peers.py", "--serve");
    const char *info = peer_cmd(&py, "info");
    char torch_version[64];
    snprintf(torch_version, sizeof torch_version, "%s", info);
    char table[8192];
    double load0 = load_average();
    int tl = snprintf(table, sizeof table,
                      "\n## Training: one step (forward, backward, SGD with momentum), ms\n\n"
                      "nest's step is one compiled kernel; PyTorch (%s) runs eager. Medians of %d "
                      "rounds, contenders in turn.\n\n"
                      "| model | batch | threads | nest | PyTorch | PyTorch / nest |\n"
                      "|---|---|---|---|---|---|\n",
                      torch_version, rounds);
    for (int mi = 0; mi < NMODELS; mi++) {
        const model *m = &models[mi];
        for (int threads = 1; threads <= 2; threads++) {
            nest_case c;
            nest_setup(&c, m, threads > 1);
            const char *r = peer_cmd(&py, "setup %d %d %d %d %d %d", m->in, m->h1, m->h2, m->out,
                                     m->batch, threads);
            if (strcmp(r, "ok"))
                die("train_peers.py setup: %s", r);
            double tn[64], tp[64];
            for (int k = 0; k < rounds; k++) {
                tn[k] = nest_time(&c, secs);
                tp[k] = atof(peer_cmd(&py, "time %g", secs));
            }
            double n = median(tn, rounds) * 1e3, p = median(tp, rounds) * 1e3;
            tl += snprintf(table + tl, sizeof table - (size_t)tl,
                           "| %s | %d | %d | %.3f | %.3f | %.1fx |\n", m->title, m->batch, threads,
                           n, p, p / n);
            nest_free(&c);
        }
    }
    peer_stop(&py);
    tl += snprintf(table + tl, sizeof table - (size_t)tl,
                   "\nLoad average (1 minute) at the start and at the end: %.2f, %.2f.\n", load0,
                   load_average());
    fputs(table, stdout);
    if (rep) {
        fputs(table, rep);
        fclose(rep);
    }
    return 0;
}
