/* The state of a module: initializers and state files. This text is printed into the generated
 * C of every module with state, and compiled into libnest for nest_state: one source for both.
 * It is plain C99 over <errno.h>, <math.h>, <stdio.h>, <stdlib.h> and <string.h>. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One tensor of a state. */
typedef struct nest_st_desc {
    const char *name;
    int type;              /* 0 f32, 1 f64, 2 i32, 3 i64, 4 bool (nest_type) */
    int rank;
    const int64_t *shape;
    int64_t count;         /* elements */
    int init;              /* 0 zeros, 1 the constant a, 2 uniform in [a, b), 3 normal(a, b),
                              4 the elements at data */
    double a, b;
    uint64_t seed;
    const void *data;      /* init 4: count elements of the type */
} nest_st_desc;

static size_t nest_st_esize(int type) { return type == 1 || type == 3 ? 8 : type == 4 ? 1 : 4; }

/* ---- the generator: element i of a tensor depends on its seed and i only ---- */

/* Output i (from 0) of splitmix64 seeded with `seed`. */
static uint64_t nest_st_bits(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* x rounded to double: through a volatile, so that no compiler fuses it into the next operation
 * (a contracted multiply-add would round once instead of twice, on some machines only). */
static double nest_st_r(double x)
{
    volatile double v = x;
    return v;
}

/* The top 53 bits of z as a double in [0, 1) (exact). */
static double nest_st_unit(uint64_t z) { return (double)(z >> 11) * (1.0 / 9007199254740992.0); }

/* log(x) for x in (0, 1], with + - * / only: x = m 2^e, m in [sqrt(1/2), sqrt(2)), and
 * log(m) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...) with s = (m - 1) / (m + 1). */
static double nest_st_log(double x)
{
    int e, k;
    double m = frexp(x, &e), s, s2, p;
    if (m < 0.70710678118654752440) {
        m = m * 2;
        e = e - 1;
    }
    s = nest_st_r((m - 1) / (m + 1));
    s2 = nest_st_r(s * s);
    p = 1.0 / 25;
    for (k = 11; k >= 0; k--)
        p = nest_st_r(nest_st_r(p * s2) + 1.0 / (2 * k + 1));
    return nest_st_r(nest_st_r(e * 0.69314718055994530942) + nest_st_r(nest_st_r(2 * s) * p));
}

/* cos(2 pi u) for u in [0, 1): the quadrant from 4u, then a Taylor series on [0, pi/4]. */
static double nest_st_cos2pi(double u)
{
    double v = u * 4, f, t, t2, p;
    int q = (int)v, use_sin, k;
    f = v - q;
    use_sin = q & 1;
    if (f > 0.5) {
        f = 1 - f;
        use_sin = !use_sin;
    }
    t = nest_st_r(f * 1.57079632679489661923);
    t2 = nest_st_r(t * t);
    p = 1;
    if (use_sin) { /* t (1 - t^2/(2*3) (1 - t^2/(4*5) (...))) */
        for (k = 9; k >= 1; k--)
            p = nest_st_r(1 - nest_st_r(nest_st_r(t2 / ((2 * k) * (2 * k + 1))) * p));
        p = nest_st_r(t * p);
    } else { /* 1 - t^2/(1*2) (1 - t^2/(3*4) (...)) */
        for (k = 9; k >= 1; k--)
            p = nest_st_r(1 - nest_st_r(nest_st_r(t2 / ((2 * k - 1) * (2 * k))) * p));
    }
    return q == 1 || q == 2 ? -p : p;
}

/* Element i of a tensor's initial value, as a double (then rounded to the type). */
static double nest_st_value(const nest_st_desc *d, int64_t i)
{
    switch (d->init) {
    case 1:
        return d->a;
    case 2: {
        double u = nest_st_unit(nest_st_bits(d->seed, (uint64_t)i));
        return nest_st_r(d->a + nest_st_r(nest_st_r(d->b - d->a) * u));
    }
    case 3: { /* Box-Muller: draws 2i and 2i + 1 */
        double u1 = nest_st_unit(nest_st_bits(d->seed, 2 * (uint64_t)i));
        double u2 = nest_st_unit(nest_st_bits(d->seed, 2 * (uint64_t)i + 1));
        double r = sqrt(nest_st_r(-2 * nest_st_log(1 - u1)));
        double z = nest_st_r(r * nest_st_cos2pi(u2));
        return nest_st_r(d->a + nest_st_r(d->b * z));
    }
    default:
        return 0;
    }
}

/* Fills a tensor with its initial value. */
static void nest_st_fill(void *data, const nest_st_desc *d)
{
    int64_t i;
    if (d->init == 4) {
        if (d->count > 0)
            memcpy(data, d->data, (size_t)d->count * nest_st_esize(d->type));
        return;
    }
    for (i = 0; i < d->count; i++) {
        double v = nest_st_value(d, i);
        switch (d->type) {
        case 0: ((float *)data)[i] = (float)v; break;
        case 1: ((double *)data)[i] = v; break;
        case 2: ((int32_t *)data)[i] = (int32_t)v; break;
        case 3: ((int64_t *)data)[i] = (int64_t)v; break;
        default: ((unsigned char *)data)[i] = v != 0; break;
        }
    }
}

/* The tensors of a state in one block, each at a 64-byte boundary: t[i] points to tensor i,
 * and *block to free. Returns 0, or 1 when out of memory. */
static int nest_st_alloc(const nest_st_desc *d, int n, void **t, void **block)
{
    size_t total = 64, off = 0, bytes;
    int i;
    unsigned char *base;
    for (i = 0; i < n; i++) { /* each tensor is below 2^62 bytes; their sum may not be */
        bytes = ((size_t)d[i].count * nest_st_esize(d[i].type) + 63) / 64 * 64;
        if (bytes > SIZE_MAX - total) {
            *block = NULL;
            return 1;
        }
        total += bytes;
    }
    *block = malloc(total);
    if (!*block)
        return 1;
    base = (unsigned char *)*block + (64 - (uintptr_t)*block % 64) % 64;
    for (i = 0; i < n; i++) {
        t[i] = base + off;
        off += ((size_t)d[i].count * nest_st_esize(d[i].type) + 63) / 64 * 64;
        nest_st_fill(t[i], &d[i]);
    }
    return 0;
}

/* ---- state files (docs/api.md): little-endian throughout ----
 *   "NESTSTAT", u32 version 1, u32 tensor count
 *   per tensor: u16 name length, the name, u8 type, u8 rank, i64 dims[rank]
 *   per tensor, in the same order: its elements, row-major
 *   u64 FNV-1a hash of every byte before it */

static void nest_st_put(unsigned char *p, uint64_t v, int n)
{
    int i;
    for (i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t nest_st_get(const unsigned char *p, int n)
{
    uint64_t v = 0;
    int i;
    for (i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t nest_st_fnv(uint64_t h, const unsigned char *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

static int nest_st_little(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* The errno of a failed call (EIO if it set none), for a message. */
static int nest_st_errno(void) { return errno ? errno : EIO; }

/* Writes bytes to f and hashes them. After a write error, its errno in *err, nothing more is
 * written. */
static void nest_st_out(FILE *f, const void *p, size_t n, uint64_t *h, int *err)
{
    *h = nest_st_fnv(*h, (const unsigned char *)p, n);
    errno = 0;
    if (!*err && n > 0 && fwrite(p, 1, n, f) != n)
        *err = nest_st_errno();
}

/* Writes `count` elements of `esize` bytes little-endian. */
static void nest_st_out_data(FILE *f, const void *data, int64_t count, size_t esize, uint64_t *h,
                             int *err)
{
    unsigned char chunk[4096];
    const unsigned char *p = (const unsigned char *)data;
    size_t total = (size_t)count * esize, done = 0, i, k;
    if (nest_st_little() || esize == 1) {
        nest_st_out(f, data, total, h, err);
        return;
    }
    while (done < total && !*err) {
        size_t n = total - done < sizeof chunk ? total - done : sizeof chunk;
        for (i = 0; i < n; i += esize)
            for (k = 0; k < esize; k++)
                chunk[i + k] = p[done + i + esize - 1 - k];
        nest_st_out(f, chunk, n, h, err);
        done += n;
    }
}

/* msg = before path after, then ": " and strerror(err) unless err is 0 */
static void nest_st_msg(char *msg, size_t len, const char *before, const char *path,
                        const char *after, int err)
{
    if (msg && len)
        snprintf(msg, len, "%s%s%s%s%s", before, path, after, err ? ": " : "",
                 err ? strerror(err) : "");
}

/* Saves the n tensors t of a state to path (through path.tmp, renamed). 0, or 1 for an I/O
 * error and 4 when out of memory, with a message in msg. */
static int nest_st_save(const nest_st_desc *d, int n, void *const *t, const char *path, char *msg,
                        size_t msglen)
{
    size_t plen = strlen(path);
    char *tmp = (char *)malloc(plen + 5);
    unsigned char head[16];
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    FILE *f;
    int i, k, err = 0;
    if (!tmp) {
        nest_st_msg(msg, msglen, "saving ", path, ": out of memory", 0);
        return 4;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    errno = 0;
    f = fopen(tmp, "wb");
    if (!f) {
        nest_st_msg(msg, msglen, "cannot create ", path, ".tmp", nest_st_errno());
        free(tmp);
        return 1;
    }
    memcpy(head, "NESTSTAT", 8);
    nest_st_put(head + 8, 1, 4);
    nest_st_put(head + 12, (uint64_t)n, 4);
    nest_st_out(f, head, 16, &h, &err);
    for (i = 0; i < n; i++) {
        size_t len = strlen(d[i].name);
        nest_st_put(head, len, 2);
        nest_st_out(f, head, 2, &h, &err);
        nest_st_out(f, d[i].name, len, &h, &err);
        head[0] = (unsigned char)d[i].type;
        head[1] = (unsigned char)d[i].rank;
        nest_st_out(f, head, 2, &h, &err);
        for (k = 0; k < d[i].rank; k++) {
            nest_st_put(head, (uint64_t)d[i].shape[k], 8);
            nest_st_out(f, head, 8, &h, &err);
        }
    }
    for (i = 0; i < n; i++)
        nest_st_out_data(f, t[i], d[i].count, nest_st_esize(d[i].type), &h, &err);
    nest_st_put(head, h, 8);
    nest_st_out(f, head, 8, &h, &err);
    errno = 0;
    if (fclose(f) != 0 && !err)
        err = nest_st_errno();
    errno = 0;
    if (!err && rename(tmp, path) != 0)
        err = nest_st_errno();
    if (err) {
        remove(tmp);
        free(tmp);
        nest_st_msg(msg, msglen, "writing ", path, "", err);
        return 1;
    }
    free(tmp);
    return 0;
}

/* The text of a type code, for messages. */
static const char *nest_st_type_name(int type)
{
    static const char *const names[] = {"f32", "f64", "i32", "i64", "bool"};
    return type >= 0 && type <= 4 ? names[type] : "?";
}

/* Loads path into the n tensors t of a state. The file must hold exactly the state's tensors,
 * matched by name in any order, each of the same type and shape: a tensor of the file that the
 * state lacks, or one of the state that the file lacks, is an error naming it. The whole file is
 * checked (its structure, size and checksum, then its tensors against the state's) before
 * anything is copied: on an error t is unchanged. 0, or 1 for an I/O error, 2 for a file that
 * is not a whole state file, 3 for one of another state, 4 when out of memory, with a message in
 * msg. */
static int nest_st_load(const nest_st_desc *d, int n, void *const *t, const char *path, char *msg,
                        size_t msglen)
{
    unsigned char *data = NULL, *p, *end;
    const unsigned char **ent = NULL; /* per tensor of the file: its name's length field */
    size_t size = 0, cap = 0, got, *offs = NULL, *bytes = NULL, count, i, left;
    int *which = NULL, *seen = NULL, rc = 2, j, k;
    uint64_t h;
    char text[400];
    FILE *f;
    errno = 0;
    f = fopen(path, "rb");
    text[0] = '\0';
    if (!f) {
        nest_st_msg(msg, msglen, "cannot open ", path, "", nest_st_errno());
        return 1;
    }
    for (;;) {
        if (size == cap) {
            unsigned char *q = (unsigned char *)realloc(data, cap ? cap * 2 : 65536);
            if (!q) {
                fclose(f);
                free(data);
                nest_st_msg(msg, msglen, "loading ", path, ": out of memory", 0);
                return 4;
            }
            data = q;
            cap = cap ? cap * 2 : 65536;
        }
        errno = 0;
        got = fread(data + size, 1, cap - size, f);
        size += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        int err = nest_st_errno();
        fclose(f);
        free(data);
        nest_st_msg(msg, msglen, "reading ", path, "", err);
        return 1;
    }
    fclose(f);
    p = data;
    end = data + size;
    if (size < 24 || memcmp(p, "NESTSTAT", 8) != 0) {
        snprintf(text, sizeof text, "not a state file (no NESTSTAT header)");
        goto out;
    }
    if (nest_st_get(p + 8, 4) != 1) {
        snprintf(text, sizeof text, "state file version %u (this code reads version 1)",
                 (unsigned)nest_st_get(p + 8, 4));
        goto out;
    }
    count = (size_t)nest_st_get(p + 12, 4);
    if (count > (size - 24) / 4) /* each tensor takes 4 bytes at least */
        goto truncated;
    ent = (const unsigned char **)calloc(count + 1, sizeof *ent);
    offs = (size_t *)calloc(count + 1, sizeof *offs);
    bytes = (size_t *)calloc(count + 1, sizeof *bytes);
    which = (int *)calloc(count + 1, sizeof *which);
    seen = (int *)calloc((size_t)n + 1, sizeof *seen);
    if (!ent || !offs || !bytes || !which || !seen) {
        rc = 4;
        snprintf(text, sizeof text, "out of memory");
        goto out;
    }
    /* the structure: each tensor's header, then its data, then the checksum */
    p += 16;
    for (i = 0; i < count; i++) {
        size_t len, elems = 1;
        int type, rank;
        if (end - p < 4)
            goto truncated;
        len = (size_t)nest_st_get(p, 2);
        if ((size_t)(end - p) < 4 + len)
            goto truncated;
        ent[i] = p;
        type = p[2 + len];
        rank = p[3 + len];
        if (type > 4) {
            snprintf(text, sizeof text, "the file's tensor %lu has an unknown type %d: the file "
                     "is damaged", (unsigned long)i + 1, type);
            goto out;
        }
        p += 4 + len;
        if ((size_t)(end - p) < 8 * (size_t)rank)
            goto truncated;
        for (k = 0; k < rank; k++, p += 8) {
            int64_t dim = (int64_t)nest_st_get(p, 8);
            if (dim < 0) {
                snprintf(text, sizeof text, "the file's tensor %lu has a negative dimension: "
                         "the file is damaged", (unsigned long)i + 1);
                goto out;
            }
            if (dim > 0 && elems > size / (size_t)dim) /* more data than the file holds */
                elems = size + 1;
            else
                elems *= (size_t)dim;
        }
        bytes[i] = elems > size ? size + 1 : elems * nest_st_esize(type);
    }
    for (i = 0; i < count; i++) {
        left = (size_t)(end - p);
        if (left < bytes[i])
            goto truncated;
        offs[i] = (size_t)(p - data);
        p += bytes[i];
    }
    if (end - p < 8)
        goto truncated;
    if (end - p > 8) {
        snprintf(text, sizeof text, "%lu bytes follow the end of the state",
                 (unsigned long)(end - p - 8));
        goto out;
    }
    h = nest_st_fnv(UINT64_C(0xcbf29ce484222325), data, (size_t)(p - data));
    if (h != nest_st_get(p, 8)) {
        snprintf(text, sizeof text, "the checksum does not match: the file is damaged");
        goto out;
    }
    /* the tensors against the state's */
    for (i = 0; i < count; i++) {
        const unsigned char *e = ent[i];
        size_t len = (size_t)nest_st_get(e, 2);
        int type = e[2 + len], rank = e[3 + len];
        for (j = 0; j < n; j++)
            if (strlen(d[j].name) == len && memcmp(d[j].name, e + 2, len) == 0)
                break;
        if (j == n) {
            rc = 3;
            snprintf(text, sizeof text, "the file's tensor %lu, '%.*s', is not in the state",
                     (unsigned long)i + 1, (int)(len > 64 ? 64 : len), (const char *)e + 2);
            goto out;
        }
        if (seen[j]) {
            snprintf(text, sizeof text, "tensor '%s' is in the file twice", d[j].name);
            goto out;
        }
        seen[j] = 1;
        which[i] = j;
        rc = 3;
        if (type != d[j].type) {
            snprintf(text, sizeof text, "tensor '%s' is %s in the file, %s in the state",
                     d[j].name, nest_st_type_name(type), nest_st_type_name(d[j].type));
            goto out;
        }
        if (rank != d[j].rank) {
            snprintf(text, sizeof text, "tensor '%s' has rank %d in the file, %d in the state",
                     d[j].name, rank, d[j].rank);
            goto out;
        }
        for (k = 0; k < rank; k++)
            if ((int64_t)nest_st_get(e + 4 + len + 8 * k, 8) != d[j].shape[k]) {
                snprintf(text, sizeof text,
                         "tensor '%s' has dimension %d of %lld in the file, %lld in the state",
                         d[j].name, k, (long long)nest_st_get(e + 4 + len + 8 * k, 8),
                         (long long)d[j].shape[k]);
                goto out;
            }
        rc = 2;
    }
    for (j = 0; j < n; j++)
        if (!seen[j]) {
            rc = 3;
            snprintf(text, sizeof text, "tensor '%s' of the state is not in the file", d[j].name);
            goto out;
        }
    for (i = 0; i < count; i++) {
        const nest_st_desc *e = &d[which[i]];
        size_t es = nest_st_esize(e->type), b, c;
        unsigned char *dst = (unsigned char *)t[which[i]];
        if (nest_st_little() || es == 1) {
            if (bytes[i])
                memcpy(dst, data + offs[i], bytes[i]);
        } else {
            for (b = 0; b < bytes[i]; b += es)
                for (c = 0; c < es; c++)
                    dst[b + c] = data[offs[i] + b + es - 1 - c];
        }
    }
    rc = 0;
    goto out;
truncated:
    rc = 2;
    snprintf(text, sizeof text, "the file is truncated (%lu bytes)", (unsigned long)size);
out:
    if (rc && msg && msglen)
        snprintf(msg, msglen, "%s: %s", path, text);
    free(ent);
    free(offs);
    free(bytes);
    free(which);
    free(seen);
    free(data);
    return rc;
}
