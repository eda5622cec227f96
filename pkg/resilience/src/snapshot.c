/* SPDX-License-Identifier: Apache-2.0 */
/*
 * snapshot.c - rs_snapshot_json(): the live page's feed. Per upstream, the
 * breaker (state, its rule, the last transitions), the call totals from
 * which the page computes attempts/s against originals/s, the retry budget,
 * the bulkhead and the last decisions. docs/resilience.md ("The live page")
 * lists every field.
 *
 * Counters are read as metrics.c reads them, lock-free; the rings are copied
 * out of the journal in one memcpy under its lock and formatted afterwards,
 * so formatting never holds up a call. Every event carries its age (exact,
 * on the upstream's clock) and a wall-clock time derived from it, so a page
 * that polls several processes can put them on one time axis.
 */
#include <string.h>
#include <time.h>

#include "internal.h"

typedef svc_text_t out_t;
#define put    svc_text_printf
#define ULL(x) ((unsigned long long)(x))

static const char *const decided_names[] = {"retry", "done", "fail", "reject"};

static uint64_t wall_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / SVC_NS_PER_MS;
}

/* A journal text as a JSON string: rs__journal_text() kept only printable
 * ASCII, so '"' and '\\' are all there is to escape. */
static void put_str(out_t *o, const char *s)
{
    put(o, "\"");
    while (*s != '\0') {
        size_t n = strcspn(s, "\"\\");
        put(o, "%.*s", (int)n, s);
        s += n;
        if (*s != '\0')
            put(o, "\\%c", *s++);
    }
    put(o, "\"");
}

/* "at_ms" (wall clock) and "age_ms" (exact) of an event at `at`. */
static void put_when(out_t *o, uint64_t now, uint64_t at, uint64_t wall_ms)
{
    uint64_t age = at < now ? (now - at) / SVC_NS_PER_MS : 0;

    put(o, "\"at_ms\":%llu,\"age_ms\":%llu", ULL(wall_ms > age ? wall_ms - age : 0), ULL(age));
}

/* The first sequence number still in a ring of `size` after `last`. */
static uint64_t ring_first(uint64_t last, uint64_t size)
{
    return last > size ? last - size + 1 : 1;
}

static void put_transitions(out_t *o, const rs__journal_data_t *j, uint64_t now, uint64_t wall)
{
    uint64_t first = ring_first(j->transitions, RS__JOURNAL_TRANSITIONS);

    put(o, "\"transitions\":[");
    for (uint64_t seq = first; seq <= j->transitions; seq++) {
        const rs__transition_rec_t *t = &j->t[(seq - 1) % RS__JOURNAL_TRANSITIONS];
        put(o, "%s{\"seq\":%llu,", seq > first ? "," : "", ULL(seq));
        put_when(o, now, t->at_ns, wall);
        put(o, ",\"from\":\"%s\",\"to\":\"%s\",\"why\":",
            rs_breaker_state_name((rs_breaker_state_t)t->from),
            rs_breaker_state_name((rs_breaker_state_t)t->to));
        put_str(o, t->why);
        put(o, "}");
    }
    put(o, "]");
}

static void put_breaker(out_t *o, const rs_upstream_t *u, const rs__journal_data_t *j, uint64_t now,
                        uint64_t wall)
{
    const rs__breaker_t *b = &u->breaker;

    put(o,
        "\"breaker\":{\"state\":\"%s\",\"ms_until_trial\":%u,\"consecutive_failures\":%u,"
        "\"failures_to_open\":%u,\"cooldown_ms\":%u,\"transitions_total\":%llu,",
        rs_breaker_state_name(rs__breaker_state(b)), rs__breaker_ms_until_trial(b, now),
        atomic_load_explicit(&b->consecutive, memory_order_relaxed), b->o.failures,
        b->o.cooldown_ms, ULL(j->transitions));
    put_transitions(o, j, now, wall);
    put(o, "}");
}

static void put_counters(out_t *o, rs_upstream_t *u, uint64_t now)
{
    uint64_t allowance, spent;
    rs__totals_t t;

    rs__stats_totals(u, &t);
    put(o,
        "\"calls\":{\"total\":%llu,\"originals\":%llu,\"attempts\":%llu,\"retries\":%llu,"
        "\"rejected\":%llu},",
        ULL(t.calls), ULL(t.originals), ULL(t.attempts), ULL(t.retries), ULL(t.rejected));
    if (rs__budget_read(&u->budget, now, &allowance, &spent))
        put(o,
            "\"budget\":{\"remaining\":%llu,\"allowance\":%llu,\"spent\":%llu,\"window_ms\":%llu},",
            ULL(spent < allowance ? allowance - spent : 0), ULL(allowance), ULL(spent),
            ULL(u->budget.retries.bucket_ns * RS__WINDOW_BUCKETS / SVC_NS_PER_MS));
    else
        put(o, "\"budget\":null,");
    put(o, "\"bulkhead\":{\"in_use\":%lld,\"limit\":%u}",
        (long long)rs__bulkhead_in_flight(&u->bulkhead), u->bulkhead.limit);
}

static void put_decision(out_t *o, const rs_upstream_t *u, const rs__decision_rec_t *d,
                         uint64_t now, uint64_t wall)
{
    const char *why = d->kind == RS__DECIDED_RETRY ? rs__cause_name((rs__cause_t)d->why)
                                                   : rs_reason_name((rs_reason_t)d->why);

    put(o, "{\"seq\":%llu,", ULL(d->seq));
    put_when(o, now, d->at_ns, wall);
    put(o,
        ",\"method\":\"%s\",\"decision\":\"%s\",\"reason\":\"%s\",\"attempt\":%u,"
        "\"max_attempts\":%u,\"delay_ms\":%u,\"err\":\"%s\",\"repeat\":%u,\"detail\":",
        u->methods[d->method].label, decided_names[d->kind], why, d->attempt, d->max_attempts,
        d->delay_ms, svc_err_name(d->err), d->repeat);
    put_str(o, d->detail);
    put(o, "}");
}

static void put_decisions(out_t *o, rs_upstream_t *u, const rs__journal_data_t *j, uint64_t now,
                          uint64_t wall)
{
    uint64_t first = ring_first(j->records, RS__JOURNAL_DECISIONS);

    put(o, "\"decisions_total\":%llu,\"decisions_dropped\":%llu,\"decisions\":[", ULL(j->decisions),
        ULL(atomic_load_explicit(&u->journal.dropped, memory_order_relaxed)));
    for (uint64_t seq = first; seq <= j->records; seq++) {
        if (seq > first)
            put(o, ",");
        put_decision(o, u, &j->d[(seq - 1) % RS__JOURNAL_DECISIONS], now, wall);
    }
    put(o, "]");
}

static void put_upstream(out_t *o, rs_upstream_t *u, uint64_t wall)
{
    rs__journal_data_t j; /* ~8 KiB: copied out, then formatted without the lock */
    uint64_t now;

    rs__journal_read(&u->journal, &j);
    now = rs__now(u);
    put(o, "{\"name\":\"%s\",", u->name);
    put_breaker(o, u, &j, now, wall);
    put(o, ",");
    put_counters(o, u, now);
    put(o, ",");
    put_decisions(o, u, &j, now, wall);
    put(o, "}");
}

svc_err_t rs__snapshot_json_at(rs_upstream_t *const *ups, size_t n, uint64_t wall_ms, char *buf,
                               size_t cap, size_t *len)
{
    out_t o = svc_text_on(buf, cap);

    put(&o, "{\"now_ms\":%llu,\"upstreams\":[", ULL(wall_ms));
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            put(&o, ",");
        put_upstream(&o, ups[i], wall_ms);
    }
    put(&o, "]}");
    return svc_text_end(&o, len);
}

svc_err_t rs_snapshot_json(rs_upstream_t *const *ups, size_t n, char *buf, size_t cap, size_t *len)
{
    return rs__snapshot_json_at(ups, n, wall_now_ms(), buf, cap, len);
}
