/* SPDX-License-Identifier: Apache-2.0 */
/* text.c - result memory and the text checks of svc/core.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "svc/core.h"

char *svc_alloc_strdup(const svc_alloc_t *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = a->fn(a->ctx, n);

    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

long svc_utf8_chars(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    long n = 0;

    while (*p != '\0') {
        int len = *p < 0x80           ? 1
                  : (*p >> 5) == 0x6  ? 2
                  : (*p >> 4) == 0xE  ? 3
                  : (*p >> 3) == 0x1E ? 4
                                      : 0;
        if (len == 0)
            return -1;
        for (int i = 1; i < len; i++)
            if ((p[i] & 0xC0) != 0x80)
                return -1;
        p += len;
        n++;
    }
    return n;
}

bool svc_is_uuid(const char *s)
{
    static const char mask[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";

    if (strlen(s) != sizeof mask - 1)
        return false;
    for (size_t i = 0; mask[i] != '\0'; i++) {
        char c = s[i];
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (mask[i] == '-' ? c != '-' : !hex)
            return false;
    }
    return true;
}

size_t svc_idempotency_key_bad_byte(const char *s, size_t len)
{
    size_t i = 0;

    while (i < len && (unsigned char)s[i] >= SVC_IDEMPOTENCY_KEY_FIRST &&
           (unsigned char)s[i] <= SVC_IDEMPOTENCY_KEY_LAST)
        i++;
    return i;
}

bool svc_idempotency_key_valid(const char *s, size_t len)
{
    return len >= SVC_IDEMPOTENCY_KEY_MIN && len <= SVC_IDEMPOTENCY_KEY_MAX &&
           svc_idempotency_key_bad_byte(s, len) == len;
}

void svc_text_printf(svc_text_t *t, const char *fmt, ...)
{
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(room > 0 ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n;
}

const uint64_t svc_latency_bounds_ns[SVC_LATENCY_BUCKETS] = {
    1000000ull,    2500000ull,    5000000ull,    10000000ull,  25000000ull,
    50000000ull,   100000000ull,  250000000ull,  500000000ull, 1000000000ull,
    2500000000ull, 5000000000ull, 10000000000ull};
const char *const svc_latency_le[SVC_LATENCY_BUCKETS] = {
    "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
    "0.25",  "0.5",    "1",     "2.5",  "5",     "10"};

unsigned svc_latency_bucket(uint64_t ns)
{
    unsigned b = 0;

    while (b < SVC_LATENCY_BUCKETS && ns > svc_latency_bounds_ns[b])
        b++;
    return b;
}

svc_text_t svc_text_on(char *buf, size_t cap)
{
    if (cap > 0)
        buf[0] = '\0';
    return (svc_text_t){buf, cap, 0};
}

svc_err_t svc_text_end(const svc_text_t *t, size_t *len)
{
    if (len != NULL)
        *len = t->len;
    return t->len < t->cap ? SVC_OK : SVC_ERANGE;
}
