/*
 * fuzz_npy.c - libFuzzer target for the .npy reader of nestc run (driver/npy.c). Any bytes
 * either give an array whose shape, count and values keep npy_array's promises, or an error
 * with a message; the sanitizers watch every read. What reads also writes and reads back the
 * same. `make fuzz-npy` builds and runs it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "fuzz_npy: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    npy_array a;
    char err[512];
    err[0] = '\0';
    if (npy_parse(data, size, &a, err, sizeof err) != 0) {
        if (!err[0] || a.data)
            die("a failure without a message, or with an array");
        return 0;
    }
    int64_t count = 1;
    if (!a.data || a.rank < 0 || a.rank > NEST_MAX_RANK || (uintptr_t)a.data % 64)
        die("an array without data, of a bad rank, or unaligned");
    for (int k = 0; k < a.rank; k++)
        count *= a.shape[k];
    if (count != a.count)
        die("the count is not the shape's");
    size_t bytes = (size_t)a.count * nest_type_size(a.type);
    if (a.type == NEST_BOOL)
        for (int64_t i = 0; i < a.count; i++)
            if (((uint8_t *)a.data)[i] > 1)
                die("a bool that is not 0 or 1");

    /* written and read back, the same array */
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/fuzz_npy.%d.npy", (int)getpid());
    if (bytes <= (1 << 20)) {
        if (npy_write(path, a.type, a.rank, a.shape, a.data, false, err, sizeof err) != 0)
            die(err);
        npy_array b;
        if (npy_read(path, &b, err, sizeof err) != 0)
            die(err);
        if (b.type != a.type || b.rank != a.rank || b.count != a.count ||
            memcmp(b.shape, a.shape, sizeof(int64_t) * (size_t)a.rank) != 0 ||
            (bytes && memcmp(a.data, b.data, bytes) != 0))
            die("the array written and read back differs");
        npy_free(&b);
        unlink(path);
    }
    npy_free(&a);
    return 0;
}
