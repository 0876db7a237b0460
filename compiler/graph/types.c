/* types.c - element types, status texts, identifiers and the names C claims: below the IR, so
 * that every file of the compiler (front ends, passes, emitter) may use them. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

const char *nest_status_str(int status)
{
    static const char *const text[] = {
#define NEST_STATUS_TEXT(name, msg) msg,
        NEST_STATUS_MAP(NEST_STATUS_TEXT)
#undef NEST_STATUS_TEXT
    };
    if (status < 0 || status >= NEST_STATUS_COUNT)
        return "unknown status";
    return text[status];
}

const char *nest_type_name(nest_type t)
{
    static const char *const names[] = {"f32", "f64", "i32", "i64", "bool"};
    return (unsigned)t < countof(names) ? names[t] : "?";
}

size_t nest_type_size(nest_type t)
{
    static const size_t sizes[] = {4, 8, 4, 8, 1};
    return (unsigned)t < countof(sizes) ? sizes[t] : 0;
}

static bool is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }

bool is_identifier(const char *s, size_t len)
{
    if (len == 0 || !is_alpha((unsigned char)s[0]))
        return false;
    for (size_t i = 1; i < len; i++)
        if (!is_alpha((unsigned char)s[i]) && !is_digit((unsigned char)s[i]))
            return false;
    return true;
}

bool is_c_keyword(const char *s)
{
    static const char *const words[] = {
        "auto", "break", "case", "char", "const", "continue", "default", "do", "double",
        "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
        "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
        "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "_Bool",
        "_Complex", "_Imaginary", "_Alignas", "_Alignof", "_Atomic", "_Generic", "_Noreturn",
        "_Static_assert", "_Thread_local", "main", "asm", "typeof", "bool", "true", "false",
    };
    for (size_t i = 0; i < countof(words); i++)
        if (strcmp(s, words[i]) == 0)
            return true;
    return false;
}

/* Identifiers that the headers the C includes (<math.h>, <stddef.h>, <stdint.h>, <stdlib.h>,
 * <string.h>) declare as macros, types or functions, that C compilers predefine in GNU modes
 * (the header is included by programs built in any mode), and C++'s keywords (the header is
 * also C++). A parameter or value of such a name gets another name in the C; a function of
 * such a name is refused (pipeline.c). */
static const char *const c_library[] = {
    /* macros */
    "NAN", "INFINITY", "HUGE_VAL", "HUGE_VALF", "HUGE_VALL", "FP_INFINITE", "FP_NAN",
    "FP_NORMAL", "FP_SUBNORMAL", "FP_ZERO", "FP_FAST_FMA", "FP_FAST_FMAF", "FP_FAST_FMAL",
    "FP_ILOGB0", "FP_ILOGBNAN", "MATH_ERRNO", "MATH_ERREXCEPT", "math_errhandling", "NULL",
    "EXIT_FAILURE", "EXIT_SUCCESS", "RAND_MAX", "MB_CUR_MAX", "errno", "INT8_MIN", "INT8_MAX",
    "UINT8_MAX", "INT16_MIN", "INT16_MAX", "UINT16_MAX", "INT32_MIN", "INT32_MAX", "UINT32_MAX",
    "INT64_MIN", "INT64_MAX", "UINT64_MAX", "INT_LEAST8_MIN", "INT_LEAST8_MAX",
    "UINT_LEAST8_MAX", "INT_LEAST16_MIN", "INT_LEAST16_MAX", "UINT_LEAST16_MAX",
    "INT_LEAST32_MIN", "INT_LEAST32_MAX", "UINT_LEAST32_MAX", "INT_LEAST64_MIN",
    "INT_LEAST64_MAX", "UINT_LEAST64_MAX", "INT_FAST8_MIN", "INT_FAST8_MAX", "UINT_FAST8_MAX",
    "INT_FAST16_MIN", "INT_FAST16_MAX", "UINT_FAST16_MAX", "INT_FAST32_MIN", "INT_FAST32_MAX",
    "UINT_FAST32_MAX", "INT_FAST64_MIN", "INT_FAST64_MAX", "UINT_FAST64_MAX", "INTPTR_MIN",
    "INTPTR_MAX", "UINTPTR_MAX", "INTMAX_MIN", "INTMAX_MAX", "UINTMAX_MAX", "PTRDIFF_MIN",
    "PTRDIFF_MAX", "SIG_ATOMIC_MIN", "SIG_ATOMIC_MAX", "SIZE_MAX", "WCHAR_MIN", "WCHAR_MAX",
    "WINT_MIN", "WINT_MAX", "linux", "unix", "i386",
    /* function-like macros: harmless as names, but not as functions */
    "INT8_C", "INT16_C", "INT32_C", "INT64_C", "UINT8_C", "UINT16_C", "UINT32_C", "UINT64_C",
    "INTMAX_C", "UINTMAX_C", "offsetof", "fpclassify", "isfinite", "isinf", "isnan", "isnormal",
    "signbit", "isgreater", "isgreaterequal", "isless", "islessequal", "islessgreater",
    "isunordered",
    /* types */
    "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
    "int_least8_t", "int_least16_t", "int_least32_t", "int_least64_t", "uint_least8_t",
    "uint_least16_t", "uint_least32_t", "uint_least64_t", "int_fast8_t", "int_fast16_t",
    "int_fast32_t", "int_fast64_t", "uint_fast8_t", "uint_fast16_t", "uint_fast32_t",
    "uint_fast64_t", "intptr_t", "uintptr_t", "intmax_t", "uintmax_t", "size_t", "ptrdiff_t",
    "wchar_t", "max_align_t", "div_t", "ldiv_t", "lldiv_t", "float_t", "double_t",
    /* <stdlib.h>, <string.h> */
    "atof", "atoi", "atol", "atoll", "strtod", "strtof", "strtold", "strtol", "strtoll",
    "strtoul", "strtoull", "rand", "srand", "calloc", "free", "malloc", "realloc",
    "aligned_alloc", "abort", "atexit", "at_quick_exit", "exit", "quick_exit", "_Exit",
    "getenv", "system", "bsearch", "qsort", "abs", "labs", "llabs", "div", "ldiv", "lldiv",
    "mblen", "mbtowc", "wctomb", "mbstowcs", "wcstombs", "memcpy", "memmove", "strcpy",
    "strncpy", "strcat", "strncat", "memcmp", "strcmp", "strcoll", "strncmp", "strxfrm",
    "memchr", "strchr", "strcspn", "strpbrk", "strrchr", "strspn", "strstr", "strtok",
    "memset", "strerror", "strlen",
    /* C++ keywords that C does not have */
    "alignas", "alignof", "and", "and_eq", "bitand", "bitor", "catch", "char8_t", "char16_t",
    "char32_t", "class", "compl", "concept", "consteval", "constexpr", "constinit",
    "const_cast", "co_await", "co_return", "co_yield", "decltype", "delete", "dynamic_cast",
    "explicit", "export", "friend", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "reinterpret_cast",
    "requires", "static_assert", "static_cast", "template", "this", "thread_local", "throw",
    "try", "typeid", "typename", "using", "virtual", "xor", "xor_eq",
};

/* The functions of <math.h>, each also with the suffixes f and l (expf, expl). */
static const char *const c_math[] = {
    "acos", "asin", "atan", "atan2", "cos", "sin", "tan", "acosh", "asinh", "atanh", "cosh",
    "sinh", "tanh", "exp", "exp2", "expm1", "frexp", "ilogb", "ldexp", "log", "log10", "log1p",
    "log2", "logb", "modf", "scalbn", "scalbln", "cbrt", "fabs", "hypot", "pow", "sqrt", "erf",
    "erfc", "lgamma", "tgamma", "ceil", "floor", "nearbyint", "rint", "lrint", "llrint",
    "round", "lround", "llround", "trunc", "fmod", "remainder", "remquo", "copysign", "nan",
    "nextafter", "nexttoward", "fdim", "fmax", "fmin", "fma",
};

/* The names above (the math functions with each suffix) in an open-addressing hash set, built
 * once: the emitter asks for every local it names. At most half full (checked when built). */
#define LIBRARY_SLOTS 1024
static const char *library_set[LIBRARY_SLOTS];
static char math_names[countof(c_math) * 3][16];
static pthread_once_t library_once = PTHREAD_ONCE_INIT;

static size_t library_slot(const char *name)
{
    size_t i = (size_t)hash_bytes(name, strlen(name)) & (LIBRARY_SLOTS - 1);
    while (library_set[i] && strcmp(library_set[i], name) != 0)
        i = (i + 1) & (LIBRARY_SLOTS - 1);
    return i;
}

static void library_build(void)
{
    static const char *const sfx[] = {"", "f", "l"};
    _Static_assert(2 * (countof(c_library) + countof(math_names)) <= LIBRARY_SLOTS,
                   "the set of C's names is at most half full");
    for (size_t i = 0; i < countof(c_library); i++)
        library_set[library_slot(c_library[i])] = c_library[i];
    for (size_t i = 0; i < countof(c_math); i++)
        for (size_t k = 0; k < 3; k++) {
            char *m = math_names[i * 3 + k];
            snprintf(m, sizeof math_names[0], "%s%s", c_math[i], sfx[k]);
            library_set[library_slot(m)] = m;
        }
}

bool is_c_library_name(const char *name)
{
    pthread_once(&library_once, library_build);
    return library_set[library_slot(name)] != NULL;
}
