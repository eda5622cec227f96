/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ratelimit_bench.c - what gateway/ratelimit.c costs a request: ns per
 * gw_rl_check (a clock read included, as a loop would pass its own) with
 * one hot key, 10,000 keys that all fit, and 1,000,000 keys over the
 * default 65,536-bucket table (nearly every check a miss that evicts), on
 * 1 thread and on 2 threads sharing one table; and the hot key with the
 * header values formatted too (what a request that is answered pays).
 * Each figure is the median of RUNS runs, with the best run beside it, in
 * ns per check per thread; the baseline row is the loop without the
 * limiter. Issue 36's goal: <= 1 us per request.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_pct.h"
#include "bench_util.h"
#include "ratelimit.h"

#define ITERS    2000000
#define RUNS     5
#define MAX_KEYS 1000000
#define KEY_LEN  20 /* "sub:" + 16 hex digits: about a typical JWT sub */

/* Heap allocations during the timed runs, counted through link-time
 * wrappers (ratelimit.cmake): the check must make none. */
static _Atomic long allocations;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t sz);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t sz);
void *__wrap_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t sz)
{
    atomic_fetch_add(&allocations, 1);
    return __real_calloc(n, sz);
}

void *__wrap_realloc(void *p, size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __real_realloc(p, n);
}

/* Key k, written as a request's would be: "sub:" and 16 hex digits of a
 * scrambled k. Written on the fly rather than read from a table of a
 * million keys, whose cache misses a gateway (which has just parsed the
 * key) would not pay. */
static void key_of(size_t k, char *out)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t v = (uint64_t)k * UINT64_C(0x9e3779b97f4a7c15);

    memcpy(out, "sub:", 4);
    for (int i = 0; i < 16; i++)
        out[4 + i] = hex[(v >> (60 - 4 * i)) & 15];
}

typedef enum { CLOCK_ONLY, CHECK, CHECK_AND_HEADERS } mode_t_;

typedef struct job {
    gw_rl_t *rl;
    size_t n_keys;
    mode_t_ mode;
    uint32_t seed;
    pthread_barrier_t *go;
    double ns_per_check;
} job_t;

/* Per thread, so that the two-thread figures do not measure a shared
 * counter's cache line instead of the limiter. */
static _Thread_local volatile uint64_t sink;

static void *run_job(void *arg)
{
    job_t *j = arg;
    uint32_t x = j->seed;
    gw_rl_decision_t d;
    gw_rl_headers_t h;
    char key[KEY_LEN];
    uint64_t t0;

    pthread_barrier_wait(j->go);
    t0 = bench_now_ns();
    for (int i = 0; i < ITERS; i++) {
        /* A random key each time (xorshift), so that the hardware cannot
         * prefetch the buckets as it would for a sequential walk. */
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        key_of(j->n_keys == 1 ? 0 : x % j->n_keys, key);
        if (j->mode == CLOCK_ONLY) {
            sink = sink + bench_now_ns() + (unsigned char)key[5];
            continue;
        }
        (void)gw_rl_check(j->rl, 0, key, KEY_LEN, bench_now_ns(), &d);
        if (j->mode == CHECK_AND_HEADERS) {
            gw_rl_headers_format(&d, &h);
            sink = sink + (unsigned char)h.ratelimit[8];
        }
        sink = sink + d.allowed;
    }
    j->ns_per_check = (double)(bench_now_ns() - t0) / ITERS;
    return NULL;
}

static double run_once(gw_rl_t *rl, size_t n_keys, mode_t_ mode, int threads)
{
    pthread_barrier_t go;
    pthread_t th[2];
    job_t jobs[2];
    double sum = 0;

    pthread_barrier_init(&go, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        jobs[i] = (job_t){rl, n_keys, mode, 2463534242u + 977u * (uint32_t)i, &go, 0};
        if (pthread_create(&th[i], NULL, run_job, &jobs[i]) != 0)
            bench_die("ratelimit_bench", "pthread_create failed");
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        sum += jobs[i].ns_per_check;
    }
    pthread_barrier_destroy(&go);
    return sum / threads;
}

static bench_figure_t measure(gw_rl_t *rl, size_t n_keys, mode_t_ mode, int threads)
{
    double v[RUNS];

    for (int r = 0; r < RUNS; r++)
        v[r] = run_once(rl, n_keys, mode, threads);
    return bench_figure(v, RUNS);
}

static long timed_allocations;

/* A fresh default table for each row, so that one row's buckets do not
 * warm or fill the next one's. */
static gw_rl_t *make(void)
{
    char errbuf[SVC_ERRBUF_LEN];
    gw_rl_spec_t spec;
    gw_rl_opts_t o;
    gw_rl_t *rl;

    if (gw_rl_spec_parse("read=100/s,burst=200;write=10/s,burst=20", &spec, errbuf) != SVC_OK)
        bench_die("ratelimit_bench", "spec: %s", errbuf);
    gw_rl_opts_init(&o);
    o.spec = &spec;
    if (gw_rl_new(&o, &rl) != SVC_OK)
        bench_die("ratelimit_bench", "gw_rl_new failed");
    return rl;
}

static bench_figure_t row(const char *what, size_t n_keys, mode_t_ mode, double *worst)
{
    gw_rl_t *rl1 = make(), *rl2 = make();
    long before = atomic_load(&allocations);
    bench_figure_t one = measure(rl1, n_keys, mode, 1), two = measure(rl2, n_keys, mode, 2);
    gw_rl_stats_t s1, s2;

    /* The tables were made before `before`; in between are only the
     * checks (libc's own allocations, pthread_create's, are not wrapped). */
    timed_allocations += atomic_load(&allocations) - before;

    gw_rl_stats(rl1, &s1);
    gw_rl_stats(rl2, &s2);
    printf("%-34s %7.1f (%5.1f) %7.1f (%5.1f)   %6llu %9llu %7llu   %6llu %9llu %7llu\n", what,
           one.median, one.best, two.median, two.best, (unsigned long long)s1.buckets,
           (unsigned long long)s1.evictions_full, (unsigned long long)s1.evictions_partial,
           (unsigned long long)s2.buckets, (unsigned long long)s2.evictions_full,
           (unsigned long long)s2.evictions_partial);
    if (worst != NULL && one.median > *worst)
        *worst = one.median;
    if (worst != NULL && two.median > *worst)
        *worst = two.median;
    gw_rl_free(rl1);
    gw_rl_free(rl2);
    return one;
}

int main(void)
{
    double worst = 0;

    printf(
        "ratelimit_bench: ns per gw_rl_check, a clock read included; %d runs of %d checks: "
        "median (best run).\nDefault table: %d buckets in %d shards, classes read=100/s,"
        "burst=200;write=10/s,burst=20.\n2 threads share one table; figures are per check "
        "per thread. Buckets and evictions (full: lossless; partial: a fresh\nburst given early): "
        "counted after the runs.\n\n",
        RUNS, ITERS, GW_RL_DEFAULT_CAPACITY, GW_RL_DEFAULT_SHARDS);
    printf("%-34s %15s %15s   %-24s   %-24s\n", "", "1 thread", "2 threads",
           "1 thr: buckets evicted", "2 thr: buckets evicted");
    printf("%-34s %15s %15s   %-24s   %-24s\n", "", "", "", "       full, partial",
           "       full, partial");
    row("baseline: clock read + key written", MAX_KEYS, CLOCK_ONLY, NULL);
    row("one hot key", 1, CHECK, &worst);
    row("one hot key + header values", 1, CHECK_AND_HEADERS, &worst);
    row("10,000 keys (all fit)", 10000, CHECK, &worst);
    row("1,000,000 keys over 65,536 (evict)", MAX_KEYS, CHECK, &worst);
    printf("\nslowest median: %.1f ns per check; goal <= 1000 ns per request: %s\n", worst,
           worst <= 1000 ? "met" : "NOT met");
    printf("heap allocations (malloc, calloc, realloc) during the timed runs: %ld "
           "(making the 10 tables: %ld)\n",
           timed_allocations, atomic_load(&allocations) - timed_allocations);
    return 0;
}
