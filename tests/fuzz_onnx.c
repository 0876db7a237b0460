/*
 * fuzz_onnx.c - libFuzzer target for the ONNX reader. Any bytes either import or fail with an
 * error message that begins with the source's name and leaves no results (nothing can be
 * emitted); what imports prints as the text form and parses back. `make fuzz-onnx` builds and
 * runs it over a corpus of small models (tests/corpus/onnx: the ONNX backend node tests).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static _Noreturn void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_onnx: %s\n%s\n", what, detail ? detail : "");
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nest_dim dims[2] = {{"N", 2}, {"batch", 2}};
    nest_onnx_options o = {.dims = dims, .ndims = 2};
    nest_function *f = nest_import_onnx_mem(data, size, &o);
    if (!f)
        return 0; /* out of memory */
    if (nest_errcode(f) != NEST_OK) {
        if (strncmp(nest_errmsg(f), "<memory>: ", 10) != 0 && nest_errcode(f) != NEST_ERR_NOMEM)
            die("an error that does not name its source", nest_errmsg(f));
        if (f->has_return || f->nresults)
            die("a failed import left results", nest_errmsg(f));
        nest_function_free(f);
        return 0;
    }
    if (!f->has_return)
        die("an import without results", f->name);
    char *text = nest_print(&f, 1);
    if (text) {
        nest_module *m = nest_parse(text, strlen(text), "printed.nest");
        if (m && nest_module_errcode(m) != NEST_OK)
            die("the printed form does not parse back", nest_module_errmsg(m));
        nest_module_free(m);
    }
    free(text);
    nest_function_free(f);
    return 0;
}
