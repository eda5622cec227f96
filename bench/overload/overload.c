/* SPDX-License-Identifier: Apache-2.0 */
/*
 * overload.c - the experiment's run loop, its two clients and the per-second
 * tally (see overload.h).
 *
 * Threads: the caller's thread is the arrival clock (absolute sleeps, so a
 * late wake-up is caught up, never skipped); one ticker thread samples
 * in-flight counts 10 times a second and drives the knobs once a second; a
 * detached thread per original makes its call. The tally (run_t.rows and
 * the sample buffers) is guarded by run_t.mu; the in-flight gauges are atomics.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bench_pct.h"
#include "overload.h"
#include "rpc/rpc.h"
#include "rs/grpc.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"

#define GET_PRODUCT "/shopmicro.catalog.v1.CatalogService/GetProduct"
#define NS_PER_S    1000000000ull

typedef struct samples {
    uint64_t *ns;
    size_t n, cap;
} samples_t;

typedef struct run {
    const ov_opts_t *o;
    int n_rows;
    ov_row_t *rows;
    samples_t *ok, *fail; /* per row */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_llong outstanding, attempts_in_flight;
    grpc_channel *ch;     /* naive */
    rs_grpc_client_t *cl; /* guarded */
    uint64_t t0_ns;
    atomic_bool stop;
} run_t;

typedef struct job {
    run_t *r;
    int row;
    uint64_t start_ns;
} job_t;

void ov_opts_init(ov_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->mode = OV_GUARDED;
    o->rate = OV_DEFAULT_RATE;
    o->deadline_ms = OV_DEFAULT_DEADLINE_MS;
    o->slots = OV_DEFAULT_SLOTS;
    o->pushback_ms = OV_DEFAULT_PUSHBACK_MS;
    o->naive_attempts = OV_DEFAULT_NAIVE_ATTEMPTS;
    o->naive_backoff_ms = OV_DEFAULT_NAIVE_BACKOFF_MS;
    o->bulkhead = OV_DEFAULT_BULKHEAD;
}

static void sleep_until(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / NS_PER_S), (long)(ns % NS_PER_S)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void samples_add(samples_t *s, uint64_t ns)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        uint64_t *p = realloc(s->ns, cap * sizeof *p);
        if (p == NULL)
            return; /* a lost sample; the counts stay exact */
        s->ns = p;
        s->cap = cap;
    }
    s->ns[s->n++] = ns;
}

/* ---- the two clients ---------------------------------------------------- */

typedef struct outcome {
    svc_err_t err;
    unsigned attempts;
    rs_reason_t reason; /* guarded only */
} outcome_t;

static outcome_t call_naive(run_t *r, uint64_t deadline_ns)
{
    Shopmicro__Catalog__V1__GetProductRequest req =
        SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;
    outcome_t out = {SVC_EUNKNOWN, 0, RS_REASON_OK};

    req.id = (char *)r->o->product_id;
    for (int i = 0; i < r->o->naive_attempts; i++) {
        rpc_call_opts_t co = {deadline_ns, NULL, NULL, 0, false};
        ProtobufCMessage *resp = NULL;
        rpc_result_t res;

        if (i > 0) {
            uint64_t wake = svc_now_ns() + (uint64_t)r->o->naive_backoff_ms * SVC_NS_PER_MS;
            if (wake >= deadline_ns)
                break;
            sleep_until(wake);
        }
        out.attempts++;
        atomic_fetch_add(&r->attempts_in_flight, 1);
        out.err = rpc_call_unary(r->ch, GET_PRODUCT, &req.base,
                                 &shopmicro__catalog__v1__product__descriptor, &resp, &co, &res);
        atomic_fetch_sub(&r->attempts_in_flight, 1);
        protobuf_c_message_free_unpacked(resp, NULL);
        if (out.err == SVC_OK)
            break;
    }
    return out;
}

static outcome_t call_guarded(run_t *r, uint64_t deadline_ns)
{
    Shopmicro__Catalog__V1__GetProductRequest req =
        SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;
    rs_grpc_call_opts_t co = {deadline_ns, NULL, NULL, 0, 0};
    ProtobufCMessage *resp = NULL;
    rs_grpc_result_t res;

    req.id = (char *)r->o->product_id;
    rs_grpc_call(r->cl, GET_PRODUCT, &req.base, &shopmicro__catalog__v1__product__descriptor, &resp,
                 &co, &res);
    protobuf_c_message_free_unpacked(resp, NULL);
    return (outcome_t){res.err, res.attempts, res.reason};
}

/* The failure column of an outcome: the chain's own refusals first. */
static unsigned *fail_column(ov_row_t *w, const outcome_t *oc)
{
    switch (oc->reason) {
    case RS_REASON_BULKHEAD_FULL:
        return &w->f_bulkhead;
    case RS_REASON_BREAKER_OPEN:
        return &w->f_breaker;
    case RS_REASON_BUDGET_EXHAUSTED:
        return &w->f_budget;
    default:
        break;
    }
    switch (oc->err) {
    case SVC_ETIMEDOUT:
        return &w->f_deadline;
    case SVC_EEXHAUSTED:
        return &w->f_exhausted;
    case SVC_EUNAVAIL:
        return &w->f_unavailable;
    default:
        return &w->f_other;
    }
}

static void *job_main(void *arg)
{
    job_t *j = arg;
    run_t *r = j->r;
    uint64_t deadline = j->start_ns + (uint64_t)r->o->deadline_ms * SVC_NS_PER_MS;
    outcome_t oc = r->o->mode == OV_NAIVE ? call_naive(r, deadline) : call_guarded(r, deadline);
    uint64_t took = svc_now_ns() - j->start_ns;
    ov_row_t *w = &r->rows[j->row];

    pthread_mutex_lock(&r->mu);
    w->attempts += oc.attempts;
    if (oc.err == SVC_OK && svc_now_ns() <= deadline) {
        w->ok++;
        samples_add(&r->ok[j->row], took);
    } else {
        (*(oc.err == SVC_OK ? &w->f_deadline : fail_column(w, &oc)))++;
        samples_add(&r->fail[j->row], took);
    }
    atomic_fetch_sub(&r->outstanding, 1);
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    free(j);
    return NULL;
}

/* ---- the ticker ---------------------------------------------------------- */

static int phase_of(const ov_opts_t *o, int second)
{
    for (int p = 0, end = 0; p < o->n_phases; p++)
        if (second < (end += o->phases[p].seconds))
            return p;
    return o->n_phases - 1;
}

static bool apply_knobs(run_t *r, int second, int64_t *in_flight, int64_t *rejected)
{
    char form[128];
    const ov_phase_t *ph = &r->o->phases[phase_of(r->o, second)];

    snprintf(form, sizeof form, "latency_ms=%u&slots=%u&pushback_ms=%u&queue=%u&error_pct=0",
             ph->latency_ms, r->o->slots, r->o->pushback_ms, r->o->queue);
    return ov_knobs_set(r->o->admin, form, in_flight, rejected);
}

static void sample(run_t *r, ov_row_t *w)
{
    int64_t v = r->o->mode == OV_GUARDED ? rs_upstream_in_flight(rs_grpc_client_upstream(r->cl))
                                         : atomic_load(&r->attempts_in_flight);
    int64_t out = atomic_load(&r->outstanding);

    pthread_mutex_lock(&r->mu);
    if (v > w->attempts_in_flight_max)
        w->attempts_in_flight_max = v;
    if (out > w->outstanding_max)
        w->outstanding_max = out;
    pthread_mutex_unlock(&r->mu);
}

static void *ticker_main(void *arg)
{
    run_t *r = arg;
    int64_t last_rej = -1;

    for (int s = 0; s < r->n_rows && !atomic_load(&r->stop); s++) {
        ov_row_t *w = &r->rows[s];
        int64_t in_flight = -1, rej = -1;

        for (int k = 1; k <= 10; k++) {
            sleep_until(r->t0_ns + (uint64_t)s * NS_PER_S + (uint64_t)k * 100 * SVC_NS_PER_MS);
            sample(r, w);
        }
        /* At the second's end: the next second's knobs, and the catalog's view. */
        bool up = apply_knobs(r, s + 1, &in_flight, &rej);
        w->dep_in_flight = up ? in_flight : -1;
        w->dep_rejected = up && last_rej >= 0 && rej >= last_rej ? rej - last_rej : 0;
        last_rej = up ? rej : -1;
        w->breaker = r->o->mode == OV_GUARDED
                         ? (int)rs_upstream_breaker_state(rs_grpc_client_upstream(r->cl))
                         : -1;
    }
    return NULL;
}

/* ---- set-up and the arrival clock ---------------------------------------- */

static svc_err_t clients_new(run_t *r, char errbuf[static SVC_ERRBUF_LEN])
{
    static const rs_method_t methods[] = {{.path = GET_PRODUCT, .idempotency = RS_IDEMPOTENT}};
    rs_grpc_opts_t o;

    if (r->o->mode == OV_NAIVE) {
        r->ch = rpc_channel_new(r->o->target, NULL);
        return r->ch != NULL ? SVC_OK : SVC_ENOMEM;
    }
    /* As order's catalog client builds it (services/order/pricing.c): the
     * shipped defaults, plus the bulkhead. */
    rs_grpc_opts_init(&o);
    o.target = r->o->target;
    o.upstream.name = "catalog";
    o.upstream.methods = methods;
    o.upstream.n_methods = SVC_COUNTOF(methods);
    o.upstream.max_concurrent = r->o->bulkhead;
    return rs_grpc_client_new(&o, &r->cl, errbuf);
}

static svc_err_t run_init(run_t *r, const ov_opts_t *o, char errbuf[static SVC_ERRBUF_LEN])
{
    memset(r, 0, sizeof *r);
    r->o = o;
    for (int p = 0; p < o->n_phases; p++)
        r->n_rows += o->phases[p].seconds;
    if (r->n_rows < 1 || o->rate < 1 || o->deadline_ms < 1 || o->admin == NULL ||
        o->target == NULL || o->product_id == NULL) {
        svc_errbuf_set(errbuf, "need phases, rate, deadline, target, admin and a product");
        return SVC_EINVAL;
    }
    r->rows = calloc((size_t)r->n_rows, sizeof *r->rows);
    r->ok = calloc((size_t)r->n_rows, sizeof *r->ok);
    r->fail = calloc((size_t)r->n_rows, sizeof *r->fail);
    if (r->rows == NULL || r->ok == NULL || r->fail == NULL)
        return SVC_ENOMEM;
    for (int s = 0; s < r->n_rows; s++)
        r->rows[s].phase = phase_of(o, s);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    return clients_new(r, errbuf);
}

static bool spawn(run_t *r, int row, uint64_t at)
{
    job_t *j = malloc(sizeof *j);
    pthread_attr_t a;
    pthread_t t;
    bool ok;

    if (j == NULL)
        return false;
    *j = (job_t){r, row, at};
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 256 * 1024);
    atomic_fetch_add(&r->outstanding, 1);
    ok = pthread_create(&t, &a, job_main, j) == 0;
    pthread_attr_destroy(&a);
    if (!ok) {
        atomic_fetch_sub(&r->outstanding, 1);
        free(j);
    }
    return ok;
}

/* Every second's percentiles, once all its calls are in. */
static void finish_rows(run_t *r)
{
    for (int s = 0; s < r->n_rows; s++) {
        samples_t *ok = &r->ok[s], *f = &r->fail[s];
        qsort(ok->ns, ok->n, sizeof *ok->ns, bench_cmp_u64);
        qsort(f->ns, f->n, sizeof *f->ns, bench_cmp_u64);
        r->rows[s].ok_p50_ms = bench_pct_ms(ok->ns, ok->n, 50);
        r->rows[s].ok_p99_ms = bench_pct_ms(ok->ns, ok->n, 99);
        r->rows[s].fail_p50_ms = bench_pct_ms(f->ns, f->n, 50);
        free(ok->ns);
        free(f->ns);
    }
}

static void run_dispose(run_t *r)
{
    rs_grpc_client_free(r->cl);
    if (r->ch != NULL)
        grpc_channel_destroy(r->ch);
    free(r->ok);
    free(r->fail);
    free(r->rows);
}

svc_err_t ov_run(const ov_opts_t *o, ov_row_t **rows, int *n_rows,
                 char errbuf[static SVC_ERRBUF_LEN])
{
    run_t r;
    pthread_t ticker;
    svc_err_t err = run_init(&r, o, errbuf);
    int64_t dummy;
    uint64_t total;

    if (err == SVC_OK && !apply_knobs(&r, 0, &dummy, &dummy)) {
        svc_errbuf_set(errbuf, "cannot set the catalog's knobs at %s/debug/fault", o->admin);
        err = SVC_EUNAVAIL;
    }
    if (err != SVC_OK) {
        run_dispose(&r);
        return err;
    }
    total = (uint64_t)r.n_rows * (uint64_t)o->rate;
    r.t0_ns = svc_now_ns() + 50 * SVC_NS_PER_MS;
    pthread_create(&ticker, NULL, ticker_main, &r);
    for (uint64_t i = 0; i < total; i++) {
        uint64_t at = r.t0_ns + i * NS_PER_S / (uint64_t)o->rate;
        int row = (int)(i / (uint64_t)o->rate);
        sleep_until(at);
        pthread_mutex_lock(&r.mu);
        r.rows[row].originals++;
        pthread_mutex_unlock(&r.mu);
        if (!spawn(&r, row, at)) {
            pthread_mutex_lock(&r.mu);
            r.rows[row].f_other++;
            pthread_mutex_unlock(&r.mu);
        }
    }
    pthread_join(ticker, NULL);
    pthread_mutex_lock(&r.mu);
    while (atomic_load(&r.outstanding) > 0)
        pthread_cond_wait(&r.cv, &r.mu);
    pthread_mutex_unlock(&r.mu);
    finish_rows(&r);
    *rows = r.rows;
    *n_rows = r.n_rows;
    r.rows = NULL;
    run_dispose(&r);
    return SVC_OK;
}

double ov_amplification(const ov_row_t *rows, int from, int to)
{
    unsigned long long orig = 0, att = 0;

    for (int s = from; s < to; s++) {
        orig += rows[s].originals;
        att += rows[s].attempts;
    }
    return orig > 0 ? (double)att / (double)orig : 0;
}

void ov_write_csv(FILE *f, const ov_opts_t *o, const ov_row_t *rows, int n)
{
    fprintf(f, "t,mode,phase,latency_knob_ms,originals,attempts,amplification,ok,goodput_pct,"
               "fail_deadline,fail_exhausted,fail_unavailable,fail_breaker_open,"
               "fail_bulkhead,fail_budget,fail_other,ok_p50_ms,ok_p99_ms,fail_p50_ms,"
               "outstanding_max,attempts_in_flight_max,dep_in_flight,dep_rejected,breaker\n");
    for (int s = 0; s < n; s++) {
        const ov_row_t *w = &rows[s];
        const ov_phase_t *ph = &o->phases[w->phase];
        fprintf(f,
                "%d,%s,%s,%u,%u,%u,%.3f,%u,%.1f,%u,%u,%u,%u,%u,%u,%u,%.2f,%.2f,%.2f,"
                "%lld,%lld,%lld,%lld,%d\n",
                s, o->mode == OV_NAIVE ? "naive" : "guarded", ph->name, ph->latency_ms,
                w->originals, w->attempts, w->originals ? (double)w->attempts / w->originals : 0,
                w->ok, w->originals ? 100.0 * w->ok / w->originals : 0, w->f_deadline,
                w->f_exhausted, w->f_unavailable, w->f_breaker, w->f_bulkhead, w->f_budget,
                w->f_other, w->ok_p50_ms, w->ok_p99_ms, w->fail_p50_ms,
                (long long)w->outstanding_max, (long long)w->attempts_in_flight_max,
                (long long)w->dep_in_flight, (long long)w->dep_rejected, w->breaker);
    }
}
