/* SPDX-License-Identifier: Apache-2.0 */
/* bench_util.h - what the benchmark programs share besides percentiles
 * (bench_pct.h): a fatal error and the monotonic clock. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* "<prog>: <message>" on stderr, then exit(1): the benchmark cannot go on. */
static inline void bench_die(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static inline void bench_die(const char *prog, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
