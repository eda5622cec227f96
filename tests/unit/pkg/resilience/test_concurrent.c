/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_concurrent.c - the properties that only threads can break. Run it
 * under -DSVC_SANITIZE=thread too: it must be ThreadSanitizer-clean.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "rs_test.h"
#include "support/worker_check.h"

#define THREADS 8
#define ROUNDS  200

/* ---- half-open admits exactly one trial ---------------------------------- */

typedef struct trial_ctx {
    rt_t *t;
    pthread_barrier_t start, decided, done;
    _Atomic int admitted;
    worker_check_t check;
} trial_ctx_t;

static void *contender(void *arg)
{
    trial_ctx_t *x = arg;
    rs_outcome_t unavail = rt_outcome(SVC_EUNAVAIL);

    for (int r = 0; r < ROUNDS; r++) {
        rs_call_t c;
        uint64_t dl;
        bool in;

        pthread_barrier_wait(&x->start);
        in = rs_call_begin(x->t->up, GET_PRODUCT, SVC_DEADLINE_NONE, &c) == SVC_OK;
        if (in)
            atomic_fetch_add(&x->admitted, 1);
        pthread_barrier_wait(&x->decided);
        if (in) { /* the trial fails: the breaker re-opens for the next round */
            WORKER_CHECK(&x->check, rs_call_attempt(&c, &dl) == SVC_OK);
            WORKER_CHECK(&x->check, rs_call_end_attempt(&c, &unavail).action == RS_FAIL);
        }
        rs_call_finish(&c, NULL);
        pthread_barrier_wait(&x->done);
    }
    return NULL;
}

static void half_open_admits_exactly_one_trial(void **state)
{
    rt_t *t = *state;
    trial_ctx_t x = {.t = t, .check = WORKER_CHECK_INIT};
    pthread_t th[THREADS];
    rs_result_t res;

    t->opts.policy.max_attempts = 1;
    rt_start(t);
    for (int i = 0; i < 5; i++)
        rt_call(t, GET_PRODUCT, SVC_EUNAVAIL, &res);
    assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
    pthread_barrier_init(&x.start, NULL, THREADS + 1);
    pthread_barrier_init(&x.decided, NULL, THREADS + 1);
    pthread_barrier_init(&x.done, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, contender, &x), 0);
    for (int r = 0; r < ROUNDS; r++) {
        fake_clock_advance_ms(&t->clock, RS_DEFAULT_BREAKER_COOLDOWN_MS);
        pthread_barrier_wait(&x.start);
        pthread_barrier_wait(&x.decided);
        assert_int_equal(atomic_exchange(&x.admitted, 0), 1);
        pthread_barrier_wait(&x.done);
        assert_int_equal(rs_upstream_breaker_state(t->up), RS_BREAKER_OPEN);
        assert_int_equal(rs_upstream_in_flight(t->up), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    worker_check_assert(&x.check);
    /* 1 trip, then per round open -> half-open -> open */
    assert_int_equal(t->n_transitions, 1 + 2 * ROUNDS);
    pthread_barrier_destroy(&x.start);
    pthread_barrier_destroy(&x.decided);
    pthread_barrier_destroy(&x.done);
}

/* ---- a hammer: every path at once, with a real clock ----------------------- */

#define HAMMER_THREADS 4
#define HAMMER_CALLS   20000

typedef struct hammer {
    rs_upstream_t *up;
    _Atomic uint64_t attempts, ok;
    _Atomic int running;
    worker_check_t check;
} hammer_t;

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 0x2545f4914f6cdd1dull;
}

static _Thread_local uint64_t tls_prng;

static void random_op(void *arg, const rs_attempt_t *at, rs_outcome_t *out)
{
    hammer_t *h = arg;
    unsigned roll = (unsigned)(xorshift(&tls_prng) % 100);

    (void)at;
    atomic_fetch_add(&h->attempts, 1);
    if (roll < 70)
        out->err = SVC_OK;
    else if (roll < 90)
        out->err = SVC_EUNAVAIL;
    else if (roll < 95)
        out->err = SVC_ENOTFOUND;
    else {
        out->err = SVC_ETIMEDOUT;
        out->attempt_timer_fired = true;
    }
}

static void no_sleep(void *ctx, uint64_t ns)
{
    (void)ctx;
    (void)ns;
}

static void *hammer_thread(void *arg)
{
    hammer_t *h = arg;
    static const char *const methods[] = {GET_PRODUCT, LIST_PRODUCTS, CREATE_ORDER, UNDECLARED_GET};
    rs_result_t res;

    tls_prng = (uint64_t)(uintptr_t)&res | 1;
    for (int i = 0; i < HAMMER_CALLS; i++)
        if (rs_call_run(h->up, methods[i % 4], svc_now_ns() + MS(50), random_op, h, &res) == SVC_OK)
            atomic_fetch_add(&h->ok, 1);
    return NULL;
}

static void *render_thread(void *arg)
{
    hammer_t *h = arg;
    static char page[1 << 17];
    size_t len;

    while (atomic_load(&h->running))
        WORKER_CHECK(&h->check, rs_metrics_render(&h->up, 1, page, sizeof page, &len) == SVC_OK);
    return NULL;
}

#define CALLS      "shopmicro_resilience_calls_total{"
#define REJECTIONS "shopmicro_resilience_rejections_total{"

/* Sums the values of the lines starting with prefix (and containing `with`). */
static uint64_t sum_series(const char *page, const char *prefix, const char *with)
{
    uint64_t sum = 0;
    size_t n = strlen(prefix);

    for (const char *p = page; (p = strstr(p, prefix)) != NULL; p += n) {
        const char *sp = strchr(p, ' '), *eol = strchr(p, '\n');
        const char *hit = with != NULL ? strstr(p, with) : p;
        if ((p != page && p[-1] != '\n') || hit == NULL || hit > eol)
            continue;
        sum += strtoull(sp + 1, NULL, 10);
    }
    return sum;
}

static void hammer_keeps_every_invariant(void **state)
{
    static const rs_method_t table[] = {
        {.path = GET_PRODUCT, .idempotency = RS_IDEMPOTENT},
        {.path = LIST_PRODUCTS, .idempotency = RS_IDEMPOTENT},
        {.path = CREATE_ORDER, .idempotency = RS_NOT_IDEMPOTENT},
    };
    static char page[1 << 17];
    rs_upstream_opts_t o;
    hammer_t h = {0};
    pthread_t th[HAMMER_THREADS], renderer;
    size_t len;

    (void)state;
    rs_upstream_opts_init(&o);
    o.name = "catalog";
    o.methods = table;
    o.n_methods = SVC_COUNTOF(table);
    o.max_concurrent = 3;      /* contended: some calls are turned away */
    o.breaker.cooldown_ms = 1; /* cycle through every state, often */
    o.breaker.cooldown_jitter_pct = 50;
    o.sleep = no_sleep;
    assert_int_equal(rs_upstream_new(&o, &h.up, SVC_ERRBUF_SCRATCH), SVC_OK);
    atomic_store(&h.running, 1);
    assert_int_equal(pthread_create(&renderer, NULL, render_thread, &h), 0);
    for (int i = 0; i < HAMMER_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer_thread, &h), 0);
    for (int i = 0; i < HAMMER_THREADS; i++)
        pthread_join(th[i], NULL);
    atomic_store(&h.running, 0);
    pthread_join(renderer, NULL);
    worker_check_assert(&h.check);

    assert_int_equal(rs_upstream_in_flight(h.up), 0);
    assert_int_equal(rs_metrics_render(&h.up, 1, page, sizeof page, &len), SVC_OK);
    assert_int_equal(sum_series(page, CALLS, NULL), HAMMER_THREADS * HAMMER_CALLS);
    assert_int_equal(sum_series(page, "shopmicro_resilience_attempts_total{", NULL),
                     atomic_load(&h.attempts));
    /* Every call that returned SVC_OK was counted as ok or retried. */
    assert_int_equal(sum_series(page, CALLS, "result=\"ok\"") +
                         sum_series(page, CALLS, "result=\"retried\""),
                     atomic_load(&h.ok));
    print_message("hammer: %d calls, %llu attempts, %llu rejected\n", HAMMER_THREADS * HAMMER_CALLS,
                  (unsigned long long)atomic_load(&h.attempts),
                  (unsigned long long)sum_series(page, REJECTIONS, NULL));
    rs_upstream_free(h.up);
}

/* ---- the budget is never overspent ------------------------------------------ */

typedef struct spend {
    rs__budget_t b;
    _Atomic int granted;
} spend_t;

static void *spender(void *arg)
{
    spend_t *s = arg;

    for (int i = 0; i < 1000; i++)
        if (rs__budget_withdraw(&s->b, RT_START_NS))
            atomic_fetch_add(&s->granted, 1);
    return NULL;
}

static void concurrent_withdrawals_never_overspend(void **state)
{
    rs_budget_opts_t o = {0, 100, 10000}; /* a floor of 1000, nothing else */
    spend_t s = {.granted = 0};
    pthread_t th[THREADS];

    (void)state;
    assert_int_equal(rs__budget_init(&s.b, &o), SVC_OK);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, spender, &s), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    assert_true(atomic_load(&s.granted) <= 1000);
    assert_true(atomic_load(&s.granted) >= 1000 - THREADS);
    rs__budget_dispose(&s.b);
}

/* ---- the bulkhead never admits more than its limit ---------------------------- */

typedef struct holders {
    rs_upstream_t *up;
    _Atomic int now, max;
} holders_t;

static void *holder(void *arg)
{
    holders_t *h = arg;

    for (int i = 0; i < 5000; i++) {
        rs_call_t c;
        if (rs_call_begin(h->up, GET_PRODUCT, SVC_DEADLINE_NONE, &c) == SVC_OK) {
            int n = atomic_fetch_add(&h->now, 1) + 1, m = atomic_load(&h->max);
            while (n > m && !atomic_compare_exchange_weak(&h->max, &m, n))
                ;
            atomic_fetch_sub(&h->now, 1);
        }
        rs_call_finish(&c, NULL);
    }
    return NULL;
}

static void bulkhead_never_exceeds_its_limit(void **state)
{
    rs_upstream_opts_t o;
    holders_t h = {0};
    pthread_t th[THREADS];

    (void)state;
    rs_upstream_opts_init(&o);
    o.name = "catalog";
    o.max_concurrent = 3;
    assert_int_equal(rs_upstream_new(&o, &h.up, SVC_ERRBUF_SCRATCH), SVC_OK);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, holder, &h), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    assert_true(atomic_load(&h.max) <= 3);
    assert_int_equal(rs_upstream_in_flight(h.up), 0);
    rs_upstream_free(h.up);
}

#define T(f) cmocka_unit_test_setup_teardown(f, rt_setup, rt_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(half_open_admits_exactly_one_trial),
        T(hammer_keeps_every_invariant),
        T(concurrent_withdrawals_never_overspend),
        T(bulkhead_never_exceeds_its_limit),
    };

    svc_log_set_level(SVC_LOG_ERROR);
    return cmocka_run_group_tests_name("rs_concurrent", tests, NULL, NULL);
}
