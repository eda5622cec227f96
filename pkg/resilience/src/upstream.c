/* SPDX-License-Identifier: Apache-2.0 */
/*
 * upstream.c - options, validation, and the life of an rs_upstream_t.
 *
 * Everything is checked before anything is built, so a bad configuration
 * fails at start-up with a sentence naming the option, never later in a
 * call. After rs_upstream_new() returns, nothing in the upstream changes but
 * its atomic counters and the breaker's state.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void rs_upstream_opts_init(rs_upstream_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->policy.attempt_timeout_ms = RS_DEFAULT_ATTEMPT_TIMEOUT_MS;
    o->policy.max_attempts = RS_DEFAULT_MAX_ATTEMPTS;
    o->policy.backoff_base_ms = RS_DEFAULT_BACKOFF_BASE_MS;
    o->policy.backoff_cap_ms = RS_DEFAULT_BACKOFF_CAP_MS;
    o->policy.jitter = RS_JITTER_FULL;
    o->policy.retry_on = RS_RETRY_DEFAULT;
    o->breaker.failures = RS_DEFAULT_BREAKER_FAILURES;
    o->breaker.cooldown_ms = RS_DEFAULT_BREAKER_COOLDOWN_MS;
    o->breaker.trials = RS_DEFAULT_BREAKER_TRIALS;
    o->breaker.trial_timeout_ms = RS_DEFAULT_BREAKER_TRIAL_TIMEOUT_MS;
    o->breaker.ratio_pct = RS_DEFAULT_BREAKER_RATIO_PCT;
    o->breaker.ratio_min_calls = RS_DEFAULT_BREAKER_RATIO_MIN_CALLS;
    o->breaker.ratio_window_ms = RS_DEFAULT_BREAKER_RATIO_WINDOW_MS;
    o->budget.percent = RS_DEFAULT_BUDGET_PERCENT;
    o->budget.min_per_sec = RS_DEFAULT_BUDGET_MIN_PER_SEC;
    o->budget.window_ms = RS_DEFAULT_BUDGET_WINDOW_MS;
    o->max_concurrent = RS_DEFAULT_MAX_CONCURRENT;
    o->min_attempt_ms = RS_DEFAULT_MIN_ATTEMPT_MS;
    o->max_pushback_ms = RS_DEFAULT_MAX_PUSHBACK_MS;
}

static svc_err_t check_breaker(const rs_breaker_opts_t *b, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *bad = NULL;

    if (b->trials < 1 || b->trials > RS_MAX_TRIALS_LIMIT)
        bad = "breaker.trials must be in 1..RS_MAX_TRIALS_LIMIT";
    else if ((b->failures > 0 || b->ratio_pct > 0) && b->cooldown_ms == 0)
        bad = "breaker.cooldown_ms must be > 0";
    else if (b->cooldown_jitter_pct > 100)
        bad = "breaker.cooldown_jitter_pct must be <= 100";
    else if (b->ratio_pct > 100)
        bad = "breaker.ratio_pct must be <= 100";
    else if (b->ratio_pct > 0 && b->ratio_min_calls == 0)
        bad = "breaker.ratio_min_calls must be > 0 with ratio_pct";
    else if (b->ratio_pct > 0 && b->ratio_window_ms < RS__WINDOW_BUCKETS)
        bad = "breaker.ratio_window_ms must be >= 10 with ratio_pct";
    if (bad == NULL)
        return SVC_OK;
    svc_errbuf_set(errbuf, "%s", bad);
    return SVC_EINVAL;
}

static svc_err_t check_opts(const rs_upstream_opts_t *o, char errbuf[static SVC_ERRBUF_LEN])
{
    if (o->name == NULL || !rs__label_ok(o->name)) {
        svc_errbuf_set(errbuf, "name must match [A-Za-z0-9_.-]{1,%u}", RS_NAME_MAX);
        return SVC_EINVAL;
    }
    if (o->budget.percent > 100) {
        svc_errbuf_set(errbuf, "budget.percent %u must be <= 100", o->budget.percent);
        return SVC_EINVAL;
    }
    if (o->budget.window_ms != 0 && o->budget.window_ms < RS__WINDOW_BUCKETS) {
        svc_errbuf_set(errbuf, "budget.window_ms must be 0 (no budget) or >= 10");
        return SVC_EINVAL;
    }
    return check_breaker(&o->breaker, errbuf);
}

/* The options with every NULL hook replaced by its default. */
static rs_upstream_opts_t resolve(const rs_upstream_opts_t *o)
{
    rs_upstream_opts_t r = *o;

    if (r.clock == NULL)
        r.clock = svc_clock_monotonic();
    if (r.random.next == NULL)
        r.random = (rs_random_t){rs__random_default, NULL};
    if (r.sleep == NULL)
        r.sleep = rs__sleep_default;
    return r;
}

static svc_err_t alloc_stats(rs_upstream_t *u)
{
    size_t n = (size_t)RS__SHARDS * (u->n_methods + 1);

    u->stats = aligned_alloc(RS__CACHELINE, n * sizeof *u->stats);
    if (u->stats == NULL)
        return SVC_ENOMEM;
    /* All-zero bytes are a valid zero for lock-free atomic integers. */
    memset(u->stats, 0, n * sizeof *u->stats);
    return SVC_OK;
}

svc_err_t rs_upstream_new(const rs_upstream_opts_t *o, rs_upstream_t **out,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    rs_upstream_opts_t r;
    rs_upstream_t *u;
    svc_err_t err;

    err = check_opts(o, errbuf);
    if (err != SVC_OK)
        return err;
    r = resolve(o);
    u = aligned_alloc(RS__CACHELINE, sizeof *u);
    if (u == NULL)
        return SVC_ENOMEM;
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%s", r.name);
    u->clock = r.clock;
    u->random = r.random;
    u->sleep = r.sleep;
    u->sleep_ctx = r.sleep_ctx;
    u->min_attempt_ms = r.min_attempt_ms;
    u->max_pushback_ms = r.max_pushback_ms;
    u->bulkhead.limit = r.max_concurrent;
    err = rs__methods_build(u, &r, errbuf);
    if (err == SVC_OK)
        err = alloc_stats(u);
    if (err == SVC_OK)
        err = rs__journal_init(&u->journal);
    if (err == SVC_OK)
        err = rs__breaker_init(&u->breaker, &r, u->name);
    u->breaker.journal = &u->journal;
    if (err == SVC_OK)
        err = rs__budget_init(&u->budget, &r.budget);
    if (err != SVC_OK)
        goto fail;
    *out = u;
    return SVC_OK;

fail:
    rs_upstream_free(u); /* every part is safe to dispose half-built */
    return err;
}

void rs_upstream_free(rs_upstream_t *u)
{
    if (u == NULL)
        return;
    rs__budget_dispose(&u->budget);
    rs__breaker_dispose(&u->breaker);
    rs__journal_dispose(&u->journal);
    free(u->stats);
    rs__methods_free(u);
    free(u);
}

const char *rs_upstream_name(const rs_upstream_t *u)
{
    return u->name;
}

rs_breaker_state_t rs_upstream_breaker_state(const rs_upstream_t *u)
{
    return rs__breaker_state(&u->breaker);
}

uint32_t rs_upstream_ms_until_trial(const rs_upstream_t *u)
{
    return rs__breaker_ms_until_trial(&u->breaker, rs__now(u));
}

int64_t rs_upstream_in_flight(const rs_upstream_t *u)
{
    return rs__bulkhead_in_flight(&u->bulkhead);
}
