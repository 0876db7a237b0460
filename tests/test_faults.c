/*
 * test_faults.c - the compile cache under faults: entries truncated at every offset and with
 * every bit flipped, a writer killed in the middle of a write, a full disk (ENOSPC), a cache
 * directory that belongs to another user or that others can write, and eight processes
 * compiling the same graph at once. Writes fail through tests/faults.h. And state files
 * (nest_state_save, nest_state_load): truncated at every offset, every bit flipped, the state of
 * another module, a disk that fills up at every size of the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "faults.h"
#include "rt.h"
#include "util.h"

/* ---- fixture: a temporary directory, XDG_CACHE_HOME inside it ---- */

typedef struct fixture {
    char root[64];   /* mkdtemp */
    char xdg[96];    /* root/xdg */
    char cache[128]; /* root/xdg/nest: what rt_cache_dir() gives */
} fixture;

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx)
        return -1;
    snprintf(fx->root, sizeof fx->root, "/tmp/nest-faults-XXXXXX");
    if (!mkdtemp(fx->root)) {
        free(fx);
        return -1;
    }
    snprintf(fx->xdg, sizeof fx->xdg, "%s/xdg", fx->root);
    snprintf(fx->cache, sizeof fx->cache, "%s/nest", fx->xdg);
    mkdir(fx->xdg, 0700);
    setenv("XDG_CACHE_HOME", fx->xdg, 1);
    unsetenv("NEST_CACHE");
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    tu_rm_rf(fx->root);
    unsetenv("XDG_CACHE_HOME");
    free(fx);
    return 0;
}

/* Files in dir (entries and temporaries), or -1 if it cannot be read. */
static int count_files(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* The one file in dir whose name does not start with '.' (malloc'd). */
static char *only_entry(const char *dir)
{
    char cmd[256], line[512];
    snprintf(cmd, sizeof cmd, "ls '%s'", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *found = NULL;
    int n = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        n++;
        free(found);
        found = malloc(strlen(dir) + strlen(line) + 2);
        sprintf(found, "%s/%s", dir, line);
    }
    pclose(p);
    assert_int_equal(n, 1);
    return found;
}

static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *d = malloc(*n + 1);
    assert_non_null(d);
    assert_int_equal(fread(d, 1, *n, f), *n);
    fclose(f);
    return d;
}

static void write_file(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(d, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* ---- a graph to compile ---- */

static nest_function *make_graph(const char *name)
{
    nest_function *f = nest_function_new(name);
    nest_value x = nest_parameter(f, "x", NEST_F32, 2, SHAPE(4, 8), NEST_ROW_MAJOR);
    nest_value y = nest_parameter(f, "y", NEST_F32, 1, SHAPE(8), NEST_ROW_MAJOR);
    nest_value b = nest_broadcast(f, y, 2, SHAPE(4, 8), 1, SHAPE(0));
    nest_value r = nest_sum(f, nest_multiply(f, nest_add(f, x, b), x), 1, SHAPE(1));
    assert_ok(f, nest_return(f, 1, &r, NULL));
    return f;
}

static nest_options no_openmp(void)
{
    nest_options o;
    nest_options_init(&o);
    o.openmp = 0;
    return o;
}

/* Compiles f, calls it and checks the result against the interpreter. */
static nest_kernel *compile_check(nest_function *f, const nest_options *o)
{
    float x[32], y[8], want[4], got[4];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 8; i++)
        y[i] = (float)i * 0.5f;
    void *args[2] = {x, y}, *rw[1] = {want}, *rg[1] = {got};
    assert_ok(f, evaluate(f, args, rw));
    nest_kernel *k = nest_compile(f, o);
    if (!k) {
        if (nest_errcode(f) == NEST_ERR_UNAVAILABLE)
            skip();
        fail_msg("compile: %s", nest_errmsg(f));
    }
    assert_int_equal(nest_call(k, args, 2, rg, 1), NEST_OK);
    assert_close(NEST_F32, got, want, 4, 1e-5, 1e-5);
    return k;
}

/* ---- damaged entries: truncated at every offset, every bit flipped ---- */

static const char KEY[] = "nest-test key\0with a NUL inside";
static const unsigned char OBJ[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 9, 8, 7, 6, 5, 4, 3, 2, 1,
                                    0xff, 0x00, 0x55, 0xaa, 42};

/* Stores the test entry; returns its path (malloc'd) and its bytes in *whole (malloc'd). */
static char *store_entry(fixture *fx, unsigned char **whole, size_t *n)
{
    assert_int_equal(rt_cache_put(fx->cache, KEY, sizeof KEY, OBJ, sizeof OBJ), 0);
    char *path = only_entry(fx->cache);
    *whole = read_file(path, n);
    return path;
}

static void cache_truncated_everywhere(void **state)
{
    fixture *fx = *state;
    size_t n;
    unsigned char *whole;
    char *path = store_entry(fx, &whole, &n);
    for (size_t cut = 0; cut < n; cut++) {
        write_file(path, whole, cut);
        size_t len = 99;
        void *got = rt_cache_get(fx->cache, KEY, sizeof KEY, &len);
        if (got)
            fail_msg("an entry cut to %zu of %zu bytes was loaded", cut, n);
        assert_int_equal(len, 0);
        /* damaged: removed, so that the next store rebuilds it */
        assert_int_equal(access(path, F_OK), -1);
    }
    /* and whole again, it loads */
    write_file(path, whole, n);
    size_t len;
    void *got = rt_cache_get(fx->cache, KEY, sizeof KEY, &len);
    assert_non_null(got);
    assert_int_equal(len, sizeof OBJ);
    assert_memory_equal(got, OBJ, sizeof OBJ);
    free(got);
    /* trailing bytes are damage too */
    unsigned char *longer = calloc(n + 1, 1);
    memcpy(longer, whole, n);
    write_file(path, longer, n + 1);
    assert_null(rt_cache_get(fx->cache, KEY, sizeof KEY, &len));
    free(longer);
    free(whole);
    free(path);
}

static void cache_bit_flips(void **state)
{
    fixture *fx = *state;
    size_t n;
    unsigned char *whole;
    char *path = store_entry(fx, &whole, &n);
    int flips = 0;
    for (size_t i = 0; i < n; i++)
        for (int bit = 0; bit < 8; bit++) {
            whole[i] ^= (unsigned char)(1u << bit);
            write_file(path, whole, n);
            whole[i] ^= (unsigned char)(1u << bit);
            size_t len = 99;
            void *got = rt_cache_get(fx->cache, KEY, sizeof KEY, &len);
            if (got)
                fail_msg("an entry with bit %d of byte %zu flipped was loaded", bit, i);
            flips++;
        }
    assert_int_equal(flips, (int)n * 8);
    free(whole);
    free(path);
}

/* A damaged object through the whole path: recompiled and stored again, never loaded. */
static void cache_damaged_object_recompiled(void **state)
{
    fixture *fx = *state;
    nest_function *f = make_graph("g");
    nest_options o = no_openmp();
    nest_kernel *k = compile_check(f, &o);
    assert_false(nest_kernel_cache_hit(k));
    nest_kernel_free(k);
    char *path = only_entry(fx->cache);
    size_t n;
    unsigned char *whole = read_file(path, &n);
    /* one bit in the middle of the object, then one in its last byte */
    size_t at[2] = {n - n / 3, n - 1};
    for (int i = 0; i < 2; i++) {
        whole[at[i]] ^= 0x10;
        write_file(path, whole, n);
        whole[at[i]] ^= 0x10;
        k = compile_check(f, &o);
        assert_false(nest_kernel_cache_hit(k));
        nest_kernel_free(k);
        k = compile_check(f, &o); /* stored again, whole */
        assert_true(nest_kernel_cache_hit(k));
        nest_kernel_free(k);
    }
    free(whole);
    free(path);
    nest_function_free(f);
}

/* ---- a writer killed in the middle, a full disk ---- */

static void cache_writer_killed(void **state)
{
    fixture *fx = *state;
    size_t n;
    unsigned char *whole;
    char *path = store_entry(fx, &whole, &n);
    free(whole);
    assert_int_equal(unlink(path), 0);
    /* the child dies after writing `cut` bytes of the entry */
    for (size_t cut = 0; cut < n; cut += 7) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            failwrite_arm((long)cut, 0);
            rt_cache_put(fx->cache, KEY, sizeof KEY, OBJ, sizeof OBJ);
            _exit(3); /* not reached: the write ends the process */
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        /* no entry: only the dead writer's temporary file */
        size_t len;
        assert_null(rt_cache_get(fx->cache, KEY, sizeof KEY, &len));
        assert_int_equal(access(path, F_OK), -1);
    }
    int left = count_files(fx->cache);
    assert_true(left >= 1);
    /* a store removes the temporaries once they are an hour old, and only then */
    assert_int_equal(rt_cache_put(fx->cache, KEY, sizeof KEY, OBJ, sizeof OBJ), 0);
    assert_int_equal(count_files(fx->cache), left + 1);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "touch -d '2 hours ago' '%s'/.*.tmp", fx->cache);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(rt_cache_put(fx->cache, KEY, sizeof KEY, OBJ, sizeof OBJ), 0);
    assert_int_equal(count_files(fx->cache), 1);
    free(path);
}

static void cache_disk_full(void **state)
{
    fixture *fx = *state;
    nest_function *f = make_graph("g");
    nest_options o = no_openmp();
    /* the entry's size */
    nest_kernel *k = compile_check(f, &o);
    nest_kernel_free(k);
    char *path = only_entry(fx->cache);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(unlink(path), 0);
    free(path);
    long n = (long)st.st_size;
    /* the disk fills after some bytes of the entry: at once, in the header, in the key, in the
     * object; every compile succeeds, says why nothing was stored, and leaves no file */
    long at[] = {0, 1, 47, 48, n / 2, n - 1};
    for (size_t i = 0; i < countof(at); i++) {
        failwrite_arm(at[i], ENOSPC);
        k = compile_check(f, &o);
        failwrite_disarm();
        assert_false(nest_kernel_cache_hit(k));
        const char *note = nest_kernel_cache_note(k);
        if (!strstr(note, "No space left on device") || !strstr(note, fx->cache))
            fail_msg("disk full after %ld bytes: note \"%s\"", at[i], note);
        nest_kernel_free(k);
        assert_int_equal(count_files(fx->cache), 0);
    }
    /* room again: stored, then a hit */
    k = compile_check(f, &o);
    assert_false(nest_kernel_cache_hit(k));
    assert_string_equal(nest_kernel_cache_note(k), "");
    nest_kernel_free(k);
    k = compile_check(f, &o);
    assert_true(nest_kernel_cache_hit(k));
    nest_kernel_free(k);
    nest_function_free(f);
}

/* ---- directories that are not the user's own ---- */

/* Compiles with the cache at fx->cache, which must be refused with a note containing `why`:
 * the kernel works, and nothing is read from or written to the directory. */
static void expect_refused(fixture *fx, const char *target, const char *why)
{
    nest_function *f = make_graph("g");
    nest_options o = no_openmp();
    int before = count_files(target);
    for (int i = 0; i < 2; i++) {
        nest_kernel *k = compile_check(f, &o);
        assert_false(nest_kernel_cache_hit(k));
        const char *note = nest_kernel_cache_note(k);
        if (!strstr(note, why) || !strstr(note, fx->cache) || !strstr(note, "not using the cache"))
            fail_msg("note \"%s\", expected one with \"%s\"", note, why);
        nest_kernel_free(k);
    }
    assert_int_equal(count_files(target), before);
    nest_function_free(f);
}

static void cache_dir_of_another_user(void **state)
{
    fixture *fx = *state;
    char other[160];
    if (geteuid() == 0) {
        /* root can make a directory of another user */
        snprintf(other, sizeof other, "%s/theirs", fx->root);
        assert_int_equal(mkdir(other, 0755), 0);
        assert_int_equal(chown(other, 65534, 65534), 0);
    } else {
        snprintf(other, sizeof other, "/"); /* root's, and not writable by us anyway */
    }
    assert_int_equal(symlink(other, fx->cache), 0);
    expect_refused(fx, other, "belongs to user");
}

static void cache_dir_writable_by_others(void **state)
{
    fixture *fx = *state;
    static const mode_t modes[] = {0777, 01777, 0770, 0720};
    static const char *const whom[] = {"every user", "every user", "its group", "its group"};
    for (size_t i = 0; i < countof(modes); i++) {
        assert_int_equal(mkdir(fx->cache, 0700), 0);
        assert_int_equal(chmod(fx->cache, modes[i]), 0);
        expect_refused(fx, fx->cache, whom[i]);
        assert_int_equal(rmdir(fx->cache), 0);
    }
    /* a symlink to a directory of our own is fine */
    char mine[160];
    snprintf(mine, sizeof mine, "%s/mine", fx->root);
    assert_int_equal(mkdir(mine, 0700), 0);
    assert_int_equal(symlink(mine, fx->cache), 0);
    nest_function *f = make_graph("g");
    nest_options o = no_openmp();
    nest_kernel *k = compile_check(f, &o);
    assert_string_equal(nest_kernel_cache_note(k), "");
    nest_kernel_free(k);
    assert_int_equal(count_files(mine), 1);
    nest_function_free(f);
}

/* An entry that is a symlink, or a file of another user, is never loaded. */
static void cache_entry_not_ours(void **state)
{
    fixture *fx = *state;
    assert_int_equal(rt_cache_put(fx->cache, KEY, sizeof KEY, OBJ, sizeof OBJ), 0);
    char *path = only_entry(fx->cache);
    char moved[200];
    snprintf(moved, sizeof moved, "%s/elsewhere", fx->root);
    assert_int_equal(rename(path, moved), 0);
    assert_int_equal(symlink(moved, path), 0);
    size_t len;
    assert_null(rt_cache_get(fx->cache, KEY, sizeof KEY, &len));
    assert_int_equal(access(moved, F_OK), 0); /* and the target is left alone */
    if (geteuid() == 0) {
        assert_int_equal(unlink(path), 0);
        assert_int_equal(rename(moved, path), 0);
        assert_int_equal(chown(path, 65534, 65534), 0);
        assert_null(rt_cache_get(fx->cache, KEY, sizeof KEY, &len));
    }
    free(path);
}

/* ---- eight processes compiling the same graph at once ---- */

static void cache_eight_processes(void **state)
{
    fixture *fx = *state;
    enum { KIDS = 8 };
    /* a graph (so a source) unique to this run: no other test's entry can stand in */
    char name[32];
    snprintf(name, sizeof name, "g%ld", (long)getpid());
    nest_function *f = make_graph(name);
    nest_options o = no_openmp();
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t pids[KIDS];
    for (int k = 0; k < KIDS; k++) {
        pids[k] = fork();
        assert_true(pids[k] >= 0);
        if (pids[k] == 0) {
            close(go[1]);
            char b;
            if (read(go[0], &b, 1) != 0) /* wait until the parent closes the pipe */
                _exit(3);
            float x[32], y[8], want[4], got[4];
            for (int i = 0; i < 32; i++)
                x[i] = (float)(i % 5);
            for (int i = 0; i < 8; i++)
                y[i] = (float)i;
            void *args[2] = {x, y}, *rw[1] = {want}, *rg[1] = {got};
            if (nest_evaluate(f, args, 2, rw, 1) != NEST_OK)
                _exit(1);
            nest_kernel *kn = nest_compile(f, &o);
            if (!kn || nest_call(kn, args, 2, rg, 1) != NEST_OK)
                _exit(1);
            int ok = memcmp(got, want, sizeof got) == 0 && !nest_kernel_cache_note(kn)[0];
            nest_kernel_free(kn);
            _exit(ok ? 0 : 2);
        }
    }
    close(go[0]);
    close(go[1]); /* all start now */
    for (int k = 0; k < KIDS; k++) {
        int status;
        assert_int_equal(waitpid(pids[k], &status, 0), pids[k]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_int_equal(count_files(fx->cache), 1); /* one entry, no temporaries */
    nest_kernel *k = compile_check(f, &o);
    assert_true(nest_kernel_cache_hit(k));
    nest_kernel_free(k);
    nest_function_free(f);
}

/* ---- state files (nest_state_save, nest_state_load) ---- */

/* A module's state: f32, f64 and i32 tensors, one of them a scalar. */
static const char STATE_TEXT[] = "var w: f32[3,2] = uniform(-0.5, 0.5, seed=3)\n"
                                 "var b: f64[2] = normal(0, 0.1, seed=4)\n"
                                 "persistent v: f32[3,2] = zeros\n"
                                 "persistent n: i32[] = 7\n";

#define parse_state(text) tu_parse((text), "state.nest")

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
    s->before = tu_state_bytes(s->st);
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
    unsigned char *now = tu_state_bytes(st);
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
    unsigned char *got = tu_state_bytes(s.st), *want = tu_state_bytes(s.saved);
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
         "the file's tensor 4, 'n', is not in the state"},
        {"var w: f32[3,2] = zeros\nvar b: f64[2] = zeros\npersistent v: f32[3,2] = zeros\n"
         "persistent n: i32[] = 0\npersistent more: i64[] = 0\n",
         "tensor 'more' of the state is not in the file"},
        {"var w: f32[2,3] = zeros\nvar b: f64[2] = zeros\npersistent v: f32[3,2] = zeros\n"
         "persistent n: i32[] = 0\n", "tensor 'w' has dimension 0 of 3 in the file, 2 in the state"},
        {"var w: f32[3,2] = zeros\nvar b: f32[2] = zeros\npersistent v: f32[3,2] = zeros\n"
         "persistent n: i32[] = 0\n", "tensor 'b' is f64 in the file, f32 in the state"},
        {"var w: f32[3,2] = zeros\nvar b: f64[2] = zeros\npersistent v: f32[6] = zeros\n"
         "persistent n: i32[] = 0\n", "tensor 'v' has rank 2 in the file, 1 in the state"},
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
        unsigned char *before = tu_state_bytes(st);
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
 * fail with EFBIG): NEST_ERR_IO with a message naming the file and the reason (strerror), the
 * file saved before intact, no temporary. */
static void state_file_disk_full(void **state)
{
    fixture *fx = *state;
    state_fx s = {0};
    state_setup(fx, &s);
    /* st saves over the file of `saved` */
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
        if (!strstr(nest_state_errmsg(s.st), s.path) ||
            !strstr(nest_state_errmsg(s.st), strerror(EFBIG)))
            fail_msg("the disk full at %zu bytes: %s", n, nest_state_errmsg(s.st));
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
    unsigned char *got = tu_state_bytes(s.saved);
    assert_memory_equal(got, s.before, nest_state_size(s.saved));
    free(got);
    state_teardown(&s);
}

/* A file that cannot be opened or created: the message says why (strerror), the state is
 * unchanged. */
static void state_file_unreachable(void **state)
{
    fixture *fx = *state;
    state_fx s = {0};
    state_setup(fx, &s);
    char path[200];
    snprintf(path, sizeof path, "%s/none/model.state", fx->root);
    assert_int_equal(nest_state_load(s.st, path), NEST_ERR_IO);
    char want[400];
    snprintf(want, sizeof want, "cannot open %s: %s", path, strerror(ENOENT));
    assert_string_equal(nest_state_errmsg(s.st), want);
    unsigned char *now = tu_state_bytes(s.st);
    assert_memory_equal(now, s.before, nest_state_size(s.st));
    free(now);
    assert_int_equal(nest_state_save(s.st, path), NEST_ERR_IO);
    snprintf(want, sizeof want, "cannot create %s.tmp: %s", path, strerror(ENOENT));
    assert_string_equal(nest_state_errmsg(s.st), want);
    /* a directory where the file should be: the rename fails, no temporary stays */
    snprintf(path, sizeof path, "%s/dir.state", fx->root);
    assert_int_equal(mkdir(path, 0700), 0);
    char inner[240];
    snprintf(inner, sizeof inner, "%s/x", path);
    write_file(inner, "x", 1);
    assert_int_equal(nest_state_save(s.st, path), NEST_ERR_IO);
    snprintf(want, sizeof want, "writing %s: %s", path, strerror(EISDIR));
    assert_string_equal(nest_state_errmsg(s.st), want);
    assert_int_equal(count_files(fx->root), 3); /* xdg/, model.state, dir.state/ */
    assert_int_equal(nest_state_load(s.st, path), NEST_ERR_IO);
    assert_non_null(strstr(nest_state_errmsg(s.st), path));
    state_teardown(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* first: the children fork a process with a single thread */
        cmocka_unit_test_setup_teardown(cache_eight_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_writer_killed, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_truncated_everywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_bit_flips, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_damaged_object_recompiled, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_disk_full, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_dir_of_another_user, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_dir_writable_by_others, setup, teardown),
        cmocka_unit_test_setup_teardown(cache_entry_not_ours, setup, teardown),
        cmocka_unit_test_setup_teardown(state_file_truncated_everywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(state_file_bit_flips, setup, teardown),
        cmocka_unit_test_setup_teardown(state_file_mismatched, setup, teardown),
        cmocka_unit_test_setup_teardown(state_file_disk_full, setup, teardown),
        cmocka_unit_test_setup_teardown(state_file_unreachable, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
