/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - per-upstream, per-method counters and their Prometheus text.
 *
 * Calls bump counters in their thread's shard with relaxed atomic adds: no
 * lock, no shared cache line on the happy path. The renderer sums the shards.
 * Each counter is exact, but the page is not a snapshot of one instant, which
 * Prometheus does not need. Series exist from the start at 0 for every known
 * label value, so rate() works from the first scrape; methods outside the
 * table share the label method="other", which bounds cardinality.
 */
#include <string.h>

#include "internal.h"

#define PREFIX "shopmicro_resilience_"

_Static_assert(RS__HIST_N == SVC_LATENCY_BUCKETS, "svc/core.h's buckets");
#define hist_le svc_latency_le

/* The reasons for which a retry can be refused, and a call rejected. */
static const rs_reason_t denial_reasons[] = {RS_REASON_NOT_IDEMPOTENT, RS_REASON_ATTEMPTS_EXHAUSTED,
                                             RS_REASON_DEADLINE,       RS_REASON_BUDGET_EXHAUSTED,
                                             RS_REASON_BREAKER_OPEN,   RS_REASON_BULKHEAD_FULL,
                                             RS_REASON_PUSHBACK};
static const rs_reason_t rejection_reasons[] = {RS_REASON_BREAKER_OPEN, RS_REASON_BULKHEAD_FULL};
static const rs_breaker_state_t transitions[][2] = {{RS_BREAKER_CLOSED, RS_BREAKER_OPEN},
                                                    {RS_BREAKER_OPEN, RS_BREAKER_HALF_OPEN},
                                                    {RS_BREAKER_HALF_OPEN, RS_BREAKER_CLOSED},
                                                    {RS_BREAKER_HALF_OPEN, RS_BREAKER_OPEN}};

rs__mstats_t *rs__stats(const rs_upstream_t *u, const struct rs__method *m)
{
    return &u->stats[(size_t)rs__shard() * (u->n_methods + 1) + m->index];
}

void rs__stats_settle(rs__mstats_t *s, rs_reason_t reason, bool attempted, uint64_t ns)
{
    unsigned i = svc_latency_bucket(ns);

    if (reason != RS_REASON_OK)
        atomic_fetch_add_explicit(&s->calls[reason], 1, memory_order_relaxed);
    if (!attempted)
        return;
    atomic_fetch_add_explicit(reason == RS_REASON_OK ? &s->hist_ok[i] : &s->hist[i], 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&s->hist_sum_ns, ns, memory_order_relaxed);
}

/* ---- reading: one method's counters summed over the shards --------------- */

typedef struct snap {
    uint64_t calls[RS__REASON_COUNT], rejected[RS__REASON_COUNT], denied[RS__REASON_COUNT];
    uint64_t retries[RS__CAUSE_COUNT], attempts, hist[RS__HIST_N + 1], hist_sum_ns;
} snap_t;

#define LOAD(p) atomic_load_explicit(&(p), memory_order_relaxed)

static void snapshot(const rs_upstream_t *u, size_t mi, snap_t *out)
{
    memset(out, 0, sizeof *out);
    for (size_t sh = 0; sh < RS__SHARDS; sh++) {
        const rs__mstats_t *s = &u->stats[sh * (u->n_methods + 1) + mi];
        for (unsigned r = 0; r < RS__REASON_COUNT; r++) {
            out->calls[r] += r == RS_REASON_OK ? 0 : LOAD(s->calls[r]);
            out->rejected[r] += LOAD(s->rejected[r]);
            out->denied[r] += LOAD(s->denied[r]);
        }
        for (unsigned c = 0; c < RS__CAUSE_COUNT; c++)
            out->retries[c] += LOAD(s->retries[c]);
        for (unsigned h = 0; h <= RS__HIST_N; h++) {
            uint64_t ok = LOAD(s->hist_ok[h]);
            out->calls[RS_REASON_OK] += ok;
            out->hist[h] += ok + LOAD(s->hist[h]);
        }
        out->attempts += LOAD(s->attempts);
        out->hist_sum_ns += LOAD(s->hist_sum_ns);
    }
}

void rs__stats_totals(const rs_upstream_t *u, rs__totals_t *out)
{
    snap_t s;

    memset(out, 0, sizeof *out);
    for (size_t mi = 0; mi <= u->n_methods; mi++) {
        snapshot(u, mi, &s);
        for (unsigned r = 0; r < RS__REASON_COUNT; r++) {
            out->calls += s.calls[r];
            out->rejected += s.rejected[r];
        }
        for (unsigned c = 0; c < RS__CAUSE_COUNT; c++)
            out->retries += s.retries[c];
        for (unsigned h = 0; h <= RS__HIST_N; h++)
            out->originals += s.hist[h]; /* a call is in the histogram iff it was attempted */
        out->attempts += s.attempts;
    }
}

/* ---- writing: snprintf semantics over the whole page --------------------- */

/* snprintf semantics over the whole page (svc/core.h). */
typedef svc_text_t out_t;
#define put svc_text_printf

static void family(out_t *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP " PREFIX "%s %s\n# TYPE " PREFIX "%s %s\n", name, help, name, type);
}

typedef void (*method_fn)(out_t *o, const char *labels, const snap_t *s);

/* Calls fn for every method of every upstream with its label prefix. */
static void each_method(out_t *o, rs_upstream_t *const *ups, size_t n, method_fn fn)
{
    char labels[2 * RS_NAME_MAX + 32];
    snap_t s;

    for (size_t i = 0; i < n; i++) {
        for (size_t mi = 0; mi <= ups[i]->n_methods; mi++) {
            snprintf(labels, sizeof labels, "upstream=\"%s\",method=\"%s\"", ups[i]->name,
                     ups[i]->methods[mi].label);
            snapshot(ups[i], mi, &s);
            fn(o, labels, &s);
        }
    }
}

static void put_calls(out_t *o, const char *labels, const snap_t *s)
{
    for (unsigned r = 0; r < RS__REASON_COUNT; r++)
        put(o, PREFIX "calls_total{%s,result=\"%s\"} %llu\n", labels,
            rs_reason_name((rs_reason_t)r), (unsigned long long)s->calls[r]);
}

static void put_attempts(out_t *o, const char *labels, const snap_t *s)
{
    put(o, PREFIX "attempts_total{%s} %llu\n", labels, (unsigned long long)s->attempts);
}

static void put_retries(out_t *o, const char *labels, const snap_t *s)
{
    for (unsigned c = 0; c < RS__CAUSE_COUNT; c++)
        put(o, PREFIX "retries_total{%s,cause=\"%s\"} %llu\n", labels,
            rs__cause_name((rs__cause_t)c), (unsigned long long)s->retries[c]);
}

static void put_denied(out_t *o, const char *labels, const snap_t *s)
{
    for (size_t i = 0; i < SVC_COUNTOF(denial_reasons); i++)
        put(o, PREFIX "retries_denied_total{%s,reason=\"%s\"} %llu\n", labels,
            rs_reason_name(denial_reasons[i]), (unsigned long long)s->denied[denial_reasons[i]]);
}

static void put_rejections(out_t *o, const char *labels, const snap_t *s)
{
    for (size_t i = 0; i < SVC_COUNTOF(rejection_reasons); i++)
        put(o, PREFIX "rejections_total{%s,reason=\"%s\"} %llu\n", labels,
            rs_reason_name(rejection_reasons[i]),
            (unsigned long long)s->rejected[rejection_reasons[i]]);
}

static void put_histogram(out_t *o, const char *labels, const snap_t *s)
{
    uint64_t cumulative = 0;

    for (unsigned h = 0; h < RS__HIST_N; h++) {
        cumulative += s->hist[h];
        put(o, PREFIX "call_duration_seconds_bucket{%s,le=\"%s\"} %llu\n", labels, hist_le[h],
            (unsigned long long)cumulative);
    }
    cumulative += s->hist[RS__HIST_N];
    put(o, PREFIX "call_duration_seconds_bucket{%s,le=\"+Inf\"} %llu\n", labels,
        (unsigned long long)cumulative);
    put(o, PREFIX "call_duration_seconds_sum{%s} %.9f\n", labels, (double)s->hist_sum_ns / 1e9);
    put(o, PREFIX "call_duration_seconds_count{%s} %llu\n", labels, (unsigned long long)cumulative);
}

static void put_method_families(out_t *o, rs_upstream_t *const *ups, size_t n)
{
    family(o, "calls_total", "counter",
           "Logical calls by final result: ok, retried (ok after retries), or why they failed.");
    each_method(o, ups, n, put_calls);
    family(o, "attempts_total", "counter",
           "Attempts started (transport calls); attempts/calls is the retry amplification.");
    each_method(o, ups, n, put_attempts);
    family(o, "retries_total", "counter", "Retries scheduled, by the outcome that caused them.");
    each_method(o, ups, n, put_retries);
    family(o, "retries_denied_total", "counter", "Retries wanted but refused, by reason.");
    each_method(o, ups, n, put_denied);
    family(o, "rejections_total", "counter",
           "Calls refused at admission, before any attempt, by reason.");
    each_method(o, ups, n, put_rejections);
    family(o, "call_duration_seconds", "histogram",
           "Duration of calls that made at least one attempt (backoffs included, rejections "
           "excluded).");
    each_method(o, ups, n, put_histogram);
}

static void put_upstream_families(out_t *o, rs_upstream_t *const *ups, size_t n)
{
    family(o, "in_flight", "gauge", "Calls holding a bulkhead slot (not those in a backoff).");
    for (size_t i = 0; i < n; i++)
        put(o, PREFIX "in_flight{upstream=\"%s\"} %lld\n", ups[i]->name,
            (long long)rs__bulkhead_in_flight(&ups[i]->bulkhead));
    family(o, "bulkhead_limit", "gauge", "Bulkhead size: concurrent calls allowed; 0 = no limit.");
    for (size_t i = 0; i < n; i++)
        put(o, PREFIX "bulkhead_limit{upstream=\"%s\"} %u\n", ups[i]->name, ups[i]->bulkhead.limit);
    family(o, "breaker_state", "gauge", "1 for the breaker's current state, 0 for the others.");
    for (size_t i = 0; i < n; i++) {
        rs_breaker_state_t st = rs__breaker_state(&ups[i]->breaker);
        for (int s = RS_BREAKER_CLOSED; s <= RS_BREAKER_HALF_OPEN; s++)
            put(o, PREFIX "breaker_state{upstream=\"%s\",state=\"%s\"} %d\n", ups[i]->name,
                rs_breaker_state_name((rs_breaker_state_t)s), (int)st == s);
    }
    family(o, "breaker_transitions_total", "counter", "Breaker state changes.");
    for (size_t i = 0; i < n; i++)
        for (size_t t = 0; t < SVC_COUNTOF(transitions); t++)
            put(o, PREFIX "breaker_transitions_total{upstream=\"%s\",from=\"%s\",to=\"%s\"} %llu\n",
                ups[i]->name, rs_breaker_state_name(transitions[t][0]),
                rs_breaker_state_name(transitions[t][1]),
                (unsigned long long)LOAD(
                    ups[i]->breaker.transitions[transitions[t][0]][transitions[t][1]]));
}

static void put_budget(out_t *o, rs_upstream_t *const *ups, size_t n)
{
    family(o, "retry_budget_remaining", "gauge",
           "Retries the budget would allow now (+Inf: no budget).");
    for (size_t i = 0; i < n; i++) {
        uint64_t left = rs__budget_remaining(&ups[i]->budget, rs__now(ups[i]));
        if (left == UINT64_MAX)
            put(o, PREFIX "retry_budget_remaining{upstream=\"%s\"} +Inf\n", ups[i]->name);
        else
            put(o, PREFIX "retry_budget_remaining{upstream=\"%s\"} %llu\n", ups[i]->name,
                (unsigned long long)left);
    }
}

svc_err_t rs_metrics_render(rs_upstream_t *const *ups, size_t n, char *buf, size_t cap, size_t *len)
{
    out_t o = svc_text_on(buf, cap);

    put_method_families(&o, ups, n);
    put_upstream_families(&o, ups, n);
    put_budget(&o, ups, n);
    return svc_text_end(&o, len);
}
