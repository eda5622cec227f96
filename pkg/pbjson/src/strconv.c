/* SPDX-License-Identifier: Apache-2.0 */
/*
 * strconv.c - Go's strconv.ParseInt, ParseUint, ParseBool and ParseFloat.
 *
 * grpc-gateway parses path and query parameters with these, so accepting
 * exactly their language (signs, base prefixes, underscores, "inf") keeps
 * the C gateway's 400s where the Go gateway has them. The C library's
 * strtol family differs in ways that matter here: it skips leading
 * whitespace, accepts a sign on unsigned numbers and knows no underscores.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

static char lower(char c)
{
    return (char)(c | 0x20);
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
    return is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'f');
}

/* Go's underscoreOK: underscores only between digits, or between a base
 * prefix and a digit. */
static bool underscore_ok(const char *s, size_t n)
{
    char saw = '^'; /* ^ start, 0 digit or prefix, _ underscore, ! other */
    size_t i = 0;
    bool hex = false;

    if (n >= 1 && (s[0] == '-' || s[0] == '+')) {
        s++;
        n--;
    }
    if (n >= 2 && s[0] == '0' && (lower(s[1]) == 'b' || lower(s[1]) == 'o' || lower(s[1]) == 'x')) {
        i = 2;
        saw = '0';
        hex = lower(s[1]) == 'x';
    }
    for (; i < n; i++) {
        if (is_digit(s[i]) || (hex && is_hex(s[i]))) {
            saw = '0';
        } else if (s[i] == '_') {
            if (saw != '0')
                return false;
            saw = '_';
        } else {
            if (saw == '_')
                return false;
            saw = '!';
        }
    }
    return saw != '_';
}

/* Base 0: "0x", "0o", "0b" or a leading "0" (octal) choose the base. */
static int detect_base(const char **s, size_t *n)
{
    if ((*s)[0] != '0')
        return 10;
    if (*n >= 3 && lower((*s)[1]) == 'x') {
        *s += 2, *n -= 2;
        return 16;
    }
    if (*n >= 3 && lower((*s)[1]) == 'o') {
        *s += 2, *n -= 2;
        return 8;
    }
    if (*n >= 3 && lower((*s)[1]) == 'b') {
        *s += 2, *n -= 2;
        return 2;
    }
    *s += 1, *n -= 1;
    return 8;
}

static int digit_value(char c)
{
    if (is_digit(c))
        return c - '0';
    if (lower(c) >= 'a' && lower(c) <= 'z')
        return lower(c) - 'a' + 10;
    return 99;
}

pbj__numerr_t pbj__parse_uint(const char *s, size_t n, int base, unsigned bits, uint64_t *out)
{
    const char *s0 = s;
    size_t n0 = n;
    uint64_t max = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1, v = 0;
    bool base0 = base == 0, underscores = false;

    *out = 0;
    if (n == 0)
        return PBJ__NUM_SYNTAX;
    if (base0)
        base = detect_base(&s, &n);
    for (size_t i = 0; i < n; i++) {
        int d;
        if (s[i] == '_' && base0) {
            underscores = true;
            continue;
        }
        d = digit_value(s[i]);
        if (d >= base)
            return PBJ__NUM_SYNTAX;
        /* Like Go, stop at the first overflow: a range error wins over a
         * syntax error later in the text. */
        if (v > (max - (uint64_t)d) / (uint64_t)base) {
            *out = max;
            return PBJ__NUM_RANGE;
        }
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (underscores && !underscore_ok(s0, n0))
        return PBJ__NUM_SYNTAX;
    *out = v;
    return PBJ__NUM_OK;
}

pbj__numerr_t pbj__parse_int(const char *s, size_t n, int base, unsigned bits, int64_t *out)
{
    uint64_t mag, limit = UINT64_C(1) << (bits - 1);
    bool neg = false;
    pbj__numerr_t r;

    *out = 0;
    if (n == 0)
        return PBJ__NUM_SYNTAX;
    if (s[0] == '+' || s[0] == '-') {
        neg = s[0] == '-';
        s++;
        n--;
    }
    /* Go parses the magnitude with the same bit size, which decides
     * whether an overlong number is a range or a syntax error. */
    r = pbj__parse_uint(s, n, base, bits, &mag);
    if (r == PBJ__NUM_SYNTAX)
        return r;
    if (r == PBJ__NUM_RANGE || mag > limit || (!neg && mag == limit))
        return PBJ__NUM_RANGE;
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return PBJ__NUM_OK;
}

bool pbj__parse_bool(const char *s, size_t n, bool *out)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};

    for (size_t i = 0; i < SVC_COUNTOF(yes); i++) {
        if (strlen(yes[i]) == n && memcmp(yes[i], s, n) == 0) {
            *out = true;
            return true;
        }
        if (strlen(no[i]) == n && memcmp(no[i], s, n) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

static bool equal_fold(const char *s, size_t n, const char *word)
{
    size_t k = strlen(word);

    if (n != k)
        return false;
    for (size_t i = 0; i < k; i++)
        if (lower(s[i]) != word[i])
            return false;
    return true;
}

/* Go's special(): [+-]inf, [+-]infinity, nan (no sign), any case. */
static bool parse_special(const char *s, size_t n, double *out)
{
    double sign = 1;

    if (n > 0 && (s[0] == '+' || s[0] == '-')) {
        sign = s[0] == '-' ? -1 : 1;
        if (equal_fold(s + 1, n - 1, "inf") || equal_fold(s + 1, n - 1, "infinity")) {
            *out = sign * INFINITY;
            return true;
        }
        return false;
    }
    if (equal_fold(s, n, "inf") || equal_fold(s, n, "infinity")) {
        *out = INFINITY;
        return true;
    }
    if (equal_fold(s, n, "nan")) {
        *out = NAN;
        return true;
    }
    return false;
}

/* Go's readFloat grammar: [+-] (digits [. digits] | . digits) [e [+-] digits]
 * or 0x hexdigits [. hexdigits] p [+-] digits, with underscores allowed
 * among digits (checked by underscore_ok). */
static bool float_syntax_ok(const char *s, size_t n)
{
    size_t i = 0, mant = 0;
    bool hex = false;
    char exp_char = 'e';

    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    if (i + 2 < n && s[i] == '0' && lower(s[i + 1]) == 'x') {
        hex = true;
        exp_char = 'p';
        i += 2;
    }
    for (bool dot = false; i < n; i++) {
        if (s[i] == '_')
            continue;
        if (s[i] == '.' && !dot) {
            dot = true;
            continue;
        }
        if (!(hex ? is_hex(s[i]) : is_digit(s[i])))
            break;
        mant++;
    }
    if (mant == 0)
        return false;
    if (i < n && lower(s[i]) == exp_char) {
        size_t k = 0;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        for (; i < n && (is_digit(s[i]) || s[i] == '_'); i++)
            k += s[i] != '_';
        if (k == 0)
            return false;
    } else if (hex) {
        return false; /* a hex mantissa needs a p exponent */
    }
    return i == n && (memchr(s, '_', n) == NULL || underscore_ok(s, n));
}

pbj__numerr_t pbj__parse_float(ProtobufCAllocator *a, const char *s, size_t n, unsigned bits,
                               double *out, bool *nomem)
{
    char small[64];
    char *clean = NULL;
    size_t k = 0;
    pbj__numerr_t r = PBJ__NUM_SYNTAX;

    *nomem = false;
    *out = 0;
    if (parse_special(s, n, out))
        return PBJ__NUM_OK;
    if (!float_syntax_ok(s, n))
        return PBJ__NUM_SYNTAX;
    /* strtod knows no underscores: drop them (their placement is checked). */
    clean = n < sizeof(small) ? small : pbj__alloc(a, n);
    if (clean == NULL) {
        *nomem = true;
        return PBJ__NUM_SYNTAX;
    }
    for (size_t i = 0; i < n; i++)
        if (s[i] != '_')
            clean[k++] = s[i];
    if (pbj__strtod(a, clean, k, bits, out, nomem))
        r = PBJ__NUM_OK;
    else if (!*nomem)
        r = PBJ__NUM_RANGE;
    if (clean != small)
        pbj__free(a, clean);
    return r;
}
