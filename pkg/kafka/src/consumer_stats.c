/* SPDX-License-Identifier: Apache-2.0 */
/*
 * consumer_stats.c - the consumer's counters, its lag per partition and
 * their Prometheus text.
 *
 * The counters are atomics bumped by the loop's thread and read by any
 * other (an admin thread renders /metrics). The lag table is rebuilt by the
 * loop every lag_interval_ms under a mutex; a scrape copies nothing from
 * librdkafka and never waits on the network.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "consumer_state.h"

void kfk__stats_init(kfk__stats_t *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lag_mu, NULL);
}

void kfk__stats_dispose(kfk__stats_t *s)
{
    pthread_mutex_destroy(&s->lag_mu);
}

void kfk__stats_latency(kfk__stats_t *s, uint64_t elapsed_ns)
{
    uint64_t us = elapsed_ns / SVC_NS_PER_US;

    /* The count first, then the buckets from the widest down: a reader that
     * takes the buckets narrowest first and the count last (kfk_consumer_stats)
     * then sees cumulative buckets that never decrease and never exceed the
     * count, as Prometheus requires, however the two threads interleave. */
    atomic_fetch_add(&s->latency_count, 1);
    atomic_fetch_add(&s->latency_sum_us, us);
    for (size_t i = KFK_LATENCY_BUCKETS; i-- > 0;) {
        if (us > (uint64_t)kfk_latency_bounds_ms[i] * 1000)
            break;
        atomic_fetch_add(&s->latency_le[i], 1);
    }
}

/* Where the consumer stands on a partition: the record it keeps for a retry,
 * else the next offset it will be handed. */
static int64_t position_of(const kfk_consumer_t *c, const rd_kafka_topic_partition_t *tp)
{
    for (size_t i = 0; i < c->n_pending; i++) {
        const rd_kafka_message_t *m = c->pending[i].m;
        if (m->partition == tp->partition && strcmp(rd_kafka_topic_name(m->rkt), tp->topic) == 0)
            return m->offset;
    }
    return tp->offset;
}

/* Offsets of partitions no record has come from yet (an idle partition that
 * is up to date) are the group's committed ones: one bounded request for
 * just those. */
static void fill_unknown(kfk_consumer_t *c, rd_kafka_topic_partition_list_t *l)
{
    rd_kafka_topic_partition_list_t *q = rd_kafka_topic_partition_list_new(l->cnt);

    for (int i = 0; i < l->cnt; i++) {
        if (l->elems[i].offset < 0)
            rd_kafka_topic_partition_list_add(q, l->elems[i].topic, l->elems[i].partition);
    }
    if (q->cnt > 0 && rd_kafka_committed(c->rk, q, 500) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; i < q->cnt; i++) {
            rd_kafka_topic_partition_t *t =
                rd_kafka_topic_partition_list_find(l, q->elems[i].topic, q->elems[i].partition);
            if (t != NULL && q->elems[i].err == RD_KAFKA_RESP_ERR_NO_ERROR)
                t->offset = q->elems[i].offset;
        }
    }
    rd_kafka_topic_partition_list_destroy(q);
}

void kfk__stats_sample_lag(kfk_consumer_t *c)
{
    rd_kafka_topic_partition_list_t *l = NULL;
    kfk__stats_t *s = &c->st;
    unsigned n = 0;

    if (rd_kafka_assignment(c->rk, &l) != RD_KAFKA_RESP_ERR_NO_ERROR || l == NULL)
        return;
    (void)rd_kafka_position(c->rk, l);
    fill_unknown(c, l);
    pthread_mutex_lock(&s->lag_mu);
    for (int i = 0; i < l->cnt && n < KFK_CONSUMER_MAX_LAG_PARTITIONS; i++) {
        rd_kafka_topic_partition_t *tp = &l->elems[i];
        int64_t lo = -1, hi = -1, pos = position_of(c, tp);
        kfk__lag_t *x = &s->lag[n++];

        /* The cached high watermark of the last fetch response: no request. */
        (void)rd_kafka_get_watermark_offsets(c->rk, tp->topic, tp->partition, &lo, &hi);
        snprintf(x->topic, sizeof x->topic, "%s", tp->topic);
        x->partition = tp->partition;
        /* No committed offset: a new group starts at the earliest. */
        if (pos < 0 && lo >= 0)
            pos = lo;
        x->lag = hi >= 0 && pos >= 0 ? (hi > pos ? hi - pos : 0) : -1;
    }
    s->n_lag = n;
    pthread_mutex_unlock(&s->lag_mu);
    atomic_store(&s->n_assigned, (unsigned)l->cnt);
    rd_kafka_topic_partition_list_destroy(l);
}

void kfk_consumer_stats(const kfk_consumer_t *c, kfk_consumer_stats_t *out)
{
    kfk__stats_t *s = (kfk__stats_t *)&c->st;

    memset(out, 0, sizeof *out);
    out->consumed = atomic_load(&s->consumed);
    out->batches = atomic_load(&s->batches);
    out->handled = atomic_load(&s->handled);
    out->duplicates = atomic_load(&s->duplicates);
    out->dead_lettered = atomic_load(&s->dead_lettered);
    out->retries = atomic_load(&s->retries);
    out->commit_errors = atomic_load(&s->commit_errors);
    out->rebalances = atomic_load(&s->rebalances);
    for (size_t i = 0; i < KFK_LATENCY_BUCKETS; i++) /* before the count: see above */
        out->latency_le[i] = atomic_load(&s->latency_le[i]);
    out->latency_count = atomic_load(&s->latency_count);
    out->latency_sum_us = atomic_load(&s->latency_sum_us);
    out->n_partitions = atomic_load(&s->n_assigned);
    out->lag_total = -1;
    pthread_mutex_lock(&s->lag_mu);
    for (unsigned i = 0; i < s->n_lag; i++) {
        if (s->lag[i].lag >= 0)
            out->lag_total = (out->lag_total < 0 ? 0 : out->lag_total) + s->lag[i].lag;
    }
    pthread_mutex_unlock(&s->lag_mu);
}

/* A bounded appender: counts what the whole text needs, writes what fits. */
typedef struct out {
    char *buf;
    size_t cap, len;
} out_t;

__attribute__((format(printf, 2, 3))) static void emit(out_t *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(o->len < o->cap ? o->buf + o->len : NULL, o->len < o->cap ? o->cap - o->len : 0,
                  fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

static void counter(out_t *o, const char *prefix, const char *name, const char *help, uint64_t v)
{
    emit(o, "# HELP %s_%s %s\n# TYPE %s_%s counter\n%s_%s %" PRIu64 "\n", prefix, name, help,
         prefix, name, prefix, name, v);
}

static void histogram(out_t *o, const char *prefix, const kfk_consumer_stats_t *s)
{
    emit(o,
         "# HELP %s_handler_seconds time the handler took per call\n"
         "# TYPE %s_handler_seconds histogram\n",
         prefix, prefix);
    for (size_t i = 0; i < KFK_LATENCY_BUCKETS; i++)
        emit(o, "%s_handler_seconds_bucket{le=\"%g\"} %" PRIu64 "\n", prefix,
             kfk_latency_bounds_ms[i] / 1000.0, s->latency_le[i]);
    emit(o, "%s_handler_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", prefix, s->latency_count);
    emit(o, "%s_handler_seconds_sum %.6f\n%s_handler_seconds_count %" PRIu64 "\n", prefix,
         (double)s->latency_sum_us / 1e6, prefix, s->latency_count);
}

static void lags(out_t *o, const char *prefix, const kfk_consumer_t *c)
{
    kfk__stats_t *s = (kfk__stats_t *)&c->st;

    emit(o,
         "# HELP %s_lag records on the partition not yet done (sampled)\n"
         "# TYPE %s_lag gauge\n",
         prefix, prefix);
    pthread_mutex_lock(&s->lag_mu);
    for (unsigned i = 0; i < s->n_lag; i++) {
        if (s->lag[i].lag >= 0)
            emit(o, "%s_lag{topic=\"%s\",partition=\"%" PRId32 "\"} %" PRId64 "\n", prefix,
                 s->lag[i].topic, s->lag[i].partition, s->lag[i].lag);
    }
    pthread_mutex_unlock(&s->lag_mu);
}

size_t kfk_consumer_metrics(const kfk_consumer_t *c, const char *prefix, char *buf, size_t cap)
{
    kfk_consumer_stats_t s;
    out_t o = {buf, cap, 0};

    if (cap > 0)
        buf[0] = '\0';
    kfk_consumer_stats(c, &s);
    counter(&o, prefix, "consumed_total", "records handed to the handler (first attempts)",
            s.consumed);
    counter(&o, prefix, "batches_total",
            "polls that handed out records (consumed / batches: "
            "the mean batch size)",
            s.batches);
    counter(&o, prefix, "handled_total", "records the handler handled", s.handled);
    counter(&o, prefix, "deduplicated_total", "records the handler had handled before",
            s.duplicates);
    counter(&o, prefix, "dead_lettered_total", "records copied to the dead-letter topic",
            s.dead_lettered);
    counter(&o, prefix, "retries_total", "records kept for another attempt", s.retries);
    counter(&o, prefix, "commit_errors_total", "offset commits that failed", s.commit_errors);
    counter(&o, prefix, "rebalances_total", "partition assignments and revocations", s.rebalances);
    histogram(&o, prefix, &s);
    emit(&o,
         "# HELP %s_assigned_partitions partitions assigned now\n"
         "# TYPE %s_assigned_partitions gauge\n%s_assigned_partitions %u\n",
         prefix, prefix, prefix, s.n_partitions);
    lags(&o, prefix, c);
    return o.len;
}
