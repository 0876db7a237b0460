/*
 * train.c - the training table of `make bench`: the time of one training step (forward,
 * backward, SGD with momentum) of nest's compiled step kernel against PyTorch eager
 * (bench/train_peers.py), on 1 and 2 threads, measured in turn in one run.
 *
 *   train [-o REPORT.md] [--quick] [--cpu-time] [--rounds N] [--print MODEL]
 *         (--rounds: N rounds, at most 64, for a busy machine; --cpu-time: the one-thread rows
 *         in each side's process CPU time, which a busy machine takes less from than wall time;
 *         --print: model MODEL's text form)
 *
 * Models: the digits MLP of samples/ (64-256-256-10, batch 32), a 784-1024-1024-10 MLP at
 * batch 64 and LeNet-5 on 28x28 images at batch 32 (ReLU, max pooling), random data. nest's
 * step is generated from the same template as samples/mlp.nest and samples/cnn.nest: one
 * kernel per step, the update in place. "1t" compiles without OpenMP; "2t" with OpenMP on
 * two threads, and PyTorch gets torch.set_num_threads of the same. Each figure is the median
 * of several rounds; in each round every contender runs a batch of steps of at least 0.2 s,
 * in a one-thread round both on the same core, the cores in turn from round to round
 * (benchutil.h, round_core).
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

#include "benchutil.h"
#include "blascore.h"
#include "nest.h"
#include "peer.h"

/* ---- the model ---- */

typedef struct model {
    const char *title;
    int in, h1, h2, out, batch;
    bool lenet; /* LeNet-5 on [batch, 1, 28, 28] (in = 784, out = 10), not an MLP */
} model;

static const model models[] = {
    {"digits MLP 64-256-256-10", 64, 256, 256, 10, 32, false},
    {"MLP 784-1024-1024-10", 784, 1024, 1024, 10, 64, false},
    {"LeNet-5 on 28x28", 784, 0, 0, 10, 32, true},
};
#define NMODELS (int)(sizeof models / sizeof models[0])

/* The loss and the SGD-with-momentum update of samples/ for the scores z [B, out] and the n
 * weights ws (their velocities vs, shapes shapes[i]: "8,1,3,3"), into f. */
static void loss_and_update(FILE *f, int B, int out, int n, const char *const *ws,
                            const char *const *vs, const char *const *shapes)
{
    fprintf(f, "  zs = subtract(z, broadcast(max(z, axes=[1]), shape=[%d,%d], axes=[1]))\n", B, out);
    fprintf(f, "  lse = broadcast(log(sum(exp(zs), axes=[1])), shape=[%d,%d], axes=[1])\n", B, out);
    fprintf(f, "  loss = divide(negative(sum(multiply(y, subtract(zs, lse)), axes=[0,1])), "
               "constant(f32[], %d))\n",
            B);
    fprintf(f, "  g = grad(loss");
    for (int i = 0; i < n; i++)
        fprintf(f, ", %s", ws[i]);
    fprintf(f, ")\n");
    for (int i = 0; i < n; i++) {
        int rank = 1;
        for (const char *c = shapes[i]; *c; c++)
            rank += *c == ',';
        char axes[32] = "0";
        for (int k = 1; k < rank; k++)
            snprintf(axes + strlen(axes), sizeof axes - strlen(axes), ",%d", k);
        fprintf(f, "  n%s = add(multiply(broadcast(constant(f32[], 0.9), shape=[%s], axes=[%s]), "
                   "%s), get(g, %d))\n  assign(%s, n%s)\n",
                vs[i], shapes[i], axes, vs[i], i, vs[i], vs[i]);
        fprintf(f, "  assign(%s, subtract(%s, multiply(broadcast(lr, shape=[%s], axes=[%s]), "
                   "n%s)))\n",
                ws[i], ws[i], shapes[i], axes, vs[i]);
    }
    fprintf(f, "  return loss\n}\n");
}

/* LeNet-5 (ReLU, max pooling) on [B, 1, 28, 28]: conv 5x5 1 -> 6 padded to 28x28, pool 2;
 * conv 5x5 6 -> 16 (10x10), pool 2; dense 400 -> 120 -> 84 -> 10. */
static char *lenet_text(const model *m)
{
    static const char *const ws[] = {"k1", "c1", "k2", "c2", "w3", "b3", "w4", "b4", "w5", "b5"};
    static const char *const vs[] = {"vk1", "vc1", "vk2", "vc2", "v3", "u3", "v4", "u4", "v5", "u5"};
    static const char *const shapes[] = {"6,1,5,5", "6", "16,6,5,5", "16", "400,120", "120",
                                         "120,84", "84", "84,10", "10"};
    static const double fan[] = {25, 25, 150, 150, 400, 400, 120, 120, 84, 84};
    int B = m->batch;
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    for (int i = 0; i < 10; i++) {
        double bound = 1 / __builtin_sqrt(fan[i]);
        fprintf(f, "var %s: f32[%s] = uniform(%.9g, %.9g, seed=%d)\n", ws[i], shapes[i], -bound,
                bound, i + 1);
        fprintf(f, "persistent %s: f32[%s] = zeros\n", vs[i], shapes[i]);
    }
    fprintf(f, "func step(x: f32[%d,784], y: f32[%d,10], lr: f32[]) -> f32[] {\n", B, B);
    fprintf(f, "  img = reshape(x, shape=[%d,1,28,28])\n", B);
    fprintf(f, "  h1 = relu(add(convolution(img, k1, pad_below=[2,2], pad_above=[2,2]), "
               "broadcast(c1, shape=[%d,6,28,28], axes=[0,2,3])))\n",
            B);
    fprintf(f, "  p1 = max_pool(h1, window=[2,2], strides=[2,2])\n");
    fprintf(f, "  h2 = relu(add(convolution(p1, k2), broadcast(c2, shape=[%d,16,10,10], "
               "axes=[0,2,3])))\n",
            B);
    fprintf(f, "  p2 = reshape(max_pool(h2, window=[2,2], strides=[2,2]), shape=[%d,400])\n", B);
    fprintf(f, "  h3 = relu(add(dot(p2, w3), broadcast(b3, shape=[%d,120], axes=[0])))\n", B);
    fprintf(f, "  h4 = relu(add(dot(h3, w4), broadcast(b4, shape=[%d,84], axes=[0])))\n", B);
    fprintf(f, "  z = add(dot(h4, w5), broadcast(b5, shape=[%d,10], axes=[0]))\n", B);
    loss_and_update(f, B, 10, 10, ws, vs, shapes);
    fclose(f);
    return s;
}

/* The module of samples/mlp.nest for any sizes: weights, velocities, and step(x, y, lr). */
static char *module_text(const model *m)
{
    if (m->lenet)
        return lenet_text(m);
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
    char shapes[6][32];
    const char *names[6], *vels[6], *shp[6];
    for (int l = 0; l < 3; l++) {
        snprintf(shapes[2 * l], sizeof shapes[0], "%d,%d", dims[l], dims[l + 1]);
        snprintf(shapes[2 * l + 1], sizeof shapes[0], "%d", dims[l + 1]);
        names[2 * l] = ws[l];
        names[2 * l + 1] = bs[l];
        vels[2 * l] = vs[l];
        vels[2 * l + 1] = us[l];
        shp[2 * l] = shapes[2 * l];
        shp[2 * l + 1] = shapes[2 * l + 1];
    }
    loss_and_update(f, B, m->out, 6, names, vels, shp);
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

/* Seconds a step over a batch of steps of at least `seconds`: wall time, or the process's CPU
 * time (cpu). */
static double nest_time(nest_case *c, double seconds, bool cpu)
{
    for (int n = 1;; n *= 2) {
        double t0 = cpu ? cpu_s() : now_s();
        for (int i = 0; i < n; i++)
            nest_step(c);
        double t = (cpu ? cpu_s() : now_s()) - t0;
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

int main(int argc, char **argv)
{
    const char *report = NULL;
    bool quick = false, cpu_time = false;
    int nrounds = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            report = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--cpu-time"))
            cpu_time = true;
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
            die("usage: train [-o REPORT.md] [--quick] [--cpu-time] [--rounds N] [--print MODEL]");
    }
    int rounds = nrounds ? nrounds : quick ? 4 : 8; /* even: one median of each core */
    double secs = quick ? 0.1 : 0.2;
    FILE *rep = report ? fopen(report, "a") : NULL;
    char blas_note[320];
    blascore_force(blas_note, sizeof blas_note); /* before PyTorch loads OpenBLAS */
    peer py;
    peer_start(&py, "bench/train_peers.py", "--serve");
    const char *info = peer_cmd(&py, "info");
    char torch_version[64];
    snprintf(torch_version, sizeof torch_version, "%s", info);
    char table[8192];
    double load0 = load_1min();
    int tl = snprintf(table, sizeof table,
                      "\n## Training: one step (forward, backward, SGD with momentum), ms\n\n"
                      "nest's step is one compiled kernel; PyTorch (%s) runs eager. Medians of %d "
                      "rounds, contenders in turn, a one-thread round with both on the same core (the "
                      "cores in turn)%s. PyTorch's OpenBLAS: %s.\n\n"
                      "| model | batch | threads | nest | PyTorch | PyTorch / nest |\n"
                      "|---|---|---|---|---|---|\n",
                      torch_version, rounds,
                      cpu_time ? "; one-thread rows in CPU time of each side's process "
                                 "(--cpu-time), two-thread rows in wall time"
                               : "",
                      blas_note);
    for (int mi = 0; mi < NMODELS; mi++) {
        const model *m = &models[mi];
        for (int threads = 1; threads <= 2; threads++) {
            nest_case c;
            nest_setup(&c, m, threads > 1);
            const char *r = m->lenet ? peer_cmd(&py, "lenet %d %d", m->batch, threads)
                                     : peer_cmd(&py, "setup %d %d %d %d %d %d", m->in, m->h1,
                                                m->h2, m->out, m->batch, threads);
            if (strcmp(r, "ok"))
                die("train_peers.py setup: %s", r);
            double tn[64], tp[64];
            bool cpu = cpu_time && threads == 1;
            for (int k = 0; k < rounds; k++) {
                char core_arg[32]; /* both on the round's core */
                pin_round(threads, k, core_arg, sizeof core_arg);
                tn[k] = nest_time(&c, secs, cpu);
                tp[k] = atof(peer_cmd(&py, "time %g%s%s", secs, cpu ? " cpu" : "", core_arg));
            }
            pin_core(-1);
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
                   load_1min());
    fputs(table, stdout);
    if (rep) {
        fputs(table, rep);
        fclose(rep);
    }
    return 0;
}
