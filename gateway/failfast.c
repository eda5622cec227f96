/* SPDX-License-Identifier: Apache-2.0 */
/*
 * failfast.c - per-route fail-fast windows (see failfast.h). Each route has
 * one slot; `until_ns` is read without the lock so that a route with no
 * window costs one atomic load, and everything else is under the slot's
 * read-write lock: the answers in a window, which every loop thread gives
 * at once, read under it (so a loop thread preempted while it copies the
 * message holds no other loop up), and a refusal, a probe's claim and its
 * end, a few a second, write.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failfast.h"

typedef enum { ANSWERS, WINDOWS, PROBES, N_COUNTERS } counter_t;

typedef struct slot {
    _Atomic uint64_t until_ns; /* 0: no window; else when the next probe is due */
    pthread_rwlock_t lock;     /* guards what follows, and until_ns's writes */
    uint64_t hint_until_ns;    /* when the upstream said to come back: Retry-After */
    uint64_t probe_until_ns;   /* a probe is out until then; 0: none */
    uint64_t epoch;            /* bumped by every refusal; a probe's ticket is epoch + 1 */
    char message[SVC_ERRBUF_LEN];
    rpc_status_details_t details;       /* the refusal's google.rpc.Status: its answers carry it */
    _Atomic uint64_t count[N_COUNTERS]; /* rendered as counters[] says */
} slot_t;

static const struct {
    const char *name, *help;
} counters[] = {
    [ANSWERS] = {"gateway_failfast_answers_total",
                 "Requests the gateway answered 503 itself, in a window opened by the upstream's "
                 "refusal, by route."},
    [WINDOWS] = {"gateway_failfast_windows_total",
                 "Fail-fast windows opened by an upstream's refusal with a retry hint, by route."},
    [PROBES] = {"gateway_failfast_probes_total",
                "Calls let through to the upstream after a window, one at a time, by route."},
};

static void bump(slot_t *s, counter_t c)
{
    atomic_fetch_add_explicit(&s->count[c], 1, memory_order_relaxed);
}

struct gw_failfast {
    const gw_route_t *routes;
    size_t n;
    uint64_t max_window_ns;
    slot_t slot[];
};

void gw_failfast_opts_init(gw_failfast_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->max_window_ms = GW_FAILFAST_DEFAULT_MAX_WINDOW_MS;
}

svc_err_t gw_failfast_new(const gw_failfast_opts_t *o, gw_failfast_t **out)
{
    gw_failfast_t *ff;

    *out = NULL;
    if (o->routes == NULL || o->n_routes == 0 || o->max_window_ms == 0)
        return SVC_EINVAL;
    ff = calloc(1, sizeof *ff + o->n_routes * sizeof ff->slot[0]);
    if (ff == NULL)
        return SVC_ENOMEM;
    ff->routes = o->routes;
    ff->n = o->n_routes;
    ff->max_window_ns = (uint64_t)o->max_window_ms * SVC_NS_PER_MS;
    for (size_t i = 0; i < ff->n; i++)
        pthread_rwlock_init(&ff->slot[i].lock, NULL);
    *out = ff;
    return SVC_OK;
}

void gw_failfast_free(gw_failfast_t *ff)
{
    if (ff == NULL)
        return;
    for (size_t i = 0; i < ff->n; i++)
        pthread_rwlock_destroy(&ff->slot[i].lock);
    free(ff);
}

bool gw_failfast_is_refusal(const rs_grpc_result_t *res)
{
    return res->err == SVC_EUNAVAIL && res->attempts > 0 &&
           res->reason == RS_REASON_NOT_RETRYABLE && res->retry_after_ms > 0;
}

static uint32_t ceil_ms(uint64_t ns)
{
    uint64_t ms = (ns + SVC_NS_PER_MS - 1) / SVC_NS_PER_MS;

    return ms == 0 ? 1 : ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

/* The answer for a call refused in the window. Caller holds s->lock. */
static void refuse_locked(slot_t *s, uint64_t now_ns, rs_grpc_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->err = SVC_EUNAVAIL;
    res->reason = RS_REASON_PUSHBACK;
    res->retry_after_ms = s->hint_until_ns > now_ns ? ceil_ms(s->hint_until_ns - now_ns)
                                                    : GW_FAILFAST_PROBE_RETRY_AFTER_MS;
    memcpy(res->message, s->message, sizeof res->message);
    rpc_status_details_copy(&res->details, &s->details);
}

/* Refuses the call if the window or a probe's lease holds at now_ns.
 * Caller holds s->lock (either way). */
static bool refused_locked(slot_t *s, uint64_t now_ns, rs_grpc_result_t *res)
{
    uint64_t until = atomic_load_explicit(&s->until_ns, memory_order_relaxed);

    if (until == 0 || (now_ns >= until && now_ns >= s->probe_until_ns))
        return false;
    refuse_locked(s, now_ns, res);
    bump(s, ANSWERS);
    return true;
}

gw_failfast_verdict_t gw_failfast_admit(gw_failfast_t *ff, size_t route, uint64_t now_ns,
                                        uint64_t lease_ns, uint64_t *ticket, rs_grpc_result_t *res)
{
    slot_t *s = &ff->slot[route];
    gw_failfast_verdict_t v = GW_FAILFAST_PASS;
    bool refused;

    *ticket = 0;
    if (atomic_load_explicit(&s->until_ns, memory_order_acquire) == 0)
        return GW_FAILFAST_PASS;
    pthread_rwlock_rdlock(&s->lock);
    refused = refused_locked(s, now_ns, res);
    pthread_rwlock_unlock(&s->lock);
    if (refused)
        return GW_FAILFAST_REFUSE;
    /* The window has passed and no probe is out (or its lease ran out):
     * claim the probe, unless another call did in between. */
    pthread_rwlock_wrlock(&s->lock);
    if (refused_locked(s, now_ns, res)) {
        v = GW_FAILFAST_REFUSE;
    } else if (atomic_load_explicit(&s->until_ns, memory_order_relaxed) != 0) {
        s->probe_until_ns = lease_ns > now_ns ? lease_ns : now_ns + 1;
        *ticket = s->epoch + 1;
        bump(s, PROBES);
        v = GW_FAILFAST_PROBE;
    }
    pthread_rwlock_unlock(&s->lock);
    return v;
}

/* A refusal opens (or moves) the window: until the hint, at most the cap.
 * The latest refusal wins, also over a longer window: it is the upstream's
 * newest word. Caller holds s->lock for writing. */
static void open_locked(gw_failfast_t *ff, slot_t *s, const rs_grpc_result_t *res, uint64_t now_ns)
{
    uint64_t hint = (uint64_t)res->retry_after_ms * SVC_NS_PER_MS;
    uint64_t window = hint < ff->max_window_ns ? hint : ff->max_window_ns;
    uint64_t was = atomic_load_explicit(&s->until_ns, memory_order_relaxed);

    if (was == 0 || now_ns >= was) /* not a straggler's refusal inside the window */
        bump(s, WINDOWS);
    s->hint_until_ns = now_ns + hint;
    s->probe_until_ns = 0;
    s->epoch++;
    snprintf(s->message, sizeof s->message, "%s", res->message);
    rpc_status_details_copy(&s->details, &res->details);
    atomic_store_explicit(&s->until_ns, now_ns + window, memory_order_release);
}

void gw_failfast_end(gw_failfast_t *ff, size_t route, uint64_t ticket, const rs_grpc_result_t *res,
                     uint64_t now_ns)
{
    slot_t *s = &ff->slot[route];
    bool refusal = gw_failfast_is_refusal(res);

    if (!refusal && ticket == 0)
        return; /* an ordinary call: windows are the refusals' and the probes' business */
    pthread_rwlock_wrlock(&s->lock);
    if (refusal) {
        open_locked(ff, s, res, now_ns);
    } else if (ticket == s->epoch + 1) {
        /* No refusal came meanwhile, so this is the window's probe. One that
         * never reached the upstream or was cancelled says nothing about it:
         * the next call probes. Any verdict of the upstream closes the window. */
        s->probe_until_ns = 0;
        if (res->attempts > 0 && res->reason != RS_REASON_CANCELLED)
            atomic_store_explicit(&s->until_ns, 0, memory_order_release);
    }
    pthread_rwlock_unlock(&s->lock);
}

svc_err_t gw_failfast_render(const gw_failfast_t *ff, char *buf, size_t cap, size_t *len)
{
    svc_text_t t = svc_text_on(buf, cap);

    if (ff == NULL) { /* GATEWAY_FAILFAST=off: no series */
        if (len != NULL)
            *len = 0;
        return SVC_OK;
    }
    for (size_t c = 0; c < N_COUNTERS; c++) {
        svc_text_printf(&t, "# HELP %s %s\n# TYPE %s counter\n", counters[c].name, counters[c].help,
                        counters[c].name);
        for (size_t i = 0; i < ff->n; i++) {
            if (ff->routes[i].rpc == NULL)
                continue;
            svc_text_printf(&t, "%s{route=\"%s\",method=\"%s\"} %llu\n", counters[c].name,
                            ff->routes[i].pattern, ff->routes[i].method,
                            (unsigned long long)atomic_load_explicit(&ff->slot[i].count[c],
                                                                     memory_order_relaxed));
        }
    }
    return svc_text_end(&t, len);
}
