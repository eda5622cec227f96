/* SPDX-License-Identifier: Apache-2.0 */
/* bench_pct.h - the benchmarks' one percentile rule: nearest rank over sorted samples. */
#ifndef BENCH_PCT_H
#define BENCH_PCT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* The index of the p-th percentile (0 < p <= 100) among n > 0 sorted samples. */
static inline size_t bench_rank(size_t n, double p)
{
    size_t k = (size_t)(p / 100.0 * (double)n + 0.999999);

    return k < 1 ? 0 : (k > n ? n - 1 : k - 1);
}

/* The p-th percentile of n sorted doubles; 0 when there are none. */
static inline double bench_pct(const double *sorted, size_t n, double p)
{
    return n == 0 ? 0 : sorted[bench_rank(n, p)];
}

/* The p-th percentile of n sorted nanosecond samples, in ms; 0 when there are none. */
static inline double bench_pct_ms(const uint64_t *sorted_ns, size_t n, double p)
{
    return n == 0 ? 0 : (double)sorted_ns[bench_rank(n, p)] / 1e6;
}

/* qsort comparators. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static inline int bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The median of n > 0 runs, and the best (lowest) run: on a busy machine
 * the best is the truer figure for the code itself, the median for what a
 * call meets. */
typedef struct bench_figure {
    double median, best;
} bench_figure_t;

/* Sorts v (n > 0 figures, lower is better) and takes both. */
static inline bench_figure_t bench_figure(double *v, size_t n)
{
    qsort(v, n, sizeof v[0], bench_cmp_double);
    return (bench_figure_t){v[n / 2], v[0]};
}

#endif
