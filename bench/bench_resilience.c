/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_resilience.c - what the resilience chain adds to a call.
 *
 * The transport is a no-op, so everything measured beyond the baseline is
 * the engine: admission (bulkhead, breaker, budget), the attempt deadline,
 * the verdict, metrics. Each figure is the median of RUNS runs, in ns per
 * call, measured single-threaded and with two threads sharing one upstream
 * (the case where shared cache lines would show). Heap allocations made by
 * our code during the timed calls are counted through link-time wrappers.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rs/resilience.h"
#include "bench_pct.h"
#include "bench_util.h"

#define ITERS       2000000
#define RUNS        7
#define GET_PRODUCT "/shopmicro.catalog.v1.CatalogService/GetProduct"

/* ---- counting allocations (see resilience.cmake) -------------------------- */

static _Atomic long allocations;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t sz);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t sz);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
void *__wrap_aligned_alloc(size_t align, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
char *__wrap_strdup(const char *s);

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

void __wrap_free(void *p)
{
    __real_free(p);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __real_aligned_alloc(align, n);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __real_posix_memalign(p, align, n);
}

char *__wrap_strdup(const char *s)
{
    atomic_fetch_add(&allocations, 1);
    return __real_strdup(s);
}

/* ---- the no-op transport ---------------------------------------------------- */

/* Per thread: a shared sink would make the two-thread figures measure
 * false sharing instead of the engine. */
static _Thread_local volatile uint64_t sink;

__attribute__((noinline)) static void noop_op(void *arg, const rs_attempt_t *at, rs_outcome_t *out)
{
    (void)arg;
    sink = at->deadline_ns;
    out->err = SVC_OK;
}

/* Called through a volatile pointer so the compiler cannot inline it away. */
static void (*volatile op_ptr)(void *, const rs_attempt_t *, rs_outcome_t *) = noop_op;

typedef enum { BASELINE, ENGINE, RUN, REJECT } mode_t_;

typedef struct job {
    rs_upstream_t *up;
    mode_t_ mode;
    pthread_barrier_t *go;
    double ns_per_call;
} job_t;

static void one_engine_call(rs_upstream_t *up)
{
    rs_outcome_t o = RS_OUTCOME_INIT;
    rs_attempt_t at = {0, 1, 3};
    rs_call_t c;

    if (rs_call_begin(up, GET_PRODUCT, SVC_DEADLINE_NONE, &c) == SVC_OK &&
        rs_call_attempt(&c, &at.deadline_ns) == SVC_OK) {
        op_ptr(NULL, &at, &o);
        (void)rs_call_end_attempt(&c, &o);
    }
    rs_call_finish(&c, NULL);
}

static void *run_job(void *arg)
{
    job_t *j = arg;
    rs_outcome_t o = RS_OUTCOME_INIT;
    rs_attempt_t at = {1, 1, 1};
    rs_result_t res;
    uint64_t t0;

    pthread_barrier_wait(j->go);
    t0 = bench_now_ns();
    for (int i = 0; i < ITERS; i++) {
        switch (j->mode) {
        case BASELINE:
            op_ptr(NULL, &at, &o);
            break;
        case ENGINE:
            one_engine_call(j->up);
            break;
        case RUN:
        case REJECT:
            if (rs_call_run(j->up, GET_PRODUCT, SVC_DEADLINE_NONE, noop_op, NULL, &res) != SVC_OK)
                sink = sink + 1;
            break;
        }
    }
    j->ns_per_call = (double)(bench_now_ns() - t0) / ITERS;
    return NULL;
}

/* Runs `threads` threads at once; returns the mean ns per call per thread. */
static double run_once(rs_upstream_t *up, mode_t_ mode, int threads)
{
    pthread_barrier_t go;
    pthread_t th[2];
    job_t jobs[2];
    double sum = 0;

    pthread_barrier_init(&go, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        jobs[i] = (job_t){up, mode, &go, 0};
        if (pthread_create(&th[i], NULL, run_job, &jobs[i]) != 0)
            abort();
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        sum += jobs[i].ns_per_call;
    }
    pthread_barrier_destroy(&go);
    return sum / threads;
}

static bench_figure_t measure(rs_upstream_t *up, mode_t_ mode, int threads)
{
    double v[RUNS];

    for (int r = 0; r < RUNS; r++)
        v[r] = run_once(up, mode, threads);
    return bench_figure(v, RUNS);
}

static rs_upstream_t *make(const char *name, uint32_t max_concurrent, uint32_t failures)
{
    static const rs_method_t methods[] = {
        {.path = GET_PRODUCT, .idempotency = RS_IDEMPOTENT},
        {.path = "/shopmicro.catalog.v1.CatalogService/ListProducts", .idempotency = RS_IDEMPOTENT},
        {.path = "/shopmicro.catalog.v1.CatalogService/CreateProduct",
         .idempotency = RS_NOT_IDEMPOTENT},
    };
    char errbuf[SVC_ERRBUF_LEN];
    rs_upstream_opts_t o;
    rs_upstream_t *up;

    rs_upstream_opts_init(&o);
    o.name = name;
    o.methods = methods;
    o.n_methods = sizeof methods / sizeof methods[0];
    o.max_concurrent = max_concurrent;
    o.breaker.failures = failures;
    o.breaker.cooldown_ms = 3600 * 1000; /* an open breaker stays open for the whole run */
    if (rs_upstream_new(&o, &up, errbuf) != SVC_OK) {
        fprintf(stderr, "rs_upstream_new: %s\n", errbuf);
        exit(1);
    }
    return up;
}

static void row(const char *what, rs_upstream_t *up, mode_t_ mode, const bench_figure_t *base)
{
    bench_figure_t one = measure(up, mode, 1), two = measure(up, mode, 2);

    printf("%-42s %7.1f (%5.1f) %7.1f (%5.1f)", what, one.median, one.best, two.median, two.best);
    if (base != NULL)
        printf("   %+7.1f (%+6.1f) %+7.1f (%+6.1f)", one.median - base[0].median,
               one.best - base[0].best, two.median - base[1].median, two.best - base[1].best);
    printf("\n");
}

int main(void)
{
    rs_upstream_t *plain = make("catalog", 0, 5), *limited = make("catalog-bh", 1024, 5);
    rs_upstream_t *open = make("catalog-open", 0, 1);
    rs_outcome_t fail = RS_OUTCOME_INIT;
    bench_figure_t base[2];
    long before;
    rs_call_t c;
    uint64_t dl;

    svc_log_set_level(SVC_LOG_ERROR);
    /* Trip `open` once so that its calls are fast rejections. */
    fail.err = SVC_EUNAVAIL;
    if (rs_call_begin(open, "/shopmicro.catalog.v1.CatalogService/CreateProduct", SVC_DEADLINE_NONE,
                      &c) == SVC_OK &&
        rs_call_attempt(&c, &dl) == SVC_OK)
        (void)rs_call_end_attempt(&c, &fail);
    rs_call_finish(&c, NULL);

    printf("bench_resilience: ns per call over a no-op transport; %d runs of %d calls each:\n"
           "median (best run). 2 threads share one upstream; figures are per call per thread.\n\n",
           RUNS, ITERS);
    printf("%-42s %15s %15s   %-16s %-16s\n", "", "1 thread", "2 threads", "added, 1 thread",
           "added, 2 threads");
    base[0] = measure(NULL, BASELINE, 1);
    base[1] = measure(NULL, BASELINE, 2);
    printf("%-42s %7.1f (%5.1f) %7.1f (%5.1f)\n", "baseline: the no-op called directly",
           base[0].median, base[0].best, base[1].median, base[1].best);
    before = atomic_load(&allocations);
    row("engine: begin/attempt/end_attempt/finish", plain, ENGINE, base);
    row("rs_call_run (blocking driver)", plain, RUN, base);
    row("engine + bulkhead limit 1024", limited, ENGINE, base);
    row("breaker open: fast rejection", open, REJECT, NULL);
    if (rs_upstream_breaker_state(open) != RS_BREAKER_OPEN) {
        fprintf(stderr, "the breaker closed during the run: rejection figures are wrong\n");
        return 1;
    }
    printf("heap allocations by our code during %ld timed calls: %ld\n", (long)RUNS * ITERS * 3 * 4,
           atomic_load(&allocations) - before);
    rs_upstream_free(plain);
    rs_upstream_free(limited);
    rs_upstream_free(open);
    return 0;
}
