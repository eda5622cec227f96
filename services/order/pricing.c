/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pricing.c - concurrent GetProduct calls and a latch to wait for them.
 *
 * Completion callbacks run on the client's own thread; the worker sleeps on
 * a condition variable until the last one has reported. Everything the
 * callbacks touch lives on the worker's stack, which is safe because the
 * worker never returns before every accepted call's callback has run (the
 * binding guarantees exactly one callback per accepted call, and none for a
 * rejected one).
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "pricing.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"

#define LOG_MOD "order.pricing"

/* If the binding ever failed to end a call at its deadline, the worker
 * would hang; this much past the deadline it cancels what is left. */
#define BACKSTOP_MS 2000

typedef Shopmicro__Catalog__V1__Product product_t;
typedef Shopmicro__Catalog__V1__GetProductRequest get_req_t;

svc_err_t ord_catalog_new(const ord_config_t *cfg, rs_grpc_client_t **out, char *errbuf)
{
    static const rs_method_t methods[] = {
        {.path = ORD_CATALOG_GET_PRODUCT, .idempotency = RS_IDEMPOTENT},
    };
    rs_grpc_opts_t o;

    rs_grpc_opts_init(&o);
    o.target = cfg->catalog_addr;
    o.upstream.name = "catalog";
    o.upstream.methods = methods;
    o.upstream.n_methods = SVC_COUNTOF(methods);
    o.upstream.policy.attempt_timeout_ms = (uint32_t)cfg->catalog_attempt_timeout_ms;
    o.upstream.policy.max_attempts = (uint32_t)cfg->catalog_max_attempts;
    o.upstream.policy.backoff_base_ms = (uint32_t)cfg->catalog_backoff_base_ms;
    o.upstream.policy.backoff_cap_ms = (uint32_t)cfg->catalog_backoff_cap_ms;
    o.upstream.breaker.failures = (uint32_t)cfg->catalog_breaker_failures;
    o.upstream.breaker.cooldown_ms = (uint32_t)cfg->catalog_breaker_cooldown_ms;
    o.upstream.max_concurrent = (uint32_t)cfg->catalog_max_concurrent;
    return rs_grpc_client_new(&o, out, errbuf);
}

typedef struct latch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t pending;          /* accepted calls whose callback has not run */
    bool failed;             /* the first failure is in err/message */
    svc_err_t err;
    uint32_t retry_after_ms; /* its wait hint (our breaker, catalog's pushback) */
    char message[SVC_ERRBUF_LEN];
} latch_t;

typedef struct slot {
    latch_t *latch;
    ord_line_t *line;
    rs_grpc_async_t *handle; /* our reference; NULL once given back */
} slot_t;

/* Turns a failed GetProduct into the order's answer. */
static svc_err_t describe(const char *product_id, const rs_grpc_result_t *res, char *msg)
{
    switch (res->err) {
    case SVC_ENOTFOUND:
    case SVC_EINVAL:
        svc_errbuf_set(msg, "unknown product %s", product_id);
        return SVC_EINVAL;
    case SVC_ETIMEDOUT:
        svc_errbuf_set(msg, "pricing product %s: deadline exceeded: %s (reason=%s attempts=%u)",
                       product_id, res->message, rs_reason_name(res->reason), res->attempts);
        return SVC_ETIMEDOUT;
    default:
        svc_errbuf_set(msg, "pricing product %s: catalog unavailable: %s (reason=%s attempts=%u)",
                       product_id, res->message, rs_reason_name(res->reason), res->attempts);
        return SVC_EUNAVAIL;
    }
}

/* Keeps the first failure only: later ones are usually the cancellations it
 * caused. Caller holds l->mu. */
static void fail_locked(latch_t *l, svc_err_t err, const char *msg, uint32_t retry_after_ms)
{
    if (l->failed)
        return;
    l->failed = true;
    l->err = err;
    l->retry_after_ms = retry_after_ms;
    snprintf(l->message, sizeof l->message, "%s", msg);
    pthread_cond_signal(&l->cv);
}

static void on_priced(void *arg, const rs_grpc_result_t *res, ProtobufCMessage *resp)
{
    slot_t *s = arg;
    latch_t *l = s->latch;
    char msg[SVC_ERRBUF_LEN] = "";
    int64_t price = resp != NULL ? ((const product_t *)resp)->price_cents : -1;
    svc_err_t err = res->err;

    if (err != SVC_OK)
        err = describe(s->line->product_id, res, msg);
    else if (price < 0) {
        svc_errbuf_set(msg, "catalog returned price %lld for product %s", (long long)price,
                       s->line->product_id);
        err = SVC_EINTERNAL;
    }
    if (resp != NULL)
        protobuf_c_message_free_unpacked(resp, NULL);

    pthread_mutex_lock(&l->mu);
    if (err == SVC_OK)
        s->line->unit_price_cents = price;
    else
        fail_locked(l, err, msg, res->retry_after_ms);
    /* The worker may return (and its stack vanish) as soon as it sees 0:
     * nothing of s or l is touched after the unlock. */
    if (--l->pending == 0)
        pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

static void cancel_all(slot_t *slots, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (slots[i].handle != NULL)
            rs_grpc_cancel(slots[i].handle);
        slots[i].handle = NULL;
    }
}

static struct timespec to_timespec(uint64_t ns)
{
    return (struct timespec){(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
}

/* Waits for every callback; on the first failure (or at the backstop)
 * cancels the rest, whose callbacks run inside rs_grpc_cancel. A breaker
 * trial among them runs on to its verdict without us (rs/grpc.h): the line
 * whose sibling failed must not take the breaker's news with it. */
static void wait_all(latch_t *l, slot_t *slots, size_t n, uint64_t deadline_ns)
{
    uint64_t backstop = deadline_ns == SVC_DEADLINE_NONE
                            ? SVC_DEADLINE_NONE
                            : deadline_ns + (uint64_t)BACKSTOP_MS * SVC_NS_PER_MS;
    bool cancelled = false;

    pthread_mutex_lock(&l->mu);
    while (l->pending > 0) {
        if (l->failed && !cancelled) {
            pthread_mutex_unlock(&l->mu); /* a callback may need the lock meanwhile */
            cancel_all(slots, n);
            pthread_mutex_lock(&l->mu);
            cancelled = true;
        } else if (backstop != SVC_DEADLINE_NONE && !cancelled && svc_now_ns() >= backstop) {
            svc_log_error(LOG_MOD, "%zu GetProduct calls still running %d ms past their "
                          "deadline: cancelling them", l->pending, BACKSTOP_MS);
            fail_locked(l, SVC_ETIMEDOUT, "pricing: deadline exceeded", 0);
        } else if (backstop != SVC_DEADLINE_NONE && !cancelled) {
            struct timespec ts = to_timespec(backstop);
            pthread_cond_timedwait(&l->cv, &l->mu, &ts);
        } else {
            pthread_cond_wait(&l->cv, &l->mu);
        }
    }
    pthread_mutex_unlock(&l->mu);
}

/* A line refused because the breaker is half-open with a trial in flight
 * (most likely this order's own first line): rather than fail the order,
 * price it after the trial, which by then has closed the breaker or not. */
static bool waits_for_trial(rs_grpc_client_t *cl, const rs_grpc_result_t *res, const latch_t *l)
{
    return res->reason == RS_REASON_BREAKER_OPEN && l->pending > 0 &&
           rs_upstream_breaker_state(rs_grpc_client_upstream(cl)) == RS_BREAKER_HALF_OPEN;
}

/* Starts one GetProduct per line of idx[0..n) into slots; lines that wait
 * for the trial go to later (when not NULL). Returns the slots used. */
static size_t start_round(rs_grpc_client_t *cl, ord_line_t *lines, const size_t *idx, size_t n,
                          const rs_grpc_call_opts_t *o, latch_t *l, slot_t *slots, size_t *later,
                          size_t *n_later)
{
    size_t used = 0;

    for (size_t i = 0; i < n; i++) {
        get_req_t req = SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;
        ord_line_t *line = &lines[idx[i]];
        slot_t *s = &slots[used];
        rs_grpc_result_t res;

        *s = (slot_t){l, line, NULL};
        req.id = (char *)line->product_id;
        /* Counted before the call starts: its callback may run before
         * rs_grpc_call_async returns. */
        pthread_mutex_lock(&l->mu);
        l->pending++;
        pthread_mutex_unlock(&l->mu);
        if (rs_grpc_call_async(cl, ORD_CATALOG_GET_PRODUCT, &req.base,
                               &shopmicro__catalog__v1__product__descriptor, o, on_priced, s,
                               &s->handle, &res) == SVC_OK) {
            used++;
            continue;
        }
        /* Rejected (breaker open, bulkhead full): no callback will come. */
        pthread_mutex_lock(&l->mu);
        l->pending--;
        if (later != NULL && waits_for_trial(cl, &res, l)) {
            later[(*n_later)++] = idx[i];
            pthread_mutex_unlock(&l->mu);
            continue;
        }
        {
            char msg[SVC_ERRBUF_LEN] = "";
            fail_locked(l, describe(line->product_id, &res, msg), msg, res.retry_after_ms);
        }
        pthread_mutex_unlock(&l->mu);
        break; /* the order fails anyway: start no more calls */
    }
    return used;
}

static void release_all(slot_t *slots, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (slots[i].handle != NULL)
            rs_grpc_release(slots[i].handle);
}

svc_err_t ord_price_lines(rs_grpc_client_t *cl, ord_line_t *lines, size_t n, uint64_t deadline_ns,
                          uint32_t *retry_after_ms, char *errbuf)
{
    slot_t slots[ORD_MAX_ITEMS];
    size_t all[ORD_MAX_ITEMS], later[ORD_MAX_ITEMS], n_later = 0, used;
    const char *rid = svc_log_request_id();
    rpc_md_t md = {"x-request-id", rid};
    rs_grpc_call_opts_t o = {deadline_ns, NULL, &md, rid[0] != '\0' ? 1 : 0};
    pthread_condattr_t ca;
    latch_t l;

    if (n > ORD_MAX_ITEMS) {
        svc_errbuf_set(errbuf, "pricing: %zu lines, at most %d", n, ORD_MAX_ITEMS);
        return SVC_EINTERNAL;
    }
    memset(&l, 0, sizeof l);
    pthread_mutex_init(&l.mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* deadlines are monotonic */
    pthread_cond_init(&l.cv, &ca);
    pthread_condattr_destroy(&ca);
    for (size_t i = 0; i < n; i++)
        all[i] = i;

    used = start_round(cl, lines, all, n, &o, &l, slots, later, &n_later);
    wait_all(&l, slots, used, deadline_ns);
    release_all(slots, used);
    if (!l.failed && n_later > 0) {
        /* One more round trip, once: the trial has settled. */
        used = start_round(cl, lines, later, n_later, &o, &l, slots, NULL, NULL);
        wait_all(&l, slots, used, deadline_ns);
        release_all(slots, used);
    }
    pthread_cond_destroy(&l.cv);
    pthread_mutex_destroy(&l.mu);
    if (l.failed)
        svc_errbuf_set(errbuf, "%s", l.message);
    *retry_after_ms = l.failed ? l.retry_after_ms : 0;
    return l.failed ? l.err : SVC_OK;
}
