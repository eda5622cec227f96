/* SPDX-License-Identifier: Apache-2.0 */
/* stats.c - database counters and their Prometheus text (see stats.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "stats.h"

#define NAME_MAX_LEN 64

typedef struct row {
    _Atomic uint64_t outcome[SVC__ERR_LAST];
    _Atomic uint64_t bucket[SVC_LATENCY_BUCKETS + 1];
    _Atomic uint64_t sum_ns;
    _Atomic uint64_t unknown;
} row_t;

static struct {
    pthread_mutex_t mu; /* interning only */
    _Atomic size_t n;   /* rows named so far; names[i] is final once i < n */
    char names[DB__STATS_MAX][NAME_MAX_LEN];
    row_t rows[DB__STATS_MAX + 1]; /* the last: "other" */
    _Atomic uint64_t connects_ok, connects_failed;
    _Atomic long open;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

size_t db__stats_intern(const char *name)
{
    size_t i, n;

    pthread_mutex_lock(&g.mu);
    n = atomic_load(&g.n);
    for (i = 0; i < n && strcmp(g.names[i], name) != 0; i++)
        ;
    if (i == n && n < DB__STATS_MAX) {
        snprintf(g.names[n], sizeof g.names[n], "%s", name);
        atomic_store(&g.n, n + 1); /* after the name: a reader sees it whole */
    }
    pthread_mutex_unlock(&g.mu);
    return i;
}

void db__stats_query(size_t row, svc_err_t outcome, bool unknown, uint64_t ns)
{
    row_t *r = &g.rows[row < DB__STATS_MAX ? row : DB__STATS_MAX];

    if ((unsigned)outcome >= SVC__ERR_LAST)
        outcome = SVC_EINTERNAL;
    atomic_fetch_add_explicit(&r->outcome[outcome], 1, memory_order_relaxed);
    if (unknown)
        atomic_fetch_add_explicit(&r->unknown, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->bucket[svc_latency_bucket(ns)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->sum_ns, ns, memory_order_relaxed);
}

void db__stats_connect(bool ok)
{
    atomic_fetch_add_explicit(ok ? &g.connects_ok : &g.connects_failed, 1, memory_order_relaxed);
}

void db__stats_open(int delta)
{
    atomic_fetch_add_explicit(&g.open, delta, memory_order_relaxed);
}

/* ---- rendering ----------------------------------------------------------- */

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

static const char *row_name(size_t i, size_t n)
{
    return i < n ? g.names[i] : "other";
}

static void put_queries(svc_text_t *o, size_t n)
{
    svc_text_printf(o, "# HELP shopmicro_db_queries_total Statements run, by outcome "
                       "(OK, UNAVAILABLE, DEADLINE_EXCEEDED, ...).\n"
                       "# TYPE shopmicro_db_queries_total counter\n");
    for (size_t i = 0; i <= n; i++) {
        const row_t *r = &g.rows[i < n ? i : DB__STATS_MAX];
        for (int k = 0; k < SVC__ERR_LAST; k++) {
            uint64_t v = LOAD(r->outcome[k]);
            if ((i < n && k == SVC_OK) || v > 0) /* OK always; the rest once seen */
                svc_text_printf(
                    o, "shopmicro_db_queries_total{statement=\"%s\",outcome=\"%s\"} %llu\n",
                    row_name(i, n), svc_err_name((svc_err_t)k), (unsigned long long)v);
        }
    }
}

/* Apart from the outcomes, because each of these is also counted there
 * (UNAVAILABLE or DEADLINE_EXCEEDED): what an operator reconciles. */
static void put_unknown(svc_text_t *o, size_t n)
{
    svc_text_printf(o, "# HELP shopmicro_db_outcome_unknown_total Statements that failed after "
                       "they were sent and before the server said how they ended (committed "
                       "or not).\n"
                       "# TYPE shopmicro_db_outcome_unknown_total counter\n");
    for (size_t i = 0; i <= n; i++) {
        uint64_t v = LOAD(g.rows[i < n ? i : DB__STATS_MAX].unknown);
        if (i < n || v > 0)
            svc_text_printf(o, "shopmicro_db_outcome_unknown_total{statement=\"%s\"} %llu\n",
                            row_name(i, n), (unsigned long long)v);
    }
}

static void put_latency(svc_text_t *o, size_t n)
{
    svc_text_printf(o, "# HELP shopmicro_db_query_seconds From the call to its result (a "
                       "reconnect included), every outcome.\n"
                       "# TYPE shopmicro_db_query_seconds histogram\n");
    for (size_t i = 0; i < n; i++) {
        const row_t *r = &g.rows[i];
        uint64_t cum = 0;
        for (unsigned b = 0; b <= SVC_LATENCY_BUCKETS; b++) {
            cum += LOAD(r->bucket[b]);
            svc_text_printf(o,
                            "shopmicro_db_query_seconds_bucket{statement=\"%s\",le=\"%s\"} %llu\n",
                            g.names[i], b < SVC_LATENCY_BUCKETS ? svc_latency_le[b] : "+Inf",
                            (unsigned long long)cum);
        }
        svc_text_printf(o, "shopmicro_db_query_seconds_sum{statement=\"%s\"} %.6f\n", g.names[i],
                        (double)LOAD(r->sum_ns) / 1e9);
        svc_text_printf(o, "shopmicro_db_query_seconds_count{statement=\"%s\"} %llu\n", g.names[i],
                        (unsigned long long)cum);
    }
}

svc_err_t db_metrics_render(char *buf, size_t cap, size_t *len)
{
    svc_text_t o = svc_text_on(buf, cap);
    size_t n = atomic_load(&g.n);

    put_queries(&o, n);
    put_unknown(&o, n);
    put_latency(&o, n);
    svc_text_printf(&o,
                    "# HELP shopmicro_db_connects_total Connection attempts, by result.\n"
                    "# TYPE shopmicro_db_connects_total counter\n"
                    "shopmicro_db_connects_total{result=\"ok\"} %llu\n"
                    "shopmicro_db_connects_total{result=\"failed\"} %llu\n"
                    "# HELP shopmicro_db_connections_open Connections established now (one per "
                    "worker, the saga's, the probe's).\n"
                    "# TYPE shopmicro_db_connections_open gauge\n"
                    "shopmicro_db_connections_open %ld\n",
                    (unsigned long long)LOAD(g.connects_ok),
                    (unsigned long long)LOAD(g.connects_failed), LOAD(g.open));
    return svc_text_end(&o, len);
}
