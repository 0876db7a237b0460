/*
 * test_grad_random.c - gradients of random graphs against central finite differences.
 *
 * The graphs are those of tests/test_random.c's generator (element-wise math, comparisons and
 * select, convert, broadcast, reshape, slice, concat, reductions, dot, tuples), moved to f64:
 * the canonical text of each graph with f32 replaced by f64 and column-major layouts dropped
 * (neither changes what is computed). The loss is the sum of every float result times a
 * random constant; nest_grad gives its gradient with respect to every float parameter, which
 * the reference interpreter evaluates at random points of the generator's domains. Each
 * checked element must match (loss(x + h) - loss(x - h)) / 2h, unless the two one-sided
 * differences disagree: then x is within h of a jump or a kink (a comparison, a conversion to
 * an integer, a tie of maximum) and the element is skipped. Every fourth graph is also
 * compiled, its gradients checked against the interpreter's.
 */
#include <ctype.h>

#define NEST_RANDOM_GENERATOR_ONLY
#include "test_random.c"

/* Replaces the word `from` by `to` (same length) and drops the word " col" in place. */
static void to_f64(char *s)
{
    size_t n = strlen(s), k = 0;
    for (size_t i = 0; i < n; i++) {
        bool start = i == 0 || !(isalnum((unsigned char)s[i - 1]) || s[i - 1] == '_');
        if (start && strncmp(s + i, "f32", 3) == 0 && !(isalnum((unsigned char)s[i + 3]) || s[i + 3] == '_')) {
            memcpy(s + k, "f64", 3);
            k += 3;
            i += 2;
            continue;
        }
        if (strncmp(s + i, " col", 4) == 0 && !(isalnum((unsigned char)s[i + 4]) || s[i + 4] == '_')) {
            i += 3;
            continue;
        }
        s[k++] = s[i];
    }
    s[k] = '\0';
}

typedef struct stats {
    int graphs, checked, skipped, compiled;
} stats;

static double eval_loss(nest_function *lf, void **args, int np)
{
    double l = NAN;
    void *res[1] = {&l};
    if (nest_evaluate(lf, args, np, res, 1) != NEST_OK)
        return NAN;
    return l;
}

/* Builds the loss of the graph's float results in f; returns it, or NEST_NONE if none. */
static nest_value loss_of(nest_function *f, rng *r)
{
    nest_value loss = NEST_NONE;
    for (int i = 0; i < nest_result_count(f); i++) {
        nest_value v = nest_result(f, i);
        if (nest_value_type(f, v) != NEST_F64)
            continue;
        int rank = nest_value_rank(f, v);
        const int64_t *shape = nest_value_shape(f, v);
        int64_t n = 1, axes[MAXRANK];
        for (int k = 0; k < rank; k++) {
            n *= shape[k];
            axes[k] = k;
        }
        double *w = malloc((size_t)n * sizeof *w + 8);
        for (int64_t e = 0; e < n; e++)
            w[e] = (double)(next(r) >> 11) * 0x1p-53 * 2 - 1;
        nest_value t = nest_multiply(f, v, nest_constant(f, NEST_F64, rank, shape, w, n));
        free(w);
        if (rank)
            t = nest_sum(f, t, rank, axes);
        loss = loss < 0 ? t : nest_add(f, loss, t);
    }
    return loss;
}

static void check_graph(uint64_t seed, stats *st)
{
    gen *g = calloc(1, sizeof *g);
    generate(g, seed);
    if (g->broken) {
        nest_function_free(g->f);
        free(g);
        return;
    }
    char *text = nest_print(&g->f, 1);
    assert_non_null(text);
    to_f64(text);
    domain doms[MAXPARAMS];
    int np = g->np;
    memcpy(doms, g->params, sizeof doms);
    nest_function_free(g->f);
    free(g);
    /* twice: the loss alone (for the differences), and the loss with its gradient */
    nest_module *ml = nest_parse(text, strlen(text), "g.nest"), *mg = nest_parse(text, strlen(text), "g.nest");
    if (nest_module_errcode(ml))
        print_error("seed %llu: %s\n%s\n", (unsigned long long)seed, nest_module_errmsg(ml), text);
    assert_int_equal(nest_module_errcode(ml), NEST_OK);
    nest_function *lf = nest_module_function(ml, 0), *gf = nest_module_function(mg, 0);
    rng r = {seed ^ 0x9e3779b97f4a7c15u};
    rng r2 = r;
    nest_value ll = loss_of(lf, &r), gl = loss_of(gf, &r2);
    int nw = 0;
    nest_value wrt[MAXPARAMS];
    int widx[MAXPARAMS];
    for (int i = 0; i < np; i++)
        if (nest_value_type(gf, nest_param(gf, i)) == NEST_F64) {
            widx[nw] = i;
            wrt[nw++] = nest_param(gf, i);
        }
    if (ll < 0 || nw == 0) {
        nest_module_free(ml);
        nest_module_free(mg);
        free(text);
        return;
    }
    assert_ok(lf, nest_return(lf, 1, &ll, NULL));
    nest_value grads = nest_grad(gf, gl, nw, wrt);
    if (grads < 0)
        print_error("seed %llu: %s\n%s\n", (unsigned long long)seed, nest_errmsg(gf), text);
    assert_value(gf, grads);
    nest_value outs[1 + MAXPARAMS] = {gl};
    for (int i = 0; i < nw; i++)
        outs[1 + i] = nest_get(gf, grads, i);
    assert_ok(gf, nest_return(gf, 1 + nw, outs, NULL));
    st->graphs++;
    /* arguments: continuous random points of the generator's domains */
    void *args[MAXPARAMS];
    int64_t counts[MAXPARAMS];
    rng vr = {seed * 7 + 1};
    for (int i = 0; i < np; i++) {
        nest_value p = nest_param(lf, i);
        int t = nest_value_type(lf, p);
        counts[i] = 1;
        for (int k = 0; k < nest_value_rank(lf, p); k++)
            counts[i] *= nest_value_shape(lf, p)[k];
        args[i] = calloc((size_t)counts[i] + 1, 8);
        for (int64_t e = 0; e < counts[i]; e++) {
            double u = (double)(next(&vr) >> 11) * 0x1p-53;
            double x = doms[i].lo + (doms[i].hi - doms[i].lo) * u;
            if (t == NEST_F64)
                ((double *)args[i])[e] = x;
            else
                store_elem((nest_type)t, args[i], e, draw(&vr, &doms[i]));
        }
    }
    double *res[1 + MAXPARAMS], loss;
    res[0] = &loss;
    for (int i = 0; i < nw; i++)
        res[1 + i] = malloc((size_t)counts[widx[i]] * 8 + 8);
    assert_ok(gf, nest_evaluate(gf, args, np, (void **)res, 1 + nw));
    double l0 = eval_loss(lf, args, np);
    if (!isfinite(l0) || !isfinite(loss))
        goto done;
    assert_close(NEST_F64, &loss, &l0, 1, 1e-12, 1e-12);
    for (int i = 0; i < nw; i++) {
        double *x = args[widx[i]];
        for (int64_t e = 0; e < counts[widx[i]] && e < 48; e++) {
            double x0 = x[e], h = 1e-6 * fmax(1, fabs(x0));
            x[e] = x0 + h;
            double up = eval_loss(lf, args, np);
            x[e] = x0 - h;
            double down = eval_loss(lf, args, np);
            x[e] = x0;
            double fd = (up - down) / (2 * h), fu = (up - l0) / h, fl = (l0 - down) / h;
            double scale = 1 + fabs(fd) + 1e-6 * fabs(l0) / h;
            if (!isfinite(fd) || fabs(fu - fl) > 1e-3 * scale) { /* a jump or a kink */
                st->skipped++;
                continue;
            }
            st->checked++;
            double gv = res[1 + i][e];
            if (!(fabs(gv - fd) <= 1e-5 * scale)) {
                print_error("seed %llu: d loss / d p%d[%lld]: nest_grad %.12g, finite "
                            "differences %.12g (one-sided %.12g, %.12g)\n%s\n",
                            (unsigned long long)seed, widx[i], (long long)e, gv, fd, fu, fl, text);
                fail();
            }
        }
    }
    if (seed % 4 == 0) { /* the compiled gradient graph */
        nest_kernel *k = nest_compile(gf, NULL);
        if (!k)
            print_error("seed %llu: %s\n", (unsigned long long)seed, nest_errmsg(gf));
        assert_non_null(k);
        double *got[1 + MAXPARAMS], kl;
        got[0] = &kl;
        for (int i = 0; i < nw; i++)
            got[1 + i] = malloc((size_t)counts[widx[i]] * 8 + 8);
        assert_int_equal(nest_call(k, args, np, (void **)got, 1 + nw), NEST_OK);
        for (int i = 0; i < nw; i++) {
            for (int64_t e = 0; e < counts[widx[i]]; e++) {
                double a = got[1 + i][e], b = res[1 + i][e];
                if (!(a == b || fabs(a - b) <= 1e-9 * (1 + fabs(b)) || (isnan(a) && isnan(b)))) {
                    print_error("seed %llu: compiled d loss / d p%d[%lld] is %.17g, the "
                                "interpreter's %.17g\n%s\n",
                                (unsigned long long)seed, widx[i], (long long)e, a, b, text);
                    fail();
                }
            }
            free(got[1 + i]);
        }
        nest_kernel_free(k);
        st->compiled++;
    }
done:
    for (int i = 0; i < np; i++)
        free(args[i]);
    for (int i = 0; i < nw; i++)
        free(res[1 + i]);
    nest_module_free(ml);
    nest_module_free(mg);
    free(text);
}

static void random_graphs(void **state)
{
    (void)state;
    const char *count = getenv("NEST_GRAD_COUNT"), *first = getenv("NEST_GRAD_SEED");
    uint64_t n = count && *count ? strtoull(count, NULL, 10) : 300;
    uint64_t s0 = first && *first ? strtoull(first, NULL, 10) : 1;
    stats st = {0};
    for (uint64_t s = s0; s < s0 + n; s++)
        check_graph(s, &st);
    print_message("%d graphs, %d gradient elements checked, %d skipped (within h of a jump or "
                  "a kink), %d graphs compiled\n",
                  st.graphs, st.checked, st.skipped, st.compiled);
    assert_true(st.checked > 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
