/* SPDX-License-Identifier: Apache-2.0 */
/*
 * breaker.c - the circuit breaker: closed -> open -> half-open -> closed.
 *
 * One 64-bit word holds the state, the trial permits taken and an epoch that
 * every transition bumps. The hot path (closed) is a single atomic load at
 * admission and, on success, a load of the failure count. Transitions are
 * rare, so they are serialised by a mutex: each is decided, applied and
 * reported exactly once, in order. Trial permits are taken lock-free with a
 * CAS on the word, so "exactly one trial" holds however many threads arrive
 * together, and a CAS made against an old epoch simply fails.
 *
 * A call remembers the epoch it was admitted in; its verdict counts only if
 * the breaker is still in that epoch. A call admitted while closed that ends
 * after the breaker opened and closed again says nothing about the new
 * closed period, and a trial that outlived its half-open period (timed out,
 * re-opened) cannot close the breaker late.
 */
#include <stdio.h>

#include "internal.h"

#define STATE_MASK        0xffull
#define TRIAL_ONE         (1ull << 8)
#define EPOCH_SHIFT       32
#define WHY_LEN           96
#define HALF_OPEN_HINT_MS 1000u

static rs_breaker_state_t w_state(uint64_t w)
{
    return (rs_breaker_state_t)(w & STATE_MASK);
}

static uint32_t w_trials(uint64_t w)
{
    return (uint32_t)((w >> 8) & 0xff);
}

static uint32_t w_epoch(uint64_t w)
{
    return (uint32_t)(w >> EPOCH_SHIFT);
}

static uint64_t w_make(uint32_t epoch, rs_breaker_state_t s)
{
    return (uint64_t)epoch << EPOCH_SHIFT | (uint64_t)s;
}

static uint32_t ceil_ms(uint64_t ns)
{
    uint64_t ms = (ns + SVC_NS_PER_MS - 1) / SVC_NS_PER_MS;

    return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

svc_err_t rs__breaker_init(rs__breaker_t *b, const rs_upstream_opts_t *o, const char *name)
{
    /* The ratio rule needs windows; without it they stay disabled and cost
     * nothing. */
    uint64_t ratio_ns = o->breaker.ratio_pct > 0 ? o->breaker.ratio_window_ms * SVC_NS_PER_MS : 0;
    svc_err_t err;

    atomic_init(&b->word, w_make(0, RS_BREAKER_CLOSED));
    atomic_init(&b->open_until_ns, 0);
    atomic_init(&b->trial_since_ns, 0);
    atomic_init(&b->consecutive, 0);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            atomic_init(&b->transitions[i][j], 0);
    b->trial_successes = 0;
    b->o = o->breaker;
    b->name = name;
    b->clock = o->clock;
    b->random = o->random;
    b->on_transition = o->on_transition;
    b->on_transition_ctx = o->on_transition_ctx;
    err = rs__window_init(&b->calls, ratio_ns, true);
    if (err == SVC_OK)
        err = rs__window_init(&b->fails, ratio_ns, false);
    else
        (void)rs__window_init(&b->fails, 0, false); /* disabled: cannot fail */
    b->lock_ready = pthread_mutex_init(&b->lock, NULL) == 0;
    if (err == SVC_OK && !b->lock_ready)
        err = SVC_ENOMEM;
    return err; /* on failure, rs__breaker_dispose() cleans up */
}

void rs__breaker_dispose(rs__breaker_t *b)
{
    rs__window_dispose(&b->calls);
    rs__window_dispose(&b->fails);
    if (b->lock_ready)
        pthread_mutex_destroy(&b->lock);
}

static void default_transition(void *ctx, const rs_transition_t *t)
{
    char kv[160];
    svc_log_level_t lvl = t->to == RS_BREAKER_OPEN ? SVC_LOG_WARN : SVC_LOG_INFO;

    (void)ctx;
    if (!svc_log_enabled(lvl))
        return;
    snprintf(kv, sizeof kv, " upstream=%s from=%s to=%s", t->upstream,
             rs_breaker_state_name(t->from), rs_breaker_state_name(t->to));
    svc_log_write(lvl, RS__LOG_MODULE, kv, "%s", t->text);
}

static void report(rs__breaker_t *b, rs_breaker_state_t from, rs_breaker_state_t to,
                   const char *why)
{
    char text[WHY_LEN + 2 * RS_NAME_MAX];
    rs_transition_t t = {b->name, from, to, why, text};

    snprintf(text, sizeof text, "breaker %s: %s -> %s %s", b->name, rs_breaker_state_name(from),
             rs_breaker_state_name(to), why);
    if (b->on_transition != NULL)
        b->on_transition(b->on_transition_ctx, &t);
    else
        default_transition(NULL, &t);
}

static uint64_t cooldown_ns(rs__breaker_t *b)
{
    uint64_t ms = b->o.cooldown_ms, spread = ms * b->o.cooldown_jitter_pct / 100;

    /* Clients that opened together should not all probe together. */
    if (spread > 0)
        ms += b->random.next(b->random.ctx) % (spread + 1);
    return ms * SVC_NS_PER_MS;
}

/* Moves to `to`, bumping the epoch and clearing the permits. Lock held. */
static void transition(rs__breaker_t *b, rs_breaker_state_t to, uint64_t now, const char *why)
{
    uint64_t old = atomic_load_explicit(&b->word, memory_order_relaxed), next;
    rs_breaker_state_t from = w_state(old);

    if (to == RS_BREAKER_OPEN)
        atomic_store_explicit(&b->open_until_ns, rs__add_sat(now, cooldown_ns(b)),
                              memory_order_relaxed);
    if (to == RS_BREAKER_HALF_OPEN) {
        atomic_store_explicit(&b->trial_since_ns, now, memory_order_relaxed);
        b->trial_successes = 0;
    }
    if (to == RS_BREAKER_CLOSED) {
        atomic_store_explicit(&b->consecutive, 0, memory_order_relaxed);
        rs__window_reset(&b->calls);
        rs__window_reset(&b->fails);
    }
    /* Only permit CASes can race with us (they change the trial bits). The
     * release store publishes open_until_ns and friends with the state. */
    do {
        next = w_make(w_epoch(old) + 1, to);
    } while (!atomic_compare_exchange_weak_explicit(&b->word, &old, next, memory_order_release,
                                                    memory_order_relaxed));
    atomic_fetch_add_explicit(&b->transitions[from][to], 1, memory_order_relaxed);
    if (b->journal != NULL)
        rs__journal_transition(b->journal, from, to, why, now);
    report(b, from, to, why);
}

/* Applies `to` if the breaker is still in `state` at `epoch`. */
static void transition_if(rs__breaker_t *b, rs_breaker_state_t state, uint32_t epoch,
                          rs_breaker_state_t to, uint64_t now, const char *why)
{
    uint64_t w;

    pthread_mutex_lock(&b->lock);
    w = atomic_load_explicit(&b->word, memory_order_relaxed);
    if (w_state(w) == state && w_epoch(w) == epoch)
        transition(b, to, now, why);
    pthread_mutex_unlock(&b->lock);
}

static void try_half_open(rs__breaker_t *b, uint64_t w, uint64_t now)
{
    char why[WHY_LEN];

    snprintf(why, sizeof why, "after %ums cooldown", b->o.cooldown_ms);
    transition_if(b, RS_BREAKER_OPEN, w_epoch(w), RS_BREAKER_HALF_OPEN, now, why);
}

/* A trial that never reports back must not wedge the breaker half-open
 * (resilience4j #935): after trial_timeout_ms it counts as failed. */
static void expire_trial(rs__breaker_t *b, uint64_t w, uint64_t now)
{
    uint64_t since = atomic_load_explicit(&b->trial_since_ns, memory_order_relaxed);
    char why[WHY_LEN];

    /* `now` may predate a permit another thread took since: not expired. */
    if (b->o.trial_timeout_ms == 0 || now <= since ||
        now - since < b->o.trial_timeout_ms * SVC_NS_PER_MS)
        return;
    snprintf(why, sizeof why, "after a trial got no verdict in %ums", b->o.trial_timeout_ms);
    transition_if(b, RS_BREAKER_HALF_OPEN, w_epoch(w), RS_BREAKER_OPEN, now, why);
}

rs__admit_t rs__breaker_admit(rs__breaker_t *b, uint32_t *epoch)
{
    uint64_t w = atomic_load_explicit(&b->word, memory_order_acquire), now;

    if (w_state(w) == RS_BREAKER_CLOSED) { /* the hot path: no clock read */
        *epoch = w_epoch(w);
        return RS__ADMIT_NORMAL;
    }
    now = b->clock->now_ns(b->clock->ctx);
    for (;;) {
        switch (w_state(w)) {
        case RS_BREAKER_CLOSED:
            *epoch = w_epoch(w);
            return RS__ADMIT_NORMAL;
        case RS_BREAKER_OPEN:
            if (now < atomic_load_explicit(&b->open_until_ns, memory_order_relaxed))
                return RS__ADMIT_REJECT;
            try_half_open(b, w, now);
            w = atomic_load_explicit(&b->word, memory_order_acquire);
            break;
        case RS_BREAKER_HALF_OPEN:
            if (w_trials(w) >= b->o.trials) {
                expire_trial(b, w, now);
                return RS__ADMIT_REJECT;
            }
            if (atomic_compare_exchange_weak_explicit(&b->word, &w, w + TRIAL_ONE,
                                                      memory_order_acq_rel, memory_order_acquire)) {
                atomic_store_explicit(&b->trial_since_ns, now, memory_order_relaxed);
                *epoch = w_epoch(w);
                return RS__ADMIT_TRIAL;
            }
            break; /* w was reloaded by the failed CAS */
        }
    }
}

bool rs__breaker_recheck(rs__breaker_t *b, bool trial, uint32_t *epoch)
{
    uint64_t w = atomic_load_explicit(&b->word, memory_order_acquire);

    /* A trial gets exactly one attempt: its verdict is the news the breaker
     * is waiting for, and a retry would only delay it. */
    if (trial || w_state(w) != RS_BREAKER_CLOSED)
        return false;
    *epoch = w_epoch(w);
    return true;
}

static bool should_trip(rs__breaker_t *b, uint32_t consecutive, uint64_t now, char *why)
{
    uint64_t calls, fails;

    if (b->o.failures > 0 && consecutive >= b->o.failures) {
        snprintf(why, WHY_LEN, "after %u consecutive failures", consecutive);
        return true;
    }
    if (b->o.ratio_pct == 0)
        return false;
    calls = rs__window_sum(&b->calls, now);
    fails = rs__window_sum(&b->fails, now);
    if (calls < b->o.ratio_min_calls || fails * 100 < (uint64_t)b->o.ratio_pct * calls)
        return false;
    snprintf(why, WHY_LEN, "after %llu%% failures over %llu calls",
             (unsigned long long)(fails * 100 / calls), (unsigned long long)calls);
    return true;
}

static void settle_normal(rs__breaker_t *b, uint32_t epoch, rs__verdict_t v, uint64_t now)
{
    uint64_t w = atomic_load_explicit(&b->word, memory_order_acquire);
    char why[WHY_LEN];
    uint32_t n;

    if (v == RS__VERDICT_IGNORE || w_state(w) != RS_BREAKER_CLOSED || w_epoch(w) != epoch)
        return;
    if (b->o.ratio_pct > 0)
        rs__window_add(&b->calls, now, 1);
    if (v == RS__VERDICT_SUCCESS) {
        /* Read before writing: on the happy path the line stays shared. */
        if (atomic_load_explicit(&b->consecutive, memory_order_relaxed) != 0)
            atomic_store_explicit(&b->consecutive, 0, memory_order_relaxed);
        return;
    }
    if (b->o.ratio_pct > 0)
        rs__window_add(&b->fails, now, 1);
    n = atomic_fetch_add_explicit(&b->consecutive, 1, memory_order_relaxed) + 1;
    if (should_trip(b, n, now, why))
        transition_if(b, RS_BREAKER_CLOSED, epoch, RS_BREAKER_OPEN, now, why);
}

static void release_permit(rs__breaker_t *b)
{
    uint64_t w = atomic_load_explicit(&b->word, memory_order_relaxed);

    while (w_trials(w) > 0 &&
           !atomic_compare_exchange_weak_explicit(&b->word, &w, w - TRIAL_ONE, memory_order_release,
                                                  memory_order_relaxed))
        ;
}

static void settle_trial(rs__breaker_t *b, uint32_t epoch, rs__verdict_t v, uint64_t now)
{
    uint64_t w;
    char why[WHY_LEN];

    pthread_mutex_lock(&b->lock);
    w = atomic_load_explicit(&b->word, memory_order_relaxed);
    if (w_state(w) != RS_BREAKER_HALF_OPEN || w_epoch(w) != epoch) {
        /* The half-open period this trial belonged to is over (it timed
         * out); the transition already cleared its permit. */
    } else if (v == RS__VERDICT_FAILURE) {
        transition(b, RS_BREAKER_OPEN, now, "after a failed trial");
    } else if (v == RS__VERDICT_SUCCESS) {
        /* A successful trial keeps its permit, so at most `trials` trials run
         * per half-open period and all of them must succeed. */
        if (++b->trial_successes >= b->o.trials) {
            snprintf(why, sizeof why, "after %u successful trial%s", b->trial_successes,
                     b->trial_successes == 1 ? "" : "s");
            transition(b, RS_BREAKER_CLOSED, now, why);
        }
    } else {
        /* No verdict (cancelled, the caller's deadline): hand the permit on so
         * the next call can be the trial. A permit never leaks. */
        release_permit(b);
    }
    pthread_mutex_unlock(&b->lock);
}

void rs__breaker_settle(rs__breaker_t *b, bool trial, uint32_t epoch, rs__verdict_t v, uint64_t now)
{
    if (trial)
        settle_trial(b, epoch, v, now);
    else
        settle_normal(b, epoch, v, now);
}

rs_breaker_state_t rs__breaker_state(const rs__breaker_t *b)
{
    return w_state(atomic_load_explicit(&b->word, memory_order_acquire));
}

uint32_t rs__breaker_ms_until_trial(const rs__breaker_t *b, uint64_t now)
{
    uint64_t w = atomic_load_explicit(&b->word, memory_order_acquire), until, since, left, took;

    switch (w_state(w)) {
    case RS_BREAKER_OPEN:
        until = atomic_load_explicit(&b->open_until_ns, memory_order_relaxed);
        return until > now ? ceil_ms(until - now) : 0;
    case RS_BREAKER_HALF_OPEN:
        if (w_trials(w) < b->o.trials)
            return 0;
        if (b->o.trial_timeout_ms == 0)
            return HALF_OPEN_HINT_MS;
        /* A verdict is due soon; the trial timeout bounds the wait. */
        since = atomic_load_explicit(&b->trial_since_ns, memory_order_relaxed);
        took = now > since ? now - since : 0;
        left = b->o.trial_timeout_ms * SVC_NS_PER_MS;
        left = took < left ? left - took : 0;
        return left < HALF_OPEN_HINT_MS * SVC_NS_PER_MS ? ceil_ms(left) : HALF_OPEN_HINT_MS;
    case RS_BREAKER_CLOSED:
    default:
        return 0;
    }
}
