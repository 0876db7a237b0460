/*
 * npy.c - numpy's .npy files, read and written for `nestc run`.
 *
 * A file is the magic "\x93NUMPY", a major and a minor version byte (1.0, 2.0 or 3.0), the
 * header's length (2 bytes little-endian in 1.0, 4 bytes in 2.0 and 3.0), then the header: a
 * Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded with
 * spaces and ended by '\n', then the elements. The dtypes nest has are '<f4' '<f8' '<i4' '<i8'
 * and '|b1' (and their big-endian forms, converted on reading). Anything else, and any file
 * whose bytes do not add up, is an error with a message; nothing here trusts a length it read.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char magic[6] = "\x93NUMPY";

static int fail(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static bool host_little(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

const char *npy_descr(nest_type t)
{
    bool le = host_little();
    switch (t) {
    case NEST_F32: return le ? "<f4" : ">f4";
    case NEST_F64: return le ? "<f8" : ">f8";
    case NEST_I32: return le ? "<i4" : ">i4";
    case NEST_I64: return le ? "<i8" : ">i8";
    case NEST_BOOL: return "|b1";
    }
    return "?";
}

void npy_free(npy_array *a)
{
    if (a) {
        free(a->data);
        a->data = NULL;
    }
}

/* ---- the header ---- */

typedef struct header {
    nest_type type;
    size_t size;    /* bytes of one element */
    bool swap;      /* the data's byte order is not this machine's */
    bool fortran;   /* column-major */
    int rank;
    int64_t shape[NEST_MAX_RANK];
    int64_t count;
    size_t data_off; /* where the elements start */
    size_t data_len; /* count * size */
} header;

/* The text of a header value for a message: printable ASCII, at most 40 bytes. */
static void shown(char *out, size_t outlen, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < outlen; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == 40) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c >= 0x20 && c < 0x7f && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
    }
    out[o < outlen ? o : outlen - 1] = '\0';
}

/* The numpy name of a dtype nest does not have, for the message. */
static const char *kind_name(char kind)
{
    switch (kind) {
    case 'f': return "float";
    case 'i': return "int";
    case 'u': return "uint";
    case 'c': return "complex";
    case 'b': return "bool";
    case 'U': return "a unicode string";
    case 'S': case 'a': return "a byte string";
    case 'O': return "Python objects";
    case 'M': return "datetime64";
    case 'm': return "timedelta64";
    case 'V': return "raw bytes";
    default: return NULL;
    }
}

static int parse_descr(header *h, const char *s, size_t n, char *err, size_t errlen)
{
    char txt[200];
    shown(txt, sizeof txt, s, n);
    size_t i = 0;
    char order = '=';
    if (n > 0 && strchr("<>=|", s[0]))
        order = s[i++];
    int bytes = 0;
    size_t digits = 0;
    if (i < n)
        for (size_t j = i + 1; j < n && s[j] >= '0' && s[j] <= '9' && bytes < 1000; j++, digits++)
            bytes = bytes * 10 + (s[j] - '0');
    if (i >= n || digits == 0 || i + 1 + digits != n)
        return fail(err, errlen, "the dtype '%s' is not one nest reads (f32 '<f4', f64 '<f8', "
                                 "i32 '<i4', i64 '<i8', bool '|b1')", txt);
    char kind = s[i];
    static const struct { char kind; int bytes; nest_type t; } known[] = {
        {'f', 4, NEST_F32}, {'f', 8, NEST_F64}, {'i', 4, NEST_I32}, {'i', 8, NEST_I64},
        {'b', 1, NEST_BOOL},
    };
    for (size_t k = 0; k < sizeof known / sizeof *known; k++) {
        if (known[k].kind != kind || known[k].bytes != bytes)
            continue;
        if (order == '|' && bytes > 1)
            return fail(err, errlen, "the dtype '%s' has no byte order", txt);
        h->type = known[k].t;
        h->size = (size_t)bytes;
        h->swap = bytes > 1 && ((order == '<' && !host_little()) || (order == '>' && host_little()));
        return 0;
    }
    const char *name = kind_name(kind);
    char numpy[64] = "";
    if (name && strchr("fiucb", kind))
        snprintf(numpy, sizeof numpy, " (%s%d)", name, bytes * 8);
    else if (name)
        snprintf(numpy, sizeof numpy, " (%s)", name);
    return fail(err, errlen, "the dtype '%s'%s is not one nest has: convert the array with "
                             ".astype() to float32, float64, int32, int64 or bool", txt, numpy);
}

typedef struct lexer {
    const char *p, *end;
} lexer;

static void skip_space(lexer *l)
{
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
        l->p++;
}

static bool take(lexer *l, char c)
{
    skip_space(l);
    if (l->p < l->end && *l->p == c) {
        l->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes: its text in [*s, *s + *n). */
static bool string(lexer *l, const char **s, size_t *n)
{
    skip_space(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"'))
        return false;
    char q = *l->p++;
    const char *start = l->p;
    while (l->p < l->end && *l->p != q && *l->p != '\\' && *l->p != '\n')
        l->p++;
    if (l->p >= l->end || *l->p != q)
        return false;
    *s = start;
    *n = (size_t)(l->p - start);
    l->p++;
    return true;
}

static bool word(lexer *l, const char *w)
{
    skip_space(l);
    size_t n = strlen(w);
    if ((size_t)(l->end - l->p) >= n && memcmp(l->p, w, n) == 0) {
        l->p += n;
        return true;
    }
    return false;
}

/* (d0, d1, ...) with an optional trailing comma; Python 2's 3L is taken too. */
static int parse_shape(lexer *l, header *h, char *err, size_t errlen)
{
    if (!take(l, '('))
        return fail(err, errlen, "the header's shape is not a tuple of integers");
    h->rank = 0;
    skip_space(l);
    while (!take(l, ')')) {
        skip_space(l);
        if (l->p >= l->end || *l->p < '0' || *l->p > '9')
            return fail(err, errlen, "the header's shape is not a tuple of integers");
        int64_t d = 0;
        while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
            if (d > (INT64_MAX - 9) / 10)
                return fail(err, errlen, "a dimension of the header's shape is too large");
            d = d * 10 + (*l->p++ - '0');
        }
        if (l->p < l->end && *l->p == 'L')
            l->p++;
        if (h->rank == NEST_MAX_RANK)
            return fail(err, errlen, "the array has more than %d axes", NEST_MAX_RANK);
        h->shape[h->rank++] = d;
        if (!take(l, ',')) {
            if (!take(l, ')'))
                return fail(err, errlen, "the header's shape is not a tuple of integers");
            break;
        }
    }
    return 0;
}

/* The magic and the version in b[0..len): where the header starts and how long it is. */
static int preamble(const unsigned char *b, size_t len, size_t *start, size_t *hlen, char *err,
                    size_t errlen)
{
    if (len < 10 || memcmp(b, magic, sizeof magic) != 0)
        return fail(err, errlen, "not a .npy file (it does not begin with \\x93NUMPY)");
    int major = b[6], minor = b[7];
    if (major == 1 && minor == 0) {
        *hlen = (size_t)b[8] | (size_t)b[9] << 8;
        *start = 10;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (len < 12)
            return fail(err, errlen, "the file ends inside its header");
        *hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        *start = 12;
    } else {
        return fail(err, errlen, "the .npy format version %d.%d is not 1.0, 2.0 or 3.0", major,
                    minor);
    }
    if (*hlen > NPY_MAX_HEADER)
        return fail(err, errlen, "the header is %zu bytes long (more than %d)", *hlen,
                    NPY_MAX_HEADER);
    return 0;
}

/* Parses the magic, the version and the header in b[0..len), which holds at least the header
 * (and may hold the data too). Sets everything in h. */
static int parse_header(const unsigned char *b, size_t len, header *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    size_t start, hlen;
    if (preamble(b, len, &start, &hlen, err, errlen) != 0)
        return -1;
    if (hlen > len - start)
        return fail(err, errlen, "the file ends inside its header");
    h->data_off = start + hlen;

    lexer l = {(const char *)b + start, (const char *)b + start + hlen};
    bool seen[3] = {false, false, false};
    if (!take(&l, '{'))
        return fail(err, errlen, "the header is not a dict");
    while (!take(&l, '}')) {
        const char *k;
        size_t kn;
        if (!string(&l, &k, &kn) || !take(&l, ':'))
            return fail(err, errlen, "the header is not a dict of 'descr', 'fortran_order' and "
                                     "'shape'");
        int key = kn == 5 && memcmp(k, "descr", 5) == 0           ? 0
                  : kn == 13 && memcmp(k, "fortran_order", 13) == 0 ? 1
                  : kn == 5 && memcmp(k, "shape", 5) == 0           ? 2
                                                                    : -1;
        if (key < 0) {
            char txt[200];
            shown(txt, sizeof txt, k, kn);
            return fail(err, errlen, "the header has an unknown key '%s'", txt);
        }
        if (seen[key])
            return fail(err, errlen, "the header gives '%s' twice",
                        key == 0 ? "descr" : key == 1 ? "fortran_order" : "shape");
        seen[key] = true;
        if (key == 0) {
            const char *s;
            size_t n;
            skip_space(&l);
            if (l.p < l.end && *l.p == '[')
                return fail(err, errlen, "the array has a structured dtype (fields): nest reads "
                                         "arrays of one number type");
            if (!string(&l, &s, &n))
                return fail(err, errlen, "the header's descr is not a string");
            if (parse_descr(h, s, n, err, errlen) != 0)
                return -1;
        } else if (key == 1) {
            if (word(&l, "True"))
                h->fortran = true;
            else if (!word(&l, "False"))
                return fail(err, errlen, "the header's fortran_order is not True or False");
        } else if (parse_shape(&l, h, err, errlen) != 0) {
            return -1;
        }
        if (!take(&l, ',')) {
            if (!take(&l, '}'))
                return fail(err, errlen, "the header is not a dict of 'descr', "
                                         "'fortran_order' and 'shape'");
            break;
        }
    }
    skip_space(&l);
    if (l.p != l.end)
        return fail(err, errlen, "the header has text after its dict");
    if (!seen[0] || !seen[1] || !seen[2])
        return fail(err, errlen, "the header has no '%s'",
                    !seen[0] ? "descr" : !seen[1] ? "fortran_order" : "shape");

    int64_t count = 1;
    for (int k = 0; k < h->rank; k++) {
        if (h->shape[k] != 0 && count > INT64_MAX / h->shape[k])
            return fail(err, errlen, "the shape's element count overflows");
        count *= h->shape[k];
    }
    if ((uint64_t)count > SIZE_MAX / 2 / h->size)
        return fail(err, errlen, "the array is larger than memory can hold");
    h->count = count;
    h->data_len = (size_t)count * h->size;
    return 0;
}

/* The shape as Python prints a tuple: (), (3,), (3, 4). */
static void format_shape(char *out, size_t outlen, int rank, const int64_t *shape)
{
    size_t o = (size_t)snprintf(out, outlen, "(");
    for (int k = 0; k < rank && o < outlen; k++)
        o += (size_t)snprintf(out + o, outlen - o, "%s%lld", k ? ", " : "", (long long)shape[k]);
    if (o < outlen)
        snprintf(out + o, outlen - o, rank == 1 ? ",)" : ")");
}

/* The file's length against the header's: the data must be exactly count * size bytes. */
static int check_length(const header *h, uint64_t total, char *err, size_t errlen)
{
    uint64_t have = total - h->data_off;
    if (have == h->data_len)
        return 0;
    char s[NEST_MAX_RANK * 22 + 8];
    format_shape(s, sizeof s, h->rank, h->shape);
    if (have < h->data_len)
        return fail(err, errlen, "the file is truncated: its shape %s needs %zu bytes of data, "
                                 "it has %llu", s, h->data_len, (unsigned long long)have);
    return fail(err, errlen, "the file has %llu bytes after the data of its shape %s",
                (unsigned long long)(have - h->data_len), s);
}

static void *alloc_data(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
}

void npy_reorder(void *dst, const void *src, size_t size, int rank, const int64_t *shape,
                 bool to_fortran)
{
    /* element (i0, ..., in) is at sum(ik * cst[k]) column-major: walk it in row-major order */
    int64_t cst[NEST_MAX_RANK], idx[NEST_MAX_RANK] = {0}, count = 1, off = 0;
    for (int k = 0; k < rank; k++) {
        cst[k] = count;
        count *= shape[k];
    }
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (int64_t i = 0; i < count; i++) {
        if (to_fortran)
            memcpy(d + (size_t)off * size, s + (size_t)i * size, size);
        else
            memcpy(d + (size_t)i * size, s + (size_t)off * size, size);
        for (int k = rank - 1; k >= 0; k--) {
            if (++idx[k] < shape[k]) {
                off += cst[k];
                break;
            }
            off -= cst[k] * (shape[k] - 1);
            idx[k] = 0;
        }
    }
}

/* Turns the raw elements into what npy_array promises: this machine's byte order, bool 0 or 1,
 * row-major (a column-major file is transposed into a new buffer). Takes `raw` (from
 * alloc_data) and gives it, or its replacement, to out. */
static int finish(const header *h, void *raw, npy_array *out, char *err, size_t errlen)
{
    unsigned char *d = raw;
    if (h->swap)
        for (int64_t i = 0; i < h->count; i++) {
            unsigned char *e = d + (size_t)i * h->size;
            for (size_t a = 0, b = h->size - 1; a < b; a++, b--) {
                unsigned char t = e[a];
                e[a] = e[b];
                e[b] = t;
            }
        }
    if (h->type == NEST_BOOL)
        for (int64_t i = 0; i < h->count; i++)
            d[i] = d[i] != 0;
    if (h->fortran && h->rank > 1 && h->count > 0) {
        unsigned char *t = alloc_data(h->data_len);
        if (!t) {
            free(raw);
            return fail(err, errlen, "out of memory for %zu bytes", h->data_len);
        }
        npy_reorder(t, d, h->size, h->rank, h->shape, false);
        free(raw);
        raw = t;
    }
    out->type = h->type;
    out->rank = h->rank;
    memcpy(out->shape, h->shape, sizeof h->shape);
    out->count = h->count;
    out->data = raw;
    return 0;
}

int npy_parse(const void *bytes, size_t len, npy_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    header h;
    if (!bytes || parse_header(bytes, len, &h, err, errlen) != 0 ||
        check_length(&h, len, err, errlen) != 0)
        return bytes ? -1 : fail(err, errlen, "no data");
    void *raw = alloc_data(h.data_len);
    if (!raw)
        return fail(err, errlen, "out of memory for %zu bytes", h.data_len);
    if (h.data_len)
        memcpy(raw, (const unsigned char *)bytes + h.data_off, h.data_len);
    return finish(&h, raw, out, err, errlen);
}

/* Reads exactly n bytes; false at an error or the end of the file. */
static bool read_exactly(FILE *in, void *p, size_t n)
{
    return n == 0 || fread(p, 1, n, in) == n;
}

int npy_read(const char *path, npy_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *in = fopen(path, "rb");
    if (!in)
        return fail(err, errlen, "cannot open it: %s", strerror(errno));
    struct stat st;
    if (fstat(fileno(in), &st) != 0 || !S_ISREG(st.st_mode)) {
        /* a pipe or a device: read it whole and parse it in memory */
        size_t cap = 1 << 16, n = 0, got;
        unsigned char *all = malloc(cap);
        while (all && (got = fread(all + n, 1, cap - n, in)) > 0) {
            n += got;
            if (n < cap)
                continue;
            unsigned char *bigger = cap <= SIZE_MAX / 2 ? realloc(all, cap * 2) : NULL;
            if (!bigger)
                free(all);
            all = bigger;
            cap *= 2;
        }
        int rc = !all            ? fail(err, errlen, "out of memory reading it")
                 : ferror(in)     ? fail(err, errlen, "reading it failed: %s", strerror(errno))
                                  : npy_parse(all, n, out, err, errlen);
        free(all);
        fclose(in);
        return rc;
    }

    /* a file: the preamble, then the header, then the data straight into its buffer */
    unsigned char pre[12];
    size_t npre = fread(pre, 1, sizeof pre, in), start, hlen;
    header h;
    int rc = preamble(pre, npre, &start, &hlen, err, errlen);
    if (rc == 0 && start + hlen > (uint64_t)st.st_size)
        rc = fail(err, errlen, "the file ends inside its header");
    if (rc == 0) {
        unsigned char *hb = malloc(start + hlen);
        if (!hb)
            rc = fail(err, errlen, "out of memory for its header");
        else if (memcpy(hb, pre, npre), !read_exactly(in, hb + npre, start + hlen - npre))
            rc = fail(err, errlen, "reading it failed: %s",
                      ferror(in) ? strerror(errno) : "the file ends inside its header");
        else
            rc = parse_header(hb, start + hlen, &h, err, errlen);
        free(hb);
    }
    if (rc == 0)
        rc = check_length(&h, (uint64_t)st.st_size, err, errlen);
    if (rc != 0) {
        fclose(in);
        return -1;
    }
    void *raw = alloc_data(h.data_len);
    if (!raw) {
        fclose(in);
        return fail(err, errlen, "out of memory for %zu bytes", h.data_len);
    }
    if (!read_exactly(in, raw, h.data_len)) {
        bool bad = ferror(in);
        free(raw);
        fclose(in);
        return fail(err, errlen, "reading it failed: %s",
                    bad ? strerror(errno) : "the file ended early");
    }
    fclose(in);
    return finish(&h, raw, out, err, errlen);
}

int npy_write(const char *path, nest_type t, int rank, const int64_t *shape, const void *data,
              bool fortran, char *err, size_t errlen)
{
    if (rank < 0 || rank > NEST_MAX_RANK || nest_type_size(t) == 0)
        return fail(err, errlen, "no such array type");
    int64_t count = 1;
    for (int k = 0; k < rank; k++) {
        if (shape[k] < 0 || (shape[k] != 0 && count > INT64_MAX / shape[k]))
            return fail(err, errlen, "bad shape");
        count *= shape[k];
    }
    char s[NEST_MAX_RANK * 22 + 8];
    format_shape(s, sizeof s, rank, shape);
    /* the preamble and header, padded with spaces to a multiple of 64 bytes, ending in \n */
    char hdr[1024];
    int n = snprintf(hdr + 10, sizeof hdr - 10,
                     "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", npy_descr(t),
                     fortran && rank > 1 ? "True" : "False", s);
    size_t total = ((size_t)n + 10 + 1 + 63) / 64 * 64;
    if (n < 0 || total > sizeof hdr)
        return fail(err, errlen, "the header does not fit");
    memset(hdr + 10 + n, ' ', total - 10 - (size_t)n);
    hdr[total - 1] = '\n';
    memcpy(hdr, magic, sizeof magic);
    hdr[6] = 1;
    hdr[7] = 0;
    hdr[8] = (char)((total - 10) & 0xff);
    hdr[9] = (char)((total - 10) >> 8);

    FILE *out = fopen(path, "wb");
    if (!out)
        return fail(err, errlen, "cannot create it: %s", strerror(errno));
    size_t bytes = (size_t)count * nest_type_size(t);
    bool ok = fwrite(hdr, 1, total, out) == total &&
              (bytes == 0 || fwrite(data, 1, bytes, out) == bytes) && fflush(out) == 0;
    int e = errno;
    struct stat st;
    bool regular = fstat(fileno(out), &st) == 0 && S_ISREG(st.st_mode);
    if (fclose(out) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        if (regular) /* never a device or a pipe the path named */
            remove(path);
        return fail(err, errlen, "writing it failed: %s", strerror(e));
    }
    return 0;
}
