/* SPDX-License-Identifier: Apache-2.0 */
/*
 * number.c - JSON numbers the way protojson reads and writes them.
 *
 * Output: Go's strconv.AppendFloat(v, 'f' or 'e', -1, bits), i.e. the
 * shortest digits that read back to the same value, in plain notation for
 * 1e-6 <= |v| < 1e21 and exponent notation outside (encoding/json's rule,
 * which protojson copies). We find the shortest digits by trying %.*e with
 * 1..17 (or 1..9 for float) significant digits and reading each back: the
 * correctly rounded P-digit decimal is the closest one, so if any P-digit
 * decimal reads back to v, that one does.
 *
 * Input: integers are converted from the decimal text itself, never through
 * a double, so 9007199254740993 and 18446744073709551615 survive.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ------------------------------------------------------------------------
 * Formatting
 * ------------------------------------------------------------------------ */

/* Decimal digits of |v| ("d1d2...dn", no trailing zeros) and the exponent
 * of d1, from the shortest %.*e text that reads back to v. */
static void shortest_digits(double v, bool is_float, char digits[20], int *exp10)
{
    char tmp[PBJ__NUM_MAX];
    int max_prec = is_float ? 9 : 17;
    size_t nd = 0;
    const char *e;

    for (int prec = 1; prec <= max_prec; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, fabs(v));
        if (is_float ? strtof(tmp, NULL) == (float)fabs(v) : strtod(tmp, NULL) == fabs(v))
            break;
    }
    /* tmp is "d.ddde+XX"; the separator is skipped as "not a digit" so the
     * result does not depend on the locale's decimal point. */
    e = strchr(tmp, 'e');
    for (const char *p = tmp; p < e; p++)
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    *exp10 = (int)strtol(e + 1, NULL, 10);
}

/* d1.d2...dn e±X, with the exponent's leading zeros dropped (Go writes
 * e-07 and protojson then shortens it to e-7; positive exponents here are
 * always >= 21). */
static size_t put_exponent_form(char *out, const char *digits, int exp10)
{
    size_t o = 0, nd = strlen(digits);

    out[o++] = digits[0];
    if (nd > 1) {
        out[o++] = '.';
        memcpy(out + o, digits + 1, nd - 1);
        o += nd - 1;
    }
    o += (size_t)snprintf(out + o, PBJ__NUM_MAX - o, "e%c%d", exp10 < 0 ? '-' : '+', abs(exp10));
    return o;
}

/* Plain notation: value = 0.d1d2...dn * 10^(exp10 + 1). exp10 is in
 * [-7, 20] here, so the result fits PBJ__NUM_MAX. */
static size_t put_plain_form(char *out, const char *digits, int exp10)
{
    size_t o = 0, nd = strlen(digits);

    if (exp10 < 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = -1; i > exp10; i--)
            out[o++] = '0';
        memcpy(out + o, digits, nd);
        return o + nd;
    }
    for (size_t i = 0; i <= (size_t)exp10; i++)
        out[o++] = i < nd ? digits[i] : '0';
    if (nd > (size_t)exp10 + 1) {
        out[o++] = '.';
        memcpy(out + o, digits + exp10 + 1, nd - (size_t)exp10 - 1);
        o += nd - (size_t)exp10 - 1;
    }
    return o;
}

static size_t fmt_special(double v, char *out)
{
    const char *s = isnan(v) ? "\"NaN\"" : v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    size_t n = strlen(s);

    memcpy(out, s, n + 1);
    return n;
}

static size_t fmt_number(double v, bool is_float, bool exponent_form, char *out)
{
    char digits[20];
    int exp10 = 0;
    size_t o = 0;

    if (isnan(v) || isinf(v))
        return fmt_special(v, out);
    if (signbit(v))
        out[o++] = '-';
    if (v == 0) {
        out[o++] = '0';
    } else {
        shortest_digits(v, is_float, digits, &exp10);
        o += exponent_form ? put_exponent_form(out + o, digits, exp10)
                           : put_plain_form(out + o, digits, exp10);
    }
    out[o] = '\0';
    return o;
}

size_t pbj__fmt_double(double v, char out[PBJ__NUM_MAX])
{
    double a = fabs(v);

    return fmt_number(v, false, a != 0 && (a < 1e-6 || a >= 1e21), out);
}

size_t pbj__fmt_float(float v, char out[PBJ__NUM_MAX])
{
    float a = fabsf(v);

    /* Go compares float32(abs) with the constants converted to float32. */
    return fmt_number(v, true, a != 0 && (a < 1e-6f || a >= 1e21f), out);
}

/* ------------------------------------------------------------------------
 * Parsing
 * ------------------------------------------------------------------------ */

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static size_t digits_len(const char *s, size_t n, size_t i)
{
    size_t j = i;

    while (j < n && is_digit(s[j]))
        j++;
    return j - i;
}

size_t pbj__json_number_len(const char *s, size_t n)
{
    size_t i = 0, k;

    if (i < n && s[i] == '-')
        i++;
    if (i < n && s[i] == '0') {
        i++;
    } else {
        k = digits_len(s, n, i);
        if (k == 0)
            return 0;
        i += k;
    }
    if (i < n && s[i] == '.') {
        k = digits_len(s, n, i + 1);
        if (k == 0)
            return 0;
        i += 1 + k;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        k = digits_len(s, n, i);
        if (k == 0)
            return 0;
        i += k;
    }
    return i;
}

/* The parts of a validated JSON number, as protobuf-go's parseNumberParts:
 * integer digits without the leading zero, fraction digits without trailing
 * zeros, and the exponent text. */
typedef struct {
    bool neg;
    const char *intp, *frac, *exp;
    size_t n_int, n_frac, n_exp;
} num_parts_t;

static void split_number(const char *s, size_t n, num_parts_t *p)
{
    size_t i = 0;

    memset(p, 0, sizeof(*p));
    if (s[i] == '-') {
        p->neg = true;
        i++;
    }
    if (s[i] == '0') {
        i++;
    } else {
        p->intp = s + i;
        p->n_int = digits_len(s, n, i);
        i += p->n_int;
    }
    if (i < n && s[i] == '.') {
        p->frac = s + i + 1;
        p->n_frac = digits_len(s, n, i + 1);
        i += 1 + p->n_frac;
        while (p->n_frac > 0 && p->frac[p->n_frac - 1] == '0')
            p->n_frac--;
    }
    if (i < n) {
        p->exp = s + i + 1;
        p->n_exp = n - i - 1;
    }
}

/* The exponent as protobuf-go reads it (strconv.ParseInt(exp, 10, 32)). */
static bool parse_exponent(const num_parts_t *p, int64_t *e)
{
    *e = 0;
    return p->n_exp == 0 || pbj__parse_int(p->exp, p->n_exp, 10, 32, e) == PBJ__NUM_OK;
}

/* Accumulates n decimal digits into *mag; false on 64-bit overflow. */
static bool add_digits(const char *d, size_t n, uint64_t *mag)
{
    for (size_t i = 0; i < n; i++) {
        unsigned digit = (unsigned)(d[i] - '0');
        if (*mag > (UINT64_MAX - digit) / 10)
            return false;
        *mag = *mag * 10 + digit;
    }
    return true;
}

/* protobuf-go's normalizeToIntString, computing the value instead of the
 * string: shift fraction digits into the integer for a positive exponent,
 * shift zeros out of it for a negative one, fail if that leaves a
 * fraction. */
bool pbj__json_integer(const char *s, size_t n, bool *neg, uint64_t *mag)
{
    num_parts_t p;
    int64_t e;

    split_number(s, n, &p);
    *mag = 0;
    *neg = false;
    if (p.n_int == 0 && p.n_frac == 0)
        return true; /* any spelling of zero, "-0" included */
    if (!parse_exponent(&p, &e))
        return false;
    *neg = p.neg;
    if (e >= 0) {
        if ((int64_t)p.n_frac > e || (int64_t)p.n_int + e > 20)
            return false;
        if (!add_digits(p.intp, p.n_int, mag) || !add_digits(p.frac, p.n_frac, mag))
            return false;
        for (int64_t i = 0; i < e - (int64_t)p.n_frac; i++)
            if (!add_digits("0", 1, mag))
                return false;
        return true;
    }
    if (p.n_frac > 0 || (int64_t)p.n_int + e <= 0)
        return false;
    for (size_t i = (size_t)((int64_t)p.n_int + e); i < p.n_int; i++)
        if (p.intp[i] != '0')
            return false;
    return add_digits(p.intp, (size_t)((int64_t)p.n_int + e), mag);
}

/* strtod needs a NUL-terminated copy; numbers are short except in hostile
 * input, so only those pay for an allocation. */
bool pbj__strtod(ProtobufCAllocator *a, const char *s, size_t n, unsigned bits, double *out,
                 bool *nomem)
{
    char small[64];
    char *copy = n < sizeof(small) ? small : pbj__alloc(a, n + 1);
    char *end = NULL;
    bool ok;

    *nomem = copy == NULL;
    if (copy == NULL)
        return false;
    memcpy(copy, s, n);
    copy[n] = '\0';
    *out = bits == 32 ? (double)strtof(copy, &end) : strtod(copy, &end);
    /* Overflow is an error (Go: "value out of range"); underflow to zero or
     * a subnormal is not, although C reports both as ERANGE, so errno is
     * not consulted. */
    ok = end == copy + n && !isinf(*out);
    if (copy != small)
        pbj__free(a, copy);
    return ok;
}
