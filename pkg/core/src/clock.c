/* SPDX-License-Identifier: Apache-2.0 */
/* clock.c - the monotonic clock behind svc_clock_t, and the wall clock's
 * RFC 3339 text. */
#include <stdio.h>
#include <time.h>

#include "svc/core.h"

static uint64_t monotonic_now(void *ctx)
{
    struct timespec ts;

    (void)ctx;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const svc_clock_t monotonic = {monotonic_now, NULL};

const svc_clock_t *svc_clock_monotonic(void)
{
    return &monotonic;
}

uint64_t svc_now_ns(void)
{
    return monotonic_now(NULL);
}

uint64_t svc_now_ms(void)
{
    return monotonic_now(NULL) / SVC_NS_PER_MS;
}

void svc_rfc3339_now(char out[SVC_RFC3339_LEN])
{
    struct timespec ts;
    struct tm tm;
    size_t k;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    /* strftime, not one snprintf of tm's fields: gcc -O2 cannot bound them
     * and -Wformat-truncation would refuse the buffer. */
    k = strftime(out, SVC_RFC3339_LEN, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, SVC_RFC3339_LEN - k, ".%03dZ", (int)(ts.tv_nsec / 1000000));
}
