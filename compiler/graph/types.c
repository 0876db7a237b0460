/* types.c - element types, status texts and identifiers: below the IR, so that every file of the
 * compiler may use them. */
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
