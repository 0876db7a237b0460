
/* ---- state files (nest_state_save, nest_state_load) ---- */

/* A module's state: f32, f64 and i32 tensors, one of them a scalar. */
static const char STATE_TEXT[] = "var w: f32[3,2] = uniform(-0.5, 0.5, seed=3)\n"
                                 "var b: f64[2] = normal(0, 0.1, seed=4)\n"
                                 "persistent v: f32[3,2] = zeros\n"
                                 "persistent n: i32[] = 7\n";

static nest_module *parse_state(const char *text)
{
    nest_module *m = nest_parse(text, strlen(text), "state.nest");
    assert_non_null(m);
    if (nest_module_errcode(m) != NEST_OK)
        fail_msg("%s", nest_module_errmsg(m));
    return m;
}

/* A state's tensors, all their bytes in order (malloc'd). */
static unsigned char *state_bytes(nest_state *st)
{
    unsigned char *b = malloc(nest_state_size(st) + 1), *p = b;
    assert_non_null(b);
    for (int i = 0; i < nest_state_count(st); i++) {
        size_t n = nest_type_size((nest_type)nest_state_type(st, i));
        for (int k = 0; k < nest_state_rank(st, i); k++)
            n *= (size_t)nest_state_shape(st, i)[k];
        memcpy(p, nest_state_data(st, i), n);
        p += n;
    }
    return b;
}

typedef struct state_fx {
    nest_module *m;
    nest_state *saved, *st; /* st: loaded into; its bytes `before` must survive every failure */
    unsigned char *before, *file;
    size_t len;
    char path[160], bad[160];
} state_fx;

static void state_setup(fixture *fx, state_fx *s)
{
    s->m = parse_state(STATE_TEXT);
    s->saved = nest_state_new(s->m);
    s->st = nest_state_new(s->m);
    assert_true(s->saved && s->st);
    *(int32_t *)nest_state_tensor(s->saved, "n") = 12345;
    float *v = nest_state_tensor(s->saved, "v");
    for (int i = 0; i < 6; i++)
        v[i] = (float)i - 2.5f;
    /* st holds other values */
    *(int32_t *)nest_state_tensor(s->st, "n") = -1;
    float *w = nest_state_tensor(s->st, "w");
    for (int i = 0; i < 6; i++)
        w[i] = 100.0f + (float)i;
    s->before = state_bytes(s->st);
    snprintf(s->path, sizeof s->path, "%s/model.state", fx->root);
    snprintf(s->bad, sizeof s->bad, "%s/bad.state", fx->root);
    assert_int_equal(nest_state_save(s->saved, s->path), NEST_OK);
    s->file = read_file(s->path, &s->len);
}

static void state_teardown(state_fx *s)
{
    free(s->before);
    free(s->file);
    nest_state_free(s->saved);
    nest_state_free(s->st);
    nest_module_free(s->m);
}

/* Loading `bad` fails with NEST_ERR_IO and a message naming it; st is unchanged. */
static void expect_load_fails(state_fx *s, nest_state *st, const unsigned char *before,
                              const char *what)
{
    int rc = nest_state_load(st, s->bad);
    if (rc != NEST_ERR_IO)
        fail_msg("%s: load gave %d (%s), not NEST_ERR_IO", what, rc, nest_state_errmsg(st));
    if (!strstr(nest_state_errmsg(st), s->bad))
        fail_msg("%s: the message does not name the file: %s", what, nest_state_errmsg(st));
    unsigned char *now = state_bytes(st);
    if (memcmp(now, before, nest_state_size(st)) != 0)
        fail_msg("%s: the state changed", what);
    free(now);
}

static void state_file_truncated_everywhere(void **state)
{
    state_fx s = {0};
    state_setup(*state, &s);
    for (size_t n = 0; n < s.len; n++) {
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu of %zu bytes", n, s.len);
        write_file(s.bad, s.file, n);
        expect_load_fails(&s, s.st, s.before, what);
    }
    /* and one byte too many */
    unsigned char *longer = malloc(s.len + 1);
    memcpy(longer, s.file, s.len);
    longer[s.len] = 0;
    write_file(s.bad, longer, s.len + 1);
    expect_load_fails(&s, s.st, s.before, "a byte appended");
    free(longer);
    /* the whole file loads */
    assert_int_equal(nest_state_load(s.st, s.path), NEST_OK);
    unsigned char *got = state_bytes(s.st), *want = state_bytes(s.saved);
    assert_memory_equal(got, want, nest_state_size(s.st));
    free(got);
    free(want);
    state_teardown(&s);
}

static void state_file_bit_flips(void **state)
{
    state_fx s = {0};
    state_setup(*state, &s);
    for (size_t i = 0; i < s.len * 8; i++) {
        char what[64];
        snprintf(what, sizeof what, "bit %zu of byte %zu flipped", i % 8, i / 8);
        s.file[i / 8] ^= (unsigned char)(1u << (i % 8));
        write_file(s.bad, s.file, s.len);
        s.file[i / 8] ^= (unsigned char)(1u << (i % 8));
        expect_load_fails(&s, s.st, s.before, what);
    }
    state_teardown(&s);
}

/* The state of another module: each difference is an error, and the state is unchanged. */
static void state_file_mismatched(void **state)
{
    static const struct {
        const char *text, *msg;
    } others[] = {
        {"var w: f32[3,2] = zeros\nvar b: f64[2] = zeros\npersistent v: f32[3,2] = zeros\n",
         "the file holds 4 tensors, the state 3"},
        {"var w: f32[2,3] = zeros\nvar b: f64[2] = zeros\npersistent v: f32[3,2] = zeros\n"
         "persistent n: i32[] = 0\n", "tensor 'w' has dimension 0 of 3 in the file, 2 in the state"},
        {"var w: f32[3,2] = zeros\nvar b: f32[2] = zeros\npersistent v: f32[3,2] = zeros\n"
         "persistent n: i32[] = 0\n", "tensor 'b' has type 1 and rank 1 in the file, 0 and 1"},
        {"var w: f32[3,2] = zeros\nvar b: f64[2] = zeros\npersistent v: f32[6] = zeros\n"
         "persistent n: i32[] = 0\n", "tensor 'v' has type 0 and rank 2 in the file, 0 and 1"},
        {"var w: f32[3,2] = zeros\nvar bias: f64[2] = zeros\npersistent v: f32[3,2] = zeros\n"
         "persistent n: i32[] = 0\n", "the file's tensor 2, 'b', is not in the state"},
    };
    state_fx s = {0};
    state_setup(*state, &s);
    assert_int_equal(nest_state_save(s.saved, s.bad), NEST_OK);
    for (size_t i = 0; i < countof(others); i++) {
        nest_module *m = parse_state(others[i].text);
        nest_state *st = nest_state_new(m);
        assert_non_null(st);
        unsigned char *before = state_bytes(st);
        expect_load_fails(&s, st, before, others[i].text);
        if (!strstr(nest_state_errmsg(st), others[i].msg))
            fail_msg("%s: %s", others[i].msg, nest_state_errmsg(st));
        free(before);
        nest_state_free(st);
        nest_module_free(m);
    }
    /* declared in another order: tensors match by name */
    nest_module *m = parse_state("persistent n: i32[] = 0\nvar b: f64[2] = zeros\n"
                                 "persistent v: f32[3,2] = zeros\nvar w: f32[3,2] = zeros\n");
    nest_state *st = nest_state_new(m);
    assert_int_equal(nest_state_load(st, s.path), NEST_OK);
    assert_int_equal(*(int32_t *)nest_state_tensor(st, "n"), 12345);
    assert_memory_equal(nest_state_tensor(st, "w"), nest_state_tensor(s.saved, "w"), 6 * 4);
    assert_memory_equal(nest_state_tensor(st, "b"), nest_state_tensor(s.saved, "b"), 2 * 8);
    nest_state_free(st);
    nest_module_free(m);
    state_teardown(&s);
}

/* Saving onto a disk that fills up at every size (RLIMIT_FSIZE, SIGXFSZ ignored: writes past it
 * fail with EFBIG): NEST_ERR_IO with a message, the file saved before intact, no temporary. */
static void state_file_disk_full(void **state)
{
    fixture *fx = *state;
    state_fx s = {0};
    state_setup(fx, &s);
    nest_state_tensor(s.st, "n"); /* st saves over the file of `saved` */
    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    for (size_t n = 0; n < s.len; n++) {
        struct rlimit lim = {(rlim_t)n, old.rlim_max};
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
        int rc = nest_state_save(s.st, s.path);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
        if (rc != NEST_ERR_IO)
            fail_msg("the disk full at %zu bytes: save gave %d (%s)", n, rc, nest_state_errmsg(s.st));
        assert_non_null(strstr(nest_state_errmsg(s.st), s.path));
        size_t len;
        unsigned char *now = read_file(s.path, &len);
        assert_int_equal(len, s.len);
        assert_memory_equal(now, s.file, s.len);
        free(now);
        assert_int_equal(count_files(fx->root), 2); /* xdg/ and the file: no temporary */
    }
    signal(SIGXFSZ, old_handler);
    /* with room, the save goes through */
    assert_int_equal(nest_state_save(s.st, s.path), NEST_OK);
    assert_int_equal(nest_state_load(s.saved, s.path), NEST_OK);
    unsigned char *got = state_bytes(s.saved);
    assert_memory_equal(got, s.before, nest_state_size(s.saved));
    free(got);
    state_teardown(&s);
}
