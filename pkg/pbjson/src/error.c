/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error.c - error text. Messages quote parts of the input, so they are kept
 * short (an excerpt, not the whole value) and always valid UTF-8: the
 * gateway puts them into a JSON error body, and the encoder refuses
 * invalid UTF-8.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Input bytes quoted in an error message before "..." is appended. */
#define EXCERPT_MAX 64

void pbj__errf(char errbuf[static SVC_ERRBUF_LEN], const char *fmt, ...)
{
    va_list ap;

    if (errbuf == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(errbuf, SVC_ERRBUF_LEN, fmt, ap);
    va_end(ap);
    pbj__utf8_trim_tail(errbuf);
}

/* Appends n bytes to out[*o] if they fit before the room kept for the
 * closing quote, "..." and NUL. */
static bool put(char *out, size_t cap, size_t *o, const char *p, size_t n)
{
    if (*o + n + 5 > cap)
        return false;
    memcpy(out + *o, p, n);
    *o += n;
    return true;
}

/* The escape Go's %q uses for byte c, or 0 bytes when c is copied. */
static size_t quote_escape(unsigned char c, char esc[5])
{
    static const char hex[] = "0123456789abcdef";
    const char *named = NULL;

    switch (c) {
    case '"':
        named = "\\\"";
        break;
    case '\\':
        named = "\\\\";
        break;
    case '\a':
        named = "\\a";
        break;
    case '\b':
        named = "\\b";
        break;
    case '\f':
        named = "\\f";
        break;
    case '\n':
        named = "\\n";
        break;
    case '\r':
        named = "\\r";
        break;
    case '\t':
        named = "\\t";
        break;
    case '\v':
        named = "\\v";
        break;
    default:
        break;
    }
    if (named != NULL) {
        memcpy(esc, named, 3);
        return 2;
    }
    if (c >= 0x20 && c < 0x7f)
        return 0;
    esc[0] = '\\';
    esc[1] = 'x';
    esc[2] = hex[c >> 4];
    esc[3] = hex[c & 0xf];
    return 4;
}

void pbj__quote(const char *s, size_t n, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0, i = 0;
    bool cut = false;

    out[o++] = '"';
    while (i < n) {
        char esc[5];
        size_t k = p[i] >= 0x80 ? pbj__utf8_seq(p + i, n - i) : 0;
        size_t e = k == 0 ? quote_escape(p[i], esc) : 0;
        bool ok;
        if (i >= EXCERPT_MAX) {
            cut = true;
            break;
        }
        if (k > 0)
            ok = put(out, cap, &o, s + i, k); /* valid UTF-8 is printed as is */
        else if (e > 0)
            ok = put(out, cap, &o, esc, e);
        else
            ok = put(out, cap, &o, s + i, 1);
        if (!ok) {
            cut = true;
            break;
        }
        i += k > 0 ? k : 1;
    }
    out[o++] = '"';
    if (cut) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

void pbj__excerpt(const char *s, size_t n, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0, i = 0;

    while (i < n && i < EXCERPT_MAX) {
        size_t k = p[i] >= 0x80 ? pbj__utf8_seq(p + i, n - i) : 1;
        if (k == 0 || o + k + 4 > cap)
            break;
        memcpy(out + o, s + i, k);
        o += k;
        i += k;
    }
    if (i < n) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}
