/* SPDX-License-Identifier: Apache-2.0 */
/* page_token.c - see page_token.h. Layout before base64: "v1:<seq>:<fnv32 hex>". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "page_token.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static uint32_t fnv1a(const char *s, size_t n)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* Unpadded URL-safe base64; out must hold 4/3 n + 1 bytes. */
static void b64_encode(const unsigned char *in, size_t n, char *out)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        size_t left = n - i;
        if (left > 1)
            v |= (uint32_t)in[i + 1] << 8;
        if (left > 2)
            v |= in[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        if (left > 1)
            out[o++] = b64[(v >> 6) & 63];
        if (left > 2)
            out[o++] = b64[v & 63];
    }
    out[o] = '\0';
}

static int b64_value(char c)
{
    const char *p = c != '\0' ? strchr(b64, c) : NULL;
    return p != NULL ? (int)(p - b64) : -1;
}

/* Returns the decoded length, or -1 for a character outside the alphabet
 * or an impossible length. */
static int b64_decode(const char *in, unsigned char *out, size_t cap)
{
    size_t n = strlen(in), o = 0;
    uint32_t acc = 0;
    int bits = 0;

    if (n % 4 == 1)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value(in[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap)
                return -1;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    return (int)o;
}

void cat_page_token_encode(int64_t after, char out[CAT_PAGE_TOKEN_MAX])
{
    char body[40], text[48];
    int n = snprintf(body, sizeof body, "v1:%" PRId64, after);
    int m = snprintf(text, sizeof text, "%s:%08" PRIx32, body, fnv1a(body, (size_t)n));

    b64_encode((const unsigned char *)text, (size_t)m, out);
}

svc_err_t cat_page_token_decode(const char *token, int64_t *after)
{
    unsigned char raw[48];
    char text[49], *sep, *end;
    long long v;
    int n;

    if (strlen(token) >= CAT_PAGE_TOKEN_MAX)
        return SVC_EINVAL;
    n = b64_decode(token, raw, sizeof raw);
    if (n < 0)
        return SVC_EINVAL;
    memcpy(text, raw, (size_t)n);
    text[n] = '\0';
    sep = strrchr(text, ':');
    if (strncmp(text, "v1:", 3) != 0 || sep == NULL || sep == text + 2 || strlen(sep + 1) != 8)
        return SVC_EINVAL;
    if (strtoul(sep + 1, &end, 16) != fnv1a(text, (size_t)(sep - text)) || *end != '\0')
        return SVC_EINVAL;
    *sep = '\0';
    v = strtoll(text + 3, &end, 10);
    if (*end != '\0' || end == text + 3 || v < 0)
        return SVC_EINVAL;
    *after = v;
    return SVC_OK;
}
