/* SPDX-License-Identifier: Apache-2.0 */
/*
 * consumer_loop.c - kfk_consumer_poll: a batch of records to the handler
 * (in one transaction with batch ops), then each one's offset, dead letter
 * or retry (contract in kafka/consumer.h).
 *
 * The offset of a record is stored only once the record is done, and the
 * stored offsets are committed at the end of the poll; until a record is
 * done nothing behind it on its partition is handed out, so a committed
 * offset never passes a record that is not done. A record kept for a retry
 * keeps its partition paused; the other partitions go on.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "consumer_state.h"

static const char *topic_of(const rd_kafka_message_t *m)
{
    return rd_kafka_topic_name(m->rkt);
}

static void headers_of(kfk__slot_t *s)
{
    rd_kafka_headers_t *hs = NULL;
    const void *val;
    size_t n, len;

    if (rd_kafka_message_headers(s->m, &hs) != RD_KAFKA_RESP_ERR_NO_ERROR || hs == NULL)
        return;
    n = rd_kafka_header_cnt(hs);
    s->h = n > 0 ? calloc(n, sizeof *s->h) : NULL;
    for (size_t i = 0; s->h != NULL && i < n; i++) {
        if (rd_kafka_header_get_all(hs, i, &s->h[i].name, &s->h[i].value, &s->h[i].len) !=
            RD_KAFKA_RESP_ERR_NO_ERROR)
            break;
        s->r.n_headers++;
    }
    s->r.headers = s->h;
    /* ce_id as text: non-empty, no NUL inside, fits. Anything else is left
     * for the handler to judge from the raw headers. */
    if (rd_kafka_header_get_last(hs, "ce_id", &val, &len) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        val != NULL && len > 0 && len < sizeof s->ce_id && memchr(val, '\0', len) == NULL) {
        memcpy(s->ce_id, val, len);
        s->ce_id[len] = '\0';
        s->r.ce_id = s->ce_id;
    }
}

/* The record as the handler sees it (s->m and s->counted are kept, the rest
 * is made anew). */
static void view_make(kfk_consumer_t *c, kfk__slot_t *s, unsigned attempt, uint64_t deadline_ms,
                      bool batched)
{
    const rd_kafka_message_t *m = s->m;

    memset(&s->r, 0, sizeof s->r);
    s->h = NULL;
    s->ce_id[0] = '\0';
    s->reason[0] = '\0';
    s->r.topic = topic_of(m);
    s->r.partition = m->partition;
    s->r.offset = m->offset;
    s->r.timestamp_ms = rd_kafka_message_timestamp(m, NULL);
    s->r.key = m->key;
    s->r.key_len = m->key_len;
    s->r.value = m->len > 0 ? m->payload : NULL;
    s->r.value_len = m->len;
    s->r.attempt = attempt;
    s->r.batched = batched;
    s->r.deadline_ms = deadline_ms;
    s->r.consumer = c;
    headers_of(s);
}

static void view_free(kfk__slot_t *s)
{
    free(s->h);
    s->h = NULL;
}

/* Stores offset + 1 of m; the end of the poll commits what is stored. */
static svc_err_t store_offset(kfk_consumer_t *c, const rd_kafka_message_t *m,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_resp_err_t rc;

    rd_kafka_topic_partition_list_add(l, rd_kafka_topic_name(m->rkt), m->partition)->offset =
        m->offset + 1;
    rc = rd_kafka_offsets_store(c->rk, l);
    if (rc == RD_KAFKA_RESP_ERR_NO_ERROR)
        rc = l->elems[0].err;
    rd_kafka_topic_partition_list_destroy(l);
    if (rc == RD_KAFKA_RESP_ERR_NO_ERROR) {
        c->stored = true;
        return SVC_OK;
    }
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
static svc_err_t dead_letter(kfk_consumer_t *c, const kfk__slot_t *v, const char *reason,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    char topic[256];
    kfk_dlq_text_t text;
    kfk_header_t h[KFK_MAX_HEADERS];
    size_t n = 0;
    kfk_dlq_info_t info = {reason, v->r.topic, v->r.partition, v->r.offset, c->group_id, wall_ms()};
    uint64_t give_up;
    svc_err_t err;

    /* The broker did not take the last one: waiting dlq_timeout_ms again
     * per record would stall the poll (the copy is tried after a backoff). */
    if (c->dlq_failed) {
        svc_errbuf_set(errbuf, "kafka consumer: an earlier dead letter of this poll failed");
        return SVC_EUNAVAIL;
    }
    if (!kfk_dlq_topic(c->dlq_topic, v->r.topic, topic, sizeof topic)) {
        svc_errbuf_set(errbuf, "kafka consumer: dead-letter topic name too long");
        return SVC_EINVAL;
    }
    err = kfk_dlq_headers(v->r.headers, v->r.n_headers, &info, &text, h, &n, errbuf);
    if (err != SVC_OK)
        return err;
    kfk_message_t msg = {topic,
                         v->r.key,
                         v->r.key_len,
                         v->r.value,
                         v->r.value_len,
                         h,
                         n,
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
    c->dlq_failed = true;
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

/* The action for verdict v on the record's attempt, with the reason
 * completed when the attempts ran out. */
static kfk_action_t action_of(kfk_consumer_t *c, kfk_verdict_t v, kfk__slot_t *s)
{
    char why[KFK_REASON_LEN - 64];
    bool exhausted = false;
    kfk_action_t act = kfk_verdict_action(v, s->r.attempt, c->o.max_attempts, &exhausted);

    if (exhausted) {
        snprintf(why, sizeof why, "%.*s", (int)sizeof why - 1, s->reason);
        snprintf(s->reason, KFK_REASON_LEN, "retries exhausted after %u attempts: %s", s->r.attempt,
                 why);
    }
    return act;
}

/* Calls the handler: its verdict, and s->act and s->reason from it. */
static kfk_verdict_t judge(kfk_consumer_t *c, kfk__slot_t *s)
{
    uint64_t t0 = svc_now_ns();
    kfk_verdict_t verdict;

    if (!s->counted)
        atomic_fetch_add(&c->st.consumed, 1);
    s->counted = true;
    verdict = c->o.handler(c->o.ctx, &s->r, s->reason);
    kfk__stats_latency(&c->st, svc_now_ns() - t0);
    s->reason[KFK_REASON_LEN - 1] = '\0';
    s->act = action_of(c, verdict, s);
    if (s->act == KFK_ACT_COMMIT)
        atomic_fetch_add(verdict == KFK_DUPLICATE ? &c->st.duplicates : &c->st.handled, 1);
    return verdict;
}

static bool verdict_done(kfk_verdict_t v)
{
    return v == KFK_HANDLED || v == KFK_DUPLICATE || v == KFK_POISON;
}

/* The record's transaction failed at `what`: a retry, like a KFK_RETRY. */
static kfk_action_t tx_failed(kfk_consumer_t *c, kfk__slot_t *s, const char *what, const char *why)
{
    snprintf(s->reason, KFK_REASON_LEN, "transaction %s: %.200s", what, why);
    return action_of(c, KFK_RETRY, s);
}

/* The handler for one record inside a transaction of its own. */
static kfk_action_t judge_in_tx(kfk_consumer_t *c, kfk__slot_t *s)
{
    const kfk_batch_ops_t *ops = c->o.batch;
    char why[SVC_ERRBUF_LEN] = "";

    if (ops->begin(c->o.ctx, s->r.deadline_ms, why) != SVC_OK)
        return tx_failed(c, s, "begin", why);
    (void)judge(c, s);
    if (s->act != KFK_ACT_COMMIT) {
        ops->rollback(c->o.ctx); /* a poison record leaves nothing behind */
        return s->act;
    }
    if (ops->commit(c->o.ctx, s->r.deadline_ms, why) != SVC_OK) {
        ops->rollback(c->o.ctx);
        return tx_failed(c, s, "commit", why);
    }
    return s->act;
}

/* s->act, now that its effect is durable: the dead letter, the offset or
 * the hold (p: s->m is kept already). The slot's record is gone after. */
static svc_err_t settle(kfk_consumer_t *c, kfk__slot_t *s, kfk__pending_t *p,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err;

    if (s->act == KFK_ACT_DEAD_LETTER) {
        err = dead_letter(c, s, s->reason, errbuf);
        if (err != SVC_OK) {
            hold(c, s->m, p, s->r.attempt, s->reason, true);
            return err;
        }
        atomic_fetch_add(&c->st.dead_lettered, 1);
    } else if (s->act == KFK_ACT_BACKOFF) {
        svc_errbuf_set(errbuf,
                       "kafka consumer: %s [%" PRId32 "] offset %" PRId64 " attempt %u: retry: %s",
                       s->r.topic, s->r.partition, s->r.offset, s->r.attempt,
                       s->reason[0] ? s->reason : "(no reason)");
        hold(c, s->m, p, s->r.attempt, s->reason, false);
        return SVC_EUNAVAIL;
    }
    err = store_offset(c, s->m, errbuf);
    finish(c, s->m, p);
    return err;
}

/* The poll returns its first error; later ones only go to the counters. */
static void keep_first(svc_err_t *err, char errbuf[static SVC_ERRBUF_LEN], svc_err_t e,
                       const char *text)
{
    if (*err == SVC_OK && e != SVC_OK) {
        *err = e;
        svc_errbuf_set(errbuf, "%s", text);
    }
}

/* Serves s->m in a transaction of its own (with batch ops): a new record
 * (p NULL) or the one p keeps. */
static svc_err_t serve_alone(kfk_consumer_t *c, kfk__slot_t *s, kfk__pending_t *p,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err;

    view_make(c, s, p != NULL ? p->attempt + 1 : 1,
              svc_now_ms() + (uint64_t)c->o.handler_timeout_ms, false);
    if (p != NULL && p->dead_letter) { /* the verdict stands: only the copy is left */
        s->act = KFK_ACT_DEAD_LETTER;
        snprintf(s->reason, sizeof s->reason, "%s", p->reason);
    } else if (c->o.batch != NULL) {
        s->act = judge_in_tx(c, s);
    } else {
        (void)judge(c, s);
    }
    err = settle(c, s, p, errbuf);
    view_free(s);
    return err;
}

/* True when a record of m's partition is kept: m was fetched behind it and
 * is fetched again once it is done (resume_after). */
static bool behind_kept(kfk_consumer_t *c, const rd_kafka_message_t *m)
{
    return kfk__pending_of(c, topic_of(m), m->partition) != NULL;
}

static bool same_partition(const rd_kafka_message_t *a, const rd_kafka_message_t *b)
{
    return a->partition == b->partition && strcmp(topic_of(a), topic_of(b)) == 0;
}

static void seek_to(kfk_consumer_t *c, const rd_kafka_message_t *m)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_error_t *e;

    rd_kafka_topic_partition_list_add(l, topic_of(m), m->partition)->offset = m->offset;
    e = rd_kafka_seek_partitions(c->rk, l, 0);
    if (e != NULL)
        rd_kafka_error_destroy(e);
    rd_kafka_topic_partition_list_destroy(l);
}

/* Slots [from, n) are not served: each partition is rewound to the first
 * of them (unless a kept record's resume does that), so they come again. */
static void rewind_rest(kfk_consumer_t *c, size_t from, size_t n)
{
    for (size_t i = from; i < n; i++) {
        const rd_kafka_message_t *m = c->slots[i].m;
        bool first = !behind_kept(c, m);

        for (size_t k = from; first && k < i; k++)
            first = !same_partition(c->slots[k].m, m);
        if (first)
            seek_to(c, m);
    }
    for (size_t i = from; i < n; i++)
        rd_kafka_message_destroy(c->slots[i].m);
}

/* Slots [0, n) one at a time, each alone. With stop_at_retry (after a
 * failed batch), the first record that fails again ends it: the ones after
 * it are fetched again, so a database that is down costs two failed calls
 * per poll, not one per record. */
static svc_err_t serve_each(kfk_consumer_t *c, size_t n, bool stop_at_retry,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    char why[SVC_ERRBUF_LEN];
    svc_err_t err = SVC_OK;
    size_t i = 0;

    while (i < n) {
        kfk__slot_t *s = &c->slots[i++];

        if (behind_kept(c, s->m)) {
            rd_kafka_message_destroy(s->m);
            continue;
        }
        why[0] = '\0';
        keep_first(&err, errbuf, serve_alone(c, s, NULL, why), why);
        if (stop_at_retry && s->act == KFK_ACT_BACKOFF)
            break;
    }
    rewind_rest(c, i, n);
    return err;
}

/* Slots [0, n) in one transaction; if it fails, serve_each. */
static svc_err_t serve_batch(kfk_consumer_t *c, size_t n, char errbuf[static SVC_ERRBUF_LEN])
{
    const kfk_batch_ops_t *ops = c->o.batch;
    uint64_t deadline = svc_now_ms() + (uint64_t)c->o.handler_timeout_ms;
    char why[SVC_ERRBUF_LEN] = "";
    bool ok = ops->begin(c->o.ctx, deadline, why) == SVC_OK;
    svc_err_t err = SVC_OK;
    size_t made = 0;

    while (ok && made < n) {
        kfk__slot_t *s = &c->slots[made++];

        view_make(c, s, 1, deadline, true);
        ok = verdict_done(judge(c, s));
    }
    if (ok)
        ok = ops->commit(c->o.ctx, deadline, why) == SVC_OK;
    if (!ok) {
        ops->rollback(c->o.ctx);
        for (size_t i = 0; i < made; i++)
            view_free(&c->slots[i]);
        return serve_each(c, n, true, errbuf);
    }
    for (size_t i = 0; i < n; i++) {
        kfk__slot_t *s = &c->slots[i];

        why[0] = '\0';
        if (behind_kept(c, s->m)) /* its dead letter failed: it comes again */
            rd_kafka_message_destroy(s->m);
        else
            keep_first(&err, errbuf, settle(c, s, NULL, why), why);
        view_free(s);
    }
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

/* Whether m is a record to serve; anything else is destroyed here (an
 * error event into err). */
static bool admit(kfk_consumer_t *c, rd_kafka_message_t *m, svc_err_t *err,
                  char errbuf[static SVC_ERRBUF_LEN])
{
    char why[SVC_ERRBUF_LEN];

    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && !behind_kept(c, m))
        return true;
    if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
        /* For good: librdkafka consumes nothing more. The cause, e.g. a
         * second consumer started with this one's group.instance.id (the
         * broker fences the older one), is worth more than "fatal". */
        char cause[200];
        rd_kafka_resp_err_t e = rd_kafka_fatal_error(c->rk, cause, sizeof cause);
        svc_errbuf_set(why, "kafka consumer: stopped for good (%s): %s", rd_kafka_err2name(e),
                       cause);
        keep_first(err, errbuf, SVC_EINTERNAL, why);
    } else if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        svc_errbuf_set(why, "kafka consumer: %s", rd_kafka_message_errstr(m));
        keep_first(err, errbuf, kfk_err_from_rd(m->err), why);
    }
    rd_kafka_message_destroy(m);
    return false;
}

/* Fills the slots: the first record waits up to t ms, the others are taken
 * only if librdkafka has them already. Rebalances run inside the polls. */
static size_t collect(kfk_consumer_t *c, int t, svc_err_t *err, char errbuf[static SVC_ERRBUF_LEN])
{
    size_t n;

    c->n_slots = 0; /* on_revoke drops revoked partitions' records from these */
    for (int wait = t; c->n_slots < c->o.batch_max; wait = 0) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, wait);

        if (c->deferred != SVC_OK) {
            keep_first(err, errbuf, c->deferred, c->deferred_text);
            c->deferred = SVC_OK;
        }
        if (m == NULL)
            break;
        if (admit(c, m, err, errbuf)) {
            memset(&c->slots[c->n_slots], 0, sizeof c->slots[0]);
            c->slots[c->n_slots++].m = m;
        }
    }
    n = c->n_slots;
    c->n_slots = 0;
    return n;
}

/* A due retry alone, or else a batch. */
static size_t serve(kfk_consumer_t *c, int t, svc_err_t *err, char errbuf[static SVC_ERRBUF_LEN])
{
    uint64_t now = svc_now_ms(), due;
    kfk__pending_t *p = next_due(c, &due);
    char why[SVC_ERRBUF_LEN] = "";
    size_t n;

    /* A due retry is served only if the previous call polled librdkafka:
     * with many partitions retrying, rebalances and the poll interval are
     * still served every other call. */
    if (p != NULL && due <= now && c->polled) {
        c->polled = false;
        memset(&c->slots[0], 0, sizeof c->slots[0]);
        c->slots[0].m = p->m;
        c->slots[0].counted = true;
        keep_first(err, errbuf, serve_alone(c, &c->slots[0], p, why), why);
        return 1;
    }
    if (p != NULL && due <= now)
        t = 0;
    else if (p != NULL && due - now < (uint64_t)t)
        t = (int)(due - now);
    c->polled = true;
    n = collect(c, t, err, errbuf);
    if (n > 0) {
        atomic_fetch_add(&c->st.batches, 1);
        keep_first(err, errbuf,
                   n > 1 && c->o.batch != NULL ? serve_batch(c, n, why)
                                               : serve_each(c, n, false, why),
                   why);
    }
    return n;
}

svc_err_t kfk_consumer_poll(kfk_consumer_t *c, int timeout_ms, int *served,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    char why[SVC_ERRBUF_LEN] = "";
    svc_err_t err = SVC_OK;
    size_t n;
    uint64_t now;

    if (served != NULL)
        *served = 0;
    if (atomic_load(&c->stop) || c->closed) {
        svc_errbuf_set(errbuf, "kafka consumer: stopped");
        return SVC_ECANCELLED;
    }
    c->dlq_failed = false;
    n = serve(c, timeout_ms > 0 ? timeout_ms : 0, &err, errbuf);
    if (served != NULL)
        *served = (int)n;
    /* A failed commit stays due: the offsets stay stored and a later poll
     * commits them (or the next owner gets those records again). */
    keep_first(&err, errbuf, kfk__commit_due(c, why), why);
    now = svc_now_ms();
    if (now >= c->lag_at_ms) {
        kfk__stats_sample_lag(c);
        c->lag_at_ms = now + (uint64_t)c->o.lag_interval_ms;
    }
    return err;
}
