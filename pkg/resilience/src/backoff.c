/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backoff.c - how long to wait before a retry, and what servers ask for.
 *
 * Exponential backoff spreads retries out in time; jitter spreads out the
 * clients that failed together, so they do not come back in lock-step
 * ("thundering herd"). Full jitter draws from the whole window and does the
 * least total work in the AWS simulations; equal jitter keeps half the
 * window as a floor. Jitter stays on at the cap too: aws-sdk-go-v2#3091 is
 * what happens when it does not.
 */
#include <limits.h>
#include <string.h>

#include "internal.h"

/* Uniform in [0, max]. max <= UINT32_MAX, so the product fits in 64 bits;
 * the top 32 bits of a good generator are its best. */
static uint64_t uniform(uint64_t random, uint64_t max)
{
    return ((random >> 32) * (max + 1)) >> 32;
}

uint32_t rs_backoff_ms(rs_jitter_t kind, uint32_t base_ms, uint32_t cap_ms, uint32_t n,
                       uint64_t random)
{
    uint64_t w = n >= 32 ? cap_ms : (uint64_t)base_ms << n;

    if (w > cap_ms)
        w = cap_ms;
    switch (kind) {
    case RS_JITTER_NONE:
        return (uint32_t)w;
    case RS_JITTER_EQUAL:
        return (uint32_t)(w / 2 + uniform(random, w - w / 2));
    case RS_JITTER_DEFAULT:
    case RS_JITTER_FULL:
    default:
        return (uint32_t)uniform(random, w);
    }
}

/* ---- the default random source and per-thread shards --------------------- */

static _Thread_local uint64_t tls_random;
_Thread_local unsigned rs__tls_shard;
static _Atomic uint64_t seed_sequence;
static _Atomic unsigned shard_sequence;

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* xorshift64*: tiny, fast, and good enough for jitter (not for secrets).
 * Each thread seeds its own from a global sequence, the clock and its own
 * address, so two threads never share a stream and no lock is needed. */
uint64_t rs__random_default(void *ctx)
{
    uint64_t x = tls_random;

    (void)ctx;
    if (x == 0) {
        x = atomic_fetch_add_explicit(&seed_sequence, 1, memory_order_relaxed);
        x = splitmix64(x ^ svc_now_ns() ^ (uint64_t)(uintptr_t)&tls_random) | 1;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    tls_random = x;
    return x * 0x2545f4914f6cdd1dull;
}

unsigned rs__shard_assign(void)
{
    unsigned s = atomic_fetch_add_explicit(&shard_sequence, 1, memory_order_relaxed) % RS__SHARDS;

    rs__tls_shard = s + 1;
    return s;
}

/* ---- server pushback ------------------------------------------------------ */

/* Parses exactly len decimal digits; false on anything else or overflow. */
static bool parse_digits(const char *s, size_t len, int64_t *out)
{
    int64_t v = 0;

    if (len == 0 || len > 18)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

int64_t rs_pushback_parse_grpc(const char *value, size_t len)
{
    int64_t ms;

    if (value == NULL)
        return RS_PUSHBACK_NONE;
    /* gRFC A6: a negative or unparsable value means "do not retry". */
    return parse_digits(value, len, &ms) ? ms : RS_PUSHBACK_STOP;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* IMF-fixdate, the only date form RFC 9110 senders may use:
 * "Sun, 06 Nov 1994 08:49:37 GMT". */
static bool parse_imf_fixdate(const char *s, size_t len, int64_t *unix_s)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    int64_t day, year, hh, mm, ss;
    const char *mon;

    if (len != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
        s[19] != ':' || s[22] != ':' || memcmp(s + 25, " GMT", 4) != 0)
        return false;
    if (!parse_digits(s + 5, 2, &day) || !parse_digits(s + 12, 4, &year) ||
        !parse_digits(s + 17, 2, &hh) || !parse_digits(s + 20, 2, &mm) ||
        !parse_digits(s + 23, 2, &ss))
        return false;
    for (mon = months; *mon != '\0' && memcmp(mon, s + 8, 3) != 0; mon += 3)
        ;
    if (*mon == '\0' || day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60)
        return false;
    *unix_s = days_from_civil(year, (mon - months) / 3 + 1, day) * 86400 + hh * 3600 + mm * 60 + ss;
    return true;
}

int64_t rs_pushback_parse_retry_after(const char *value, size_t len, int64_t now_unix_s)
{
    int64_t v;

    if (value == NULL)
        return RS_PUSHBACK_NONE;
    while (len > 0 && (value[0] == ' ' || value[0] == '\t')) {
        value++;
        len--;
    }
    while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t'))
        len--;
    if (parse_digits(value, len, &v))
        return v > INT64_MAX / 1000 ? INT64_MAX : v * 1000;
    if (parse_imf_fixdate(value, len, &v))
        return v > now_unix_s ? (v - now_unix_s) * 1000 : 0;
    return RS_PUSHBACK_NONE;
}
