/* SPDX-License-Identifier: Apache-2.0 */
/*
 * b64url.c - base64url without padding (see b64url.h). OpenSSL's
 * EVP_DecodeBlock reads the standard alphabet with padding and accepts
 * white space, so it would need a translated copy of every part and still
 * be more lenient than RFC 7515 allows; a table is shorter and exact.
 */
#include "b64url.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* 0..63, or -1 for a character outside the alphabet. */
static int value_of(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

bool gw_b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t n = 0;

    if (len % 4 == 1)
        return false;
    for (size_t i = 0; i < len; i++) {
        int v = value_of((unsigned char)in[i]);
        if (v < 0)
            return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == cap)
                return false;
            out[n++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    /* The 2 or 4 bits left over must be zero: see the header. */
    if (acc != 0)
        return false;
    *out_len = n;
    return true;
}

size_t gw_b64url_encode(const uint8_t *in, size_t n, char *out, size_t cap)
{
    size_t need = GW_B64URL_ENCODED_LEN(n), o = 0;
    uint32_t acc = 0;
    unsigned bits = 0;

    if (cap <= need)
        return 0;
    for (size_t i = 0; i < n; i++) {
        acc = (acc << 8) | in[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[o++] = alphabet[(acc >> bits) & 63];
        }
        acc &= (1u << bits) - 1;
    }
    if (bits > 0)
        out[o++] = alphabet[(acc << (6 - bits)) & 63];
    out[o] = '\0';
    return o;
}
