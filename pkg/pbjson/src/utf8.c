/* SPDX-License-Identifier: Apache-2.0 */
/*
 * utf8.c - UTF-8 validation and encoding with Go's rules (unicode/utf8):
 * overlong forms, UTF-16 surrogates and code points above U+10FFFF are
 * invalid. protojson rejects such strings on input and on output.
 */
#include <string.h>

#include "internal.h"

static bool is_cont(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

size_t pbj__utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];

    if (c < 0x80)
        return 1;
    /* The second byte's range depends on the first; this is the table in
     * RFC 3629 section 4, which excludes overlongs and surrogates. */
    if (c >= 0xC2 && c <= 0xDF)
        return n >= 2 && is_cont(s[1]) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned char lo = c == 0xE0 ? 0xA0 : 0x80;
        unsigned char hi = c == 0xED ? 0x9F : 0xBF;
        return n >= 3 && s[1] >= lo && s[1] <= hi && is_cont(s[2]) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned char lo = c == 0xF0 ? 0x90 : 0x80;
        unsigned char hi = c == 0xF4 ? 0x8F : 0xBF;
        return n >= 4 && s[1] >= lo && s[1] <= hi && is_cont(s[2]) && is_cont(s[3]) ? 4 : 0;
    }
    return 0;
}

bool pbj__utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        size_t k;
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        k = pbj__utf8_seq(p + i, n - i);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

size_t pbj__utf8_put(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

void pbj__utf8_trim_tail(char *s)
{
    size_t n = strlen(s), start = n;

    /* Step back over at most three continuation bytes to the lead byte of
     * the last sequence; drop the sequence if it is incomplete. */
    while (start > 0 && n - start < 4 && is_cont((unsigned char)s[start - 1]))
        start--;
    if (start == 0 && n > 0 && is_cont((unsigned char)s[0]))
        return;
    if (start > 0 && (unsigned char)s[start - 1] >= 0x80) {
        start--;
        if (pbj__utf8_seq((const unsigned char *)s + start, n - start) != n - start)
            s[start] = '\0';
    }
}
