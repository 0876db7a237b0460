/*
 * train.c - trains a model of samples/ (mlp.nest) on the 8x8 digits that scikit-learn ships,
 * with one compiled kernel per training step.
 *
 *   train MODEL.nest [--epochs N] [--steps N] [--lr X] [--data FILE.csv.gz]
 *                    [--init FILE] [--losses FILE] [--order FILE] [--save FILE] [--one-core] [-q]
 *
 * The module declares the weights and the velocities of SGD with momentum as state, and two
 * functions: step(x: f32[32,64], y: f32[32,10], lr: f32[]) -> f32[] (one training step, which
 * returns the batch's loss before the update) and predict(x: f32[297,64]) -> f32[297,10]. Both
 * are compiled in process and share one state object.
 *
 * The 1797 images (pixels / 16) are shuffled with a fixed seed: the first 1500 train, the last
 * 297 test. Epoch e visits the training images in the order of a Fisher-Yates shuffle driven by
 * splitmix64 seeded with e, 46 batches of 32. --init writes the initial state (the format of
 * docs/api.md), --losses each step's loss (one per line) and --order each step's 32 image
 * indexes (one line per step), which is what tests/test_train.py replays in PyTorch.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "nest.h"

#define NIMG 1797
#define NTRAIN 1500
#define NTEST 297
#define BATCH 32
#define DIGITS_CSV "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"

static float images[NIMG][64];
static int labels[NIMG];

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void shuffle(int *v, int n, uint64_t seed)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(splitmix(&seed) % (uint64_t)(i + 1));
        int t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* Reads the 1797 lines of 64 pixels and a label, in a fixed shuffled order. */
static int load_digits(const char *path)
{
    gzFile in = gzopen(path, "rb");
    if (!in) {
        fprintf(stderr, "train: cannot read %s (Debian's python3-sklearn ships it)\n", path);
        return 1;
    }
    static float raw[NIMG][64];
    static int rawlab[NIMG];
    char line[1024];
    int n = 0;
    while (n < NIMG && gzgets(in, line, sizeof line)) {
        char *p = line;
        for (int k = 0; k < 65; k++) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v > 16) {
                fprintf(stderr, "train: %s: line %d is not 64 pixels and a label\n", path, n + 1);
                gzclose(in);
                return 1;
            }
            if (k < 64)
                raw[n][k] = (float)v / 16;
            else
                rawlab[n] = (int)v;
            p = end + (*end == ',');
        }
        n++;
    }
    gzclose(in);
    if (n != NIMG) {
        fprintf(stderr, "train: %s has %d images, not %d\n", path, n, NIMG);
        return 1;
    }
    int order[NIMG];
    for (int i = 0; i < NIMG; i++)
        order[i] = i;
    shuffle(order, NIMG, 12345);
    for (int i = 0; i < NIMG; i++) {
        memcpy(images[i], raw[order[i]], sizeof images[i]);
        labels[i] = rawlab[order[i]];
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return s;
}

/* The share of test images whose highest score is their label. */
static double accuracy(nest_kernel *predict, nest_state *st)
{
    static float scores[NTEST][10];
    void *args[1] = {images[NTRAIN]}, *res[1] = {scores};
    if (nest_call_state(predict, st, args, 1, res, 1) != NEST_OK) {
        fprintf(stderr, "train: predict: %s\n", nest_kernel_errmsg(predict));
        exit(1);
    }
    int right = 0;
    for (int i = 0; i < NTEST; i++) {
        int best = 0;
        for (int k = 1; k < 10; k++)
            if (scores[i][k] > scores[i][best])
                best = k;
        right += best == labels[NTRAIN + i];
    }
    return (double)right / NTEST;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *data = DIGITS_CSV, *init = NULL, *losses = NULL, *orderf = NULL,
               *save = NULL;
    int epochs = 10, max_steps = -1;
    float lr = 0.05f;
    bool quiet = false;
    nest_options opts;
    nest_options_init(&opts);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--epochs") && v)
            epochs = atoi(argv[++i]);
        else if (!strcmp(a, "--steps") && v)
            max_steps = atoi(argv[++i]);
        else if (!strcmp(a, "--lr") && v)
            lr = (float)atof(argv[++i]);
        else if (!strcmp(a, "--data") && v)
            data = argv[++i];
        else if (!strcmp(a, "--init") && v)
            init = argv[++i];
        else if (!strcmp(a, "--losses") && v)
            losses = argv[++i];
        else if (!strcmp(a, "--order") && v)
            orderf = argv[++i];
        else if (!strcmp(a, "--save") && v)
            save = argv[++i];
        else if (!strcmp(a, "--one-core"))
            opts.openmp = 0;
        else if (!strcmp(a, "-q"))
            quiet = true;
        else if (a[0] != '-' && !model)
            model = a;
        else {
            fprintf(stderr, "usage: train MODEL.nest [--epochs N] [--steps N] [--lr X] [--data "
                            "FILE] [--init FILE] [--losses FILE] [--order FILE] [--save FILE] [--one-core] [-q]\n");
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "usage: train MODEL.nest [options]\n");
        return 2;
    }
    if (load_digits(data))
        return 1;
    size_t len;
    char *text = read_file(model, &len);
    if (!text) {
        fprintf(stderr, "train: cannot read %s\n", model);
        return 1;
    }
    nest_module *m = nest_parse(text, len, model);
    free(text);
    if (!m || nest_module_errcode(m)) {
        fprintf(stderr, "%s\n", m ? nest_module_errmsg(m) : "out of memory");
        return 1;
    }
    nest_function *fstep = nest_module_find(m, "step"), *fpred = nest_module_find(m, "predict");
    if (!fstep || !fpred) {
        fprintf(stderr, "train: %s needs functions step and predict\n", model);
        return 1;
    }
    double t0 = now_ms();
    nest_kernel *kstep = nest_compile(fstep, &opts), *kpred = kstep ? nest_compile(fpred, &opts) : NULL;
    if (!kstep || !kpred) {
        fprintf(stderr, "train: %s\n", nest_errmsg(kstep ? fpred : fstep));
        return 1;
    }
    double compile_ms = now_ms() - t0;
    nest_state *st = nest_state_new(m);
    if (!st) {
        fprintf(stderr, "train: %s\n", nest_module_errmsg(m));
        return 1;
    }
    if (init && nest_state_save(st, init) != NEST_OK) {
        fprintf(stderr, "train: %s\n", nest_state_errmsg(st));
        return 1;
    }
    FILE *lf = losses ? fopen(losses, "w") : NULL, *of = orderf ? fopen(orderf, "w") : NULL;
    if ((losses && !lf) || (orderf && !of)) {
        fprintf(stderr, "train: cannot write %s\n", lf ? orderf : losses);
        return 1;
    }
    static float x[BATCH][64], y[BATCH][10];
    float loss = 0;
    void *args[3] = {x, y, &lr}, *res[1] = {&loss};
    int steps = 0, per_epoch = NTRAIN / BATCH;
    double train_ms = 0;
    for (int e = 0; e < epochs && (max_steps < 0 || steps < max_steps); e++) {
        int order[NTRAIN];
        for (int i = 0; i < NTRAIN; i++)
            order[i] = i;
        shuffle(order, NTRAIN, (uint64_t)e);
        double sum = 0;
        int n = 0;
        for (int b = 0; b < per_epoch && (max_steps < 0 || steps < max_steps); b++) {
            memset(y, 0, sizeof y);
            for (int i = 0; i < BATCH; i++) {
                int k = order[b * BATCH + i];
                memcpy(x[i], images[k], sizeof x[i]);
                y[i][labels[k]] = 1;
                if (of)
                    fprintf(of, "%d%c", k, i + 1 < BATCH ? ' ' : '\n');
            }
            double s0 = now_ms();
            if (nest_call_state(kstep, st, args, 3, res, 1) != NEST_OK) {
                fprintf(stderr, "train: step: %s\n", nest_kernel_errmsg(kstep));
                return 1;
            }
            train_ms += now_ms() - s0;
            if (lf)
                fprintf(lf, "%.9g\n", loss);
            sum += loss;
            n++;
            steps++;
        }
        if (!quiet)
            printf("epoch %2d: mean loss %.4f, test accuracy %.1f%%\n", e + 1, sum / (n ? n : 1),
                   100 * accuracy(kpred, st));
    }
    double acc = accuracy(kpred, st);
    printf("test accuracy %.1f%% (%d/%d) after %d steps of batch %d; %.1f ms of training "
           "(%.3f ms a step), compiled in %.0f ms\n",
           100 * acc, (int)(acc * NTEST + 0.5), NTEST, steps, BATCH, train_ms,
           steps ? train_ms / steps : 0, compile_ms);
    if (save && nest_state_save(st, save) != NEST_OK) {
        fprintf(stderr, "train: %s\n", nest_state_errmsg(st));
        return 1;
    }
    if (lf)
        fclose(lf);
    if (of)
        fclose(of);
    nest_state_free(st);
    nest_kernel_free(kstep);
    nest_kernel_free(kpred);
    nest_module_free(m);
    return 0;
}
