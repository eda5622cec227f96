/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base64.c - the base64 that protojson writes (standard alphabet, padded)
 * and the decoder with Go's encoding/base64 semantics, which protojson and
 * grpc-gateway use on input.
 *
 * Go's decoder is not strict: it skips CR and LF anywhere and ignores
 * non-zero bits left over in the last quantum. Padding is required by the
 * padded encodings and forbidden by the unpadded ones. Mirroring that
 * exactly keeps us from rejecting what the Go gateway accepts, and the
 * reverse.
 */
#include <string.h>

#include "internal.h"

static const char std_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t pbj__b64_encoded_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

void pbj__b64_encode(const uint8_t *in, size_t n, char *out)
{
    size_t i = 0, o = 0;

    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = std_alphabet[v >> 18];
        out[o++] = std_alphabet[(v >> 12) & 63];
        out[o++] = std_alphabet[(v >> 6) & 63];
        out[o++] = std_alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        out[o++] = std_alphabet[v >> 18];
        out[o++] = std_alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < n ? std_alphabet[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
}

/* The 6-bit value of c in the chosen alphabet, or -1. */
static int sextet(unsigned char c, bool url)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == (url ? '-' : '+'))
        return 62;
    if (c == (url ? '_' : '/'))
        return 63;
    return -1;
}

static bool is_newline(char c)
{
    return c == '\n' || c == '\r';
}

static size_t skip_newlines(const char *s, size_t n, size_t i)
{
    while (i < n && is_newline(s[i]))
        i++;
    return i;
}

/* After a '=' at quantum position j: "xx==" or "xxx=", then only newlines.
 * Returns false for bad padding or trailing data (Go's CorruptInputError). */
static bool check_padding(const char *s, size_t n, size_t *si, unsigned j)
{
    if (j < 2)
        return false;
    if (j == 2) {
        *si = skip_newlines(s, n, *si);
        if (*si == n || s[*si] != '=')
            return false;
        (*si)++;
    }
    return skip_newlines(s, n, *si) == n;
}

/* One quantum: up to four sextets (newlines skipped). Mirrors Go's
 * decodeQuantum. Sets *done at the end of the input or after padding. */
static bool decode_quantum(const char *s, size_t n, size_t *si, bool url, bool padded, uint8_t *out,
                           size_t *o, bool *done)
{
    uint32_t v = 0;
    unsigned j = 0;

    while (j < 4) {
        int x;
        if (*si == n) {
            if (j == 0) {
                *done = true;
                return true;
            }
            if (j == 1 || padded)
                return false;
            *done = true;
            break;
        }
        x = sextet((unsigned char)s[*si], url);
        (*si)++;
        if (x >= 0) {
            v |= (uint32_t)x << (18 - 6 * j);
            j++;
            continue;
        }
        if (is_newline(s[*si - 1]))
            continue;
        if (!padded || s[*si - 1] != '=' || !check_padding(s, n, si, j))
            return false;
        *done = true;
        break;
    }
    /* j sextets carry j - 1 whole bytes (j is 2, 3 or 4 here). */
    out[(*o)++] = (uint8_t)(v >> 16);
    if (j >= 3)
        out[(*o)++] = (uint8_t)(v >> 8);
    if (j == 4)
        out[(*o)++] = (uint8_t)v;
    return true;
}

bool pbj__b64_decode(const char *s, size_t n, bool url, bool padded, uint8_t *out, size_t *out_len)
{
    size_t si = 0, o = 0;
    bool done = false;

    while (!done) {
        if (!decode_quantum(s, n, &si, url, padded, out, &o, &done))
            return false;
    }
    *out_len = o;
    return true;
}

bool pbj__b64_decode_protojson(const char *s, size_t n, uint8_t *out, size_t *out_len)
{
    bool url = memchr(s, '-', n) != NULL || memchr(s, '_', n) != NULL;

    return pbj__b64_decode(s, n, url, n % 4 == 0, out, out_len);
}
