/* SPDX-License-Identifier: Apache-2.0 */
/*
 * consumer_loop.c - kfk_consumer_poll: one record to the handler, then its
 * commit, its dead letter or its retry (contract in kafka/consumer.h).
 *
 * The offset of a record is stored and committed only once the record is
 * done; until then nothing behind it on its partition is handed out, so a
 * committed offset never passes a record that is not done. A record kept for
 * a retry keeps its partition paused; the other partitions go on.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "consumer_int.h"

/* The record as the handler sees it. */
typedef struct view {
    kfk_record_t r;
    kfk_header_t *h; /* n_headers entries pointing into the message */
    char ce_id[128];
} view_t;

static void headers_of(const rd_kafka_message_t *m, view_t *v)
{
    rd_kafka_headers_t *hs = NULL;
    const void *val;
    size_t n, len;

    if (rd_kafka_message_headers(m, &hs) != RD_KAFKA_RESP_ERR_NO_ERROR || hs == NULL)
        return;
    n = rd_kafka_header_cnt(hs);
    v->h = n > 0 ? calloc(n, sizeof *v->h) : NULL;
    for (size_t i = 0; v->h != NULL && i < n; i++) {
        if (rd_kafka_header_get_all(hs, i, &v->h[i].name, &v->h[i].value, &v->h[i].len) !=
            RD_KAFKA_RESP_ERR_NO_ERROR)
            break;
        v->r.n_headers++;
    }
    v->r.headers = v->h;
    /* ce_id as text: non-empty, no NUL inside, fits. Anything else is left
     * for the handler to judge from the raw headers. */
    if (rd_kafka_header_get_last(hs, "ce_id", &val, &len) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        val != NULL && len > 0 && len < sizeof v->ce_id && memchr(val, '\0', len) == NULL) {
        memcpy(v->ce_id, val, len);
        v->ce_id[len] = '\0';
        v->r.ce_id = v->ce_id;
    }
}

static void view_make(kfk_consumer_t *c, const rd_kafka_message_t *m, unsigned attempt,
                      view_t *v)
{
    memset(v, 0, sizeof *v);
    v->r.topic = rd_kafka_topic_name(m->rkt);
    v->r.partition = m->partition;
    v->r.offset = m->offset;
    v->r.timestamp_ms = rd_kafka_message_timestamp(m, NULL);
    v->r.key = m->key;
    v->r.key_len = m->key_len;
    v->r.value = m->len > 0 ? m->payload : NULL;
    v->r.value_len = m->len;
    v->r.attempt = attempt;
    v->r.deadline_ms = svc_now_ms() + (uint64_t)c->o.handler_timeout_ms;
    v->r.consumer = c;
    headers_of(m, v);
}

/* Stores offset + 1 of m and commits it. */
static svc_err_t commit_record(kfk_consumer_t *c, const rd_kafka_message_t *m, char *errbuf)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_resp_err_t rc;

    rd_kafka_topic_partition_list_add(l, rd_kafka_topic_name(m->rkt), m->partition)->offset =
        m->offset + 1;
    rc = rd_kafka_offsets_store(c->rk, l);
    if (rc == RD_KAFKA_RESP_ERR_NO_ERROR)
        rc = l->elems[0].err;
    rd_kafka_topic_partition_list_destroy(l);
    if (rc == RD_KAFKA_RESP_ERR_NO_ERROR)
        return kfk__commit_stored(c, errbuf);
    /* The partition is no longer ours: its next owner gets the record again,
     * and the handler's dedupe makes that harmless. */
    atomic_fetch_add(&c->st.commit_errors, 1);
    svc_errbuf_set(errbuf, "kafka consumer: store offset of %s [%" PRId32 "] %" PRId64 ": %s",
                   rd_kafka_topic_name(m->rkt), m->partition, m->offset, rd_kafka_err2str(rc));
    return SVC_EUNAVAIL;
}

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Produces the dead letter of v and waits for its delivery report. */
static svc_err_t dead_letter(kfk_consumer_t *c, const view_t *v, const char *reason,
                             char *errbuf)
{
    char topic[256];
    kfk_dlq_text_t text;
    kfk_header_t h[KFK_MAX_HEADERS];
    size_t n = 0;
    kfk_dlq_info_t info = {reason, v->r.topic, v->r.partition, v->r.offset, c->group_id,
                           wall_ms()};
    uint64_t give_up;
    svc_err_t err;

    if (!kfk_dlq_topic(c->dlq_topic, v->r.topic, topic, sizeof topic)) {
        svc_errbuf_set(errbuf, "kafka consumer: dead-letter topic name too long");
        return SVC_EINVAL;
    }
    err = kfk_dlq_headers(v->r.headers, v->r.n_headers, &info, &text, h, &n, errbuf);
    if (err != SVC_OK)
        return err;
    kfk_message_t msg = {topic, v->r.key, v->r.key_len, v->r.value, v->r.value_len, h, n,
                         (void *)(uintptr_t)++c->dlq_seq};
    c->dlq_done = false;
    err = kfk_produce(c->dlq, &msg, errbuf);
    if (err != SVC_OK)
        return err;
    /* The producer reports by message.timeout.ms (dlq_timeout_ms); the
     * margin only guards against a report that never comes. */
    give_up = svc_now_ms() + (uint64_t)c->o.dlq_timeout_ms + 2000;
    while (!c->dlq_done && svc_now_ms() < give_up)
        (void)kfk_producer_poll(c->dlq, 50);
    if (c->dlq_done && c->dlq_err == SVC_OK)
        return SVC_OK;
    svc_errbuf_set(errbuf, "kafka consumer: dead letter to %s: %s", topic,
                   c->dlq_done ? c->dlq_reason : "no delivery report");
    return c->dlq_done ? c->dlq_err : SVC_ETIMEDOUT;
}

/* Keeps m for another attempt after a backoff (p: it is kept already). */
static void hold(kfk_consumer_t *c, rd_kafka_message_t *m, kfk__pending_t *p, unsigned attempt,
                 const char *reason, bool dead_letter)
{
    atomic_fetch_add(&c->st.retries, 1);
    if (p == NULL && (p = kfk__pending_add(c, m)) == NULL) {
        /* No memory to keep it: fetch it again instead. */
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(l, rd_kafka_topic_name(m->rkt), m->partition)->offset =
            m->offset;
        rd_kafka_error_t *e = rd_kafka_seek_partitions(c->rk, l, 0);
        if (e != NULL)
            rd_kafka_error_destroy(e);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_message_destroy(m);
        return;
    }
    p->attempt = attempt;
    p->due_ms = svc_now_ms() + kfk_backoff_ms(c->o.backoff_base_ms, c->o.backoff_cap_ms, attempt,
                                              kfk__next_random(c));
    p->dead_letter = dead_letter;
    if (reason != p->reason)
        snprintf(p->reason, sizeof p->reason, "%s", reason);
}

/* m is done: forget it, and let a paused partition fetch on. */
static void finish(kfk_consumer_t *c, rd_kafka_message_t *m, kfk__pending_t *p)
{
    if (p != NULL)
        kfk__pending_drop(c, p, true);
    else
        rd_kafka_message_destroy(m);
}

/* Calls the handler; returns the action, with the reason filled. */
static kfk_action_t judge(kfk_consumer_t *c, const view_t *v, bool first, char *reason)
{
    uint64_t t0 = svc_now_ns();
    bool exhausted = false;
    char why[KFK_REASON_LEN - 64];
    kfk_verdict_t verdict;
    kfk_action_t act;

    if (first)
        atomic_fetch_add(&c->st.consumed, 1);
    verdict = c->o.handler(c->o.ctx, &v->r, reason);
    kfk__stats_latency(&c->st, svc_now_ns() - t0);
    reason[KFK_REASON_LEN - 1] = '\0';
    act = kfk_verdict_action(verdict, v->r.attempt, c->o.max_attempts, &exhausted);
    if (act == KFK_ACT_COMMIT)
        atomic_fetch_add(verdict == KFK_DUPLICATE ? &c->st.duplicates : &c->st.handled, 1);
    if (exhausted) {
        snprintf(why, sizeof why, "%.*s", (int)sizeof why - 1, reason);
        snprintf(reason, KFK_REASON_LEN, "retries exhausted after %u attempts: %s",
                 v->r.attempt, why);
    }
    return act;
}

/* Serves m: a new record (p NULL) or the one p keeps. */
static svc_err_t serve(kfk_consumer_t *c, rd_kafka_message_t *m, kfk__pending_t *p,
                       char *errbuf)
{
    char reason[KFK_REASON_LEN] = "";
    unsigned attempt = p != NULL ? p->attempt + 1 : 1;
    kfk_action_t act;
    view_t v;
    svc_err_t err = SVC_OK;

    view_make(c, m, attempt, &v);
    if (p != NULL && p->dead_letter) { /* the verdict stands: only the copy is left */
        act = KFK_ACT_DEAD_LETTER;
        snprintf(reason, sizeof reason, "%s", p->reason);
    } else {
        act = judge(c, &v, p == NULL, reason);
    }
    if (act == KFK_ACT_DEAD_LETTER) {
        err = dead_letter(c, &v, reason, errbuf);
        if (err == SVC_OK)
            atomic_fetch_add(&c->st.dead_lettered, 1);
        else
            hold(c, m, p, attempt, reason, true);
    } else if (act == KFK_ACT_BACKOFF) {
        svc_errbuf_set(errbuf, "kafka consumer: %s [%" PRId32 "] offset %" PRId64
                       " attempt %u: retry: %s", v.r.topic, v.r.partition, v.r.offset, attempt,
                       reason[0] ? reason : "(no reason)");
        hold(c, m, p, attempt, reason, false);
        err = SVC_EUNAVAIL;
    }
    if (act == KFK_ACT_COMMIT || (act == KFK_ACT_DEAD_LETTER && err == SVC_OK)) {
        err = commit_record(c, m, errbuf);
        finish(c, m, p);
    }
    free(v.h);
    return err;
}

/* The kept record due first, and when (UINT64_MAX: none). */
static kfk__pending_t *next_due(kfk_consumer_t *c, uint64_t *due)
{
    kfk__pending_t *best = NULL;

    *due = UINT64_MAX;
    for (size_t i = 0; i < c->n_pending; i++) {
        if (c->pending[i].due_ms < *due) {
            *due = c->pending[i].due_ms;
            best = &c->pending[i];
        }
    }
    return best;
}

static svc_err_t take(kfk_consumer_t *c, rd_kafka_message_t *m, int *served, char *errbuf)
{
    svc_err_t err = SVC_OK;

    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        ; /* not an error (and not asked for) */
    } else if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        err = kfk_err_from_rd(m->err);
        svc_errbuf_set(errbuf, "kafka consumer: %s", rd_kafka_message_errstr(m));
    } else if (kfk__pending_of(c, rd_kafka_topic_name(m->rkt), m->partition) != NULL) {
        ; /* fetched behind a kept record: fetched again after it (resume_after) */
    } else {
        *served = 1;
        return serve(c, m, NULL, errbuf);
    }
    rd_kafka_message_destroy(m);
    return err;
}

svc_err_t kfk_consumer_poll(kfk_consumer_t *c, int timeout_ms, int *served, char *errbuf)
{
    int dummy, t = timeout_ms > 0 ? timeout_ms : 0;
    uint64_t now = svc_now_ms(), due;
    kfk__pending_t *p = next_due(c, &due);
    rd_kafka_message_t *m = NULL;
    svc_err_t err = SVC_OK;

    served = served != NULL ? served : &dummy;
    *served = 0;
    if (atomic_load(&c->stop) || c->closed) {
        svc_errbuf_set(errbuf, "kafka consumer: stopped");
        return SVC_ECANCELLED;
    }
    /* A due retry is served only if the previous call polled librdkafka:
     * with many partitions retrying, rebalances and the poll interval are
     * still served every other call (two handler calls at most between). */
    if (p != NULL && due <= now && c->polled) {
        *served = 1;
        c->polled = false;
        err = serve(c, p->m, p, errbuf);
    } else {
        if (p != NULL && due <= now)
            t = 0;
        else if (p != NULL && due - now < (uint64_t)t)
            t = (int)(due - now);
        c->polled = true;
        m = rd_kafka_consumer_poll(c->rk, t);
        /* Rebalances ran inside that poll. */
        if (c->deferred != SVC_OK) {
            err = c->deferred;
            svc_errbuf_set(errbuf, "%s", c->deferred_text);
            c->deferred = SVC_OK;
        }
        if (m != NULL) {
            svc_err_t e = take(c, m, served, errbuf);
            err = e != SVC_OK ? e : err;
        }
    }
    now = svc_now_ms();
    if (now >= c->lag_at_ms) {
        kfk__stats_sample_lag(c);
        c->lag_at_ms = now + (uint64_t)c->o.lag_interval_ms;
    }
    return err;
}
