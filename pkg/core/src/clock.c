/* SPDX-License-Identifier: Apache-2.0 */
/* clock.c - the monotonic clock behind svc_clock_t. */
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
