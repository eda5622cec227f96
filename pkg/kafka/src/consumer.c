/* SPDX-License-Identifier: Apache-2.0 */
/*
 * consumer.c - the librdkafka consumer behind kfk_consumer_t: the poll loop,
 * commits, retries, dead letters and rebalances (contract in
 * kafka/consumer.h).
 *
 * Everything librdkafka calls back (rebalances, log lines) is served from
 * rd_kafka_consumer_poll() on the loop's thread: the main queue and the log
 * queue are forwarded to the consumer queue. So the handler, the rebalance
 * callback and the retry state never race, and need no locks; only the
 * counters and the lag table are read by other threads (consumer_stats.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conf.h"
#include "consumer_state.h"

#define RD_OK RD_KAFKA_RESP_ERR_NO_ERROR

static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    kfk_consumer_t *c = rd_kafka_opaque(rk);

    if (c != NULL && c->o.on_log != NULL)
        c->o.on_log(c->o.ctx, level, fac, buf);
}

static void defer(kfk_consumer_t *c, svc_err_t err, const char *what, const char *why)
{
    c->deferred = err;
    snprintf(c->deferred_text, sizeof c->deferred_text, "kafka consumer: %s: %.200s", what, why);
}

uint64_t kfk__next_random(kfk_consumer_t *c)
{
    /* xorshift64, as the relay's: jitter needs spread, not secrecy. */
    c->rand_state ^= c->rand_state << 13;
    c->rand_state ^= c->rand_state >> 7;
    c->rand_state ^= c->rand_state << 17;
    return c->rand_state;
}

/* ------------------------------------------------------------------------
 * Partitions: one-entry lists for pause, resume and seek
 * ------------------------------------------------------------------------ */
static rd_kafka_topic_partition_list_t *one(const rd_kafka_message_t *m, int64_t offset)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);

    rd_kafka_topic_partition_list_add(l, rd_kafka_topic_name(m->rkt), m->partition)->offset =
        offset;
    return l;
}

static void pause_at(kfk_consumer_t *c, const rd_kafka_message_t *m)
{
    rd_kafka_topic_partition_list_t *l = one(m, m->offset);

    (void)rd_kafka_pause_partitions(c->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
}

/* The kept record is done: fetch on from the record after it. Pausing made
 * librdkafka drop what it had fetched beyond the record and fetch on from
 * there anyway; the seek says so explicitly, whatever the version does. */
static void resume_after(kfk_consumer_t *c, const rd_kafka_message_t *m)
{
    rd_kafka_topic_partition_list_t *l = one(m, m->offset + 1);
    rd_kafka_error_t *e = rd_kafka_seek_partitions(c->rk, l, 0);

    if (e != NULL)
        rd_kafka_error_destroy(e);
    (void)rd_kafka_resume_partitions(c->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
}

kfk__pending_t *kfk__pending_of(kfk_consumer_t *c, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < c->n_pending; i++) {
        const rd_kafka_message_t *m = c->pending[i].m;
        if (m->partition == partition && strcmp(rd_kafka_topic_name(m->rkt), topic) == 0)
            return &c->pending[i];
    }
    return NULL;
}

/* Forgets p; with resume, the partition fetches on after its record. */
void kfk__pending_drop(kfk_consumer_t *c, kfk__pending_t *p, bool resume)
{
    if (resume)
        resume_after(c, p->m);
    rd_kafka_message_destroy(p->m);
    *p = c->pending[--c->n_pending];
}

kfk__pending_t *kfk__pending_add(kfk_consumer_t *c, rd_kafka_message_t *m)
{
    if (c->n_pending == c->cap_pending) {
        size_t cap = c->cap_pending ? c->cap_pending * 2 : 8;
        kfk__pending_t *g = realloc(c->pending, cap * sizeof *g);
        if (g == NULL)
            return NULL;
        c->pending = g, c->cap_pending = cap;
    }
    memset(&c->pending[c->n_pending], 0, sizeof c->pending[0]);
    c->pending[c->n_pending].m = m;
    pause_at(c, m);
    return &c->pending[c->n_pending++];
}

/* ------------------------------------------------------------------------
 * Rebalances
 * ------------------------------------------------------------------------ */

/* Commits every stored offset, synchronously. Nothing stored is fine. */
svc_err_t kfk__commit_stored(kfk_consumer_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    rd_kafka_resp_err_t rc = rd_kafka_commit(c->rk, NULL, 0);

    if (rc == RD_OK || rc == RD_KAFKA_RESP_ERR__NO_OFFSET)
        return SVC_OK;
    atomic_fetch_add(&c->st.commit_errors, 1);
    svc_errbuf_set(errbuf, "kafka consumer: offset commit: %s", rd_kafka_err2str(rc));
    return SVC_EUNAVAIL;
}

/* An asynchronous commit's result (served in kfk__commit_due). A failure
 * leaves the offsets stored: the next commit takes them along. */
static void on_async_commit(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                            rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    kfk_consumer_t *c = opaque;

    (void)rk, (void)offsets;
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR__NO_OFFSET)
        return;
    atomic_fetch_add(&c->st.commit_errors, 1);
    c->stored = true;
    if (c->deferred == SVC_OK) {
        c->deferred = SVC_EUNAVAIL;
        snprintf(c->deferred_text, sizeof c->deferred_text, "kafka consumer: offset commit: %s",
                 rd_kafka_err2str(err));
    }
}

svc_err_t kfk__commit_due(kfk_consumer_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    uint64_t now = svc_now_ms();
    rd_kafka_resp_err_t rc;
    svc_err_t err = SVC_OK;

    if (c->stored && c->o.commit_interval_ms == 0) {
        err = kfk__commit_stored(c, errbuf);
        c->stored = err != SVC_OK; /* a failed commit stays due */
    } else if (c->stored && now >= c->commit_at_ms) {
        rc = rd_kafka_commit_queue(c->rk, NULL, c->commit_q, on_async_commit, c);
        c->commit_at_ms = now + (uint64_t)c->o.commit_interval_ms;
        c->stored = rc != RD_KAFKA_RESP_ERR_NO_ERROR && rc != RD_KAFKA_RESP_ERR__NO_OFFSET;
        if (c->stored) {
            atomic_fetch_add(&c->st.commit_errors, 1);
            svc_errbuf_set(errbuf, "kafka consumer: offset commit: %s", rd_kafka_err2str(rc));
            err = SVC_EUNAVAIL;
        }
    }
    if (c->commit_q != NULL)
        (void)rd_kafka_queue_poll_callback(c->commit_q, 0);
    if (err == SVC_OK && c->deferred != SVC_OK) { /* an async commit failed */
        err = c->deferred;
        svc_errbuf_set(errbuf, "%s", c->deferred_text);
        c->deferred = SVC_OK;
    }
    return err;
}

/* Records of revoked partitions in the batch being collected (a rebalance
 * can run in any of collect's polls) are the next owner's now: handling
 * them here too would handle them twice. */
static void drop_collected(kfk_consumer_t *c, const rd_kafka_topic_partition_list_t *parts)
{
    size_t k = 0;

    for (size_t i = 0; i < c->n_slots; i++) {
        const rd_kafka_message_t *m = c->slots[i].m;
        bool revoked = false;

        for (int j = 0; j < parts->cnt && !revoked; j++)
            revoked = parts->elems[j].partition == m->partition &&
                      strcmp(parts->elems[j].topic, rd_kafka_topic_name(m->rkt)) == 0;
        if (revoked)
            rd_kafka_message_destroy(c->slots[i].m);
        else
            c->slots[k++] = c->slots[i];
    }
    c->n_slots = k;
}

static void on_revoke(kfk_consumer_t *c, rd_kafka_topic_partition_list_t *parts, bool coop)
{
    char why[SVC_ERRBUF_LEN];
    rd_kafka_error_t *e = NULL;

    /* A lost assignment (session expired) may already be someone else's:
     * committing would be refused, and must not be tried. */
    if (!rd_kafka_assignment_lost(c->rk) && kfk__commit_stored(c, why) != SVC_OK) {
        c->deferred = SVC_EUNAVAIL;
        snprintf(c->deferred_text, sizeof c->deferred_text, "%.200s (on revoke)", why);
    }
    for (int i = 0; i < parts->cnt; i++) {
        kfk__pending_t *p = kfk__pending_of(c, parts->elems[i].topic, parts->elems[i].partition);
        if (p == NULL)
            continue;
        /* Resumed so that a later assignment of it does not start paused;
         * the next owner starts from the committed offset: this record. */
        rd_kafka_topic_partition_list_t *l = one(p->m, p->m->offset);
        (void)rd_kafka_resume_partitions(c->rk, l);
        rd_kafka_topic_partition_list_destroy(l);
        kfk__pending_drop(c, p, false);
    }
    drop_collected(c, parts);
    if (coop)
        e = rd_kafka_incremental_unassign(c->rk, parts);
    else
        (void)rd_kafka_assign(c->rk, NULL);
    if (e != NULL) {
        defer(c, SVC_EINTERNAL, "unassign", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
}

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    kfk_consumer_t *c = opaque;
    bool coop = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    rd_kafka_error_t *e = NULL;

    atomic_fetch_add(&c->st.rebalances, 1);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        /* Offsets INVALID: each partition starts from the group's committed
         * offset (auto.offset.reset=earliest when there is none). */
        if (coop)
            e = rd_kafka_incremental_assign(rk, parts);
        else
            (void)rd_kafka_assign(rk, parts);
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        on_revoke(c, parts, coop);
    } else {
        defer(c, SVC_EINTERNAL, "rebalance", rd_kafka_err2str(err));
        (void)rd_kafka_assign(rk, NULL);
    }
    if (e != NULL) {
        defer(c, SVC_EINTERNAL, "assign", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
    /* Sample soon, so the lag table follows the new assignment. */
    c->lag_at_ms = 0;
}

/* ------------------------------------------------------------------------
 * Create, close, free
 * ------------------------------------------------------------------------ */
static svc_err_t configure(rd_kafka_conf_t *conf, const kfk_consumer_opts_t *o,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    char session[16], heartbeat[16], poll[16];
    const char *const instance[][2] = {{"group.instance.id", o->group_instance_id}};
    svc_err_t err;

    snprintf(session, sizeof session, "%d", o->session_timeout_ms);
    snprintf(heartbeat, sizeof heartbeat, "%d", o->heartbeat_interval_ms);
    snprintf(poll, sizeof poll, "%d", o->max_poll_interval_ms);
    const char *const kv[][2] = {
        {"bootstrap.servers", o->brokers},
        {"client.id", o->client_id},
        {"group.id", o->group_id},
        /* Offsets move only when a record is done (consumer.h). */
        {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"},
        {"auto.offset.reset", "earliest"},
        {"partition.assignment.strategy", "cooperative-sticky"},
        {"session.timeout.ms", session},
        {"heartbeat.interval.ms", heartbeat},
        {"max.poll.interval.ms", poll},
        /* Only committed transactions' records, should a producer use them. */
        {"isolation.level", "read_committed"},
        {"log.queue", "true"},
    };
    err = kfk__conf_apply(conf, "consumer", kv, SVC_COUNTOF(kv), errbuf);
    /* Set only when given: librdkafka has no value that means "dynamic". */
    if (err == SVC_OK && o->group_instance_id != NULL)
        err = kfk__conf_apply(conf, "consumer", instance, 1, errbuf);
    return err;
}

static void on_dlq_delivery(void *ctx, void *msg_opaque, svc_err_t err, const char *reason)
{
    kfk_consumer_t *c = ctx;

    /* A report of an earlier dead letter that was given up on is stale. */
    if ((uint64_t)(uintptr_t)msg_opaque != c->dlq_seq)
        return;
    c->dlq_done = true;
    c->dlq_err = err;
    snprintf(c->dlq_reason, sizeof c->dlq_reason, "%s", reason);
}

static svc_err_t dlq_new(kfk_consumer_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    char client[256];
    kfk_producer_opts_t po;

    kfk_producer_opts_init(&po);
    snprintf(client, sizeof client, "%s-dlq", c->o.client_id);
    po.brokers = c->o.brokers;
    po.client_id = client;
    po.linger_ms = 0;
    po.delivery_timeout_ms = c->o.dlq_timeout_ms;
    po.on_delivery = on_dlq_delivery;
    po.on_log = c->o.on_log;
    po.ctx = c;
    return kfk_producer_new(&po, &c->dlq, errbuf);
}

static svc_err_t subscribe(kfk_consumer_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(4);
    rd_kafka_resp_err_t rc;

    for (size_t i = 0; c->o.topics[i] != NULL; i++)
        rd_kafka_topic_partition_list_add(l, c->o.topics[i], RD_KAFKA_PARTITION_UA);
    rc = rd_kafka_subscribe(c->rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (rc == RD_OK)
        return SVC_OK;
    svc_errbuf_set(errbuf, "kafka consumer: subscribe: %s", rd_kafka_err2str(rc));
    return SVC_EINTERNAL;
}

static svc_err_t make_client(kfk_consumer_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    char why[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    svc_err_t err = conf != NULL ? configure(conf, &c->o, errbuf) : SVC_ENOMEM;

    if (err != SVC_OK) {
        if (conf != NULL)
            rd_kafka_conf_destroy(conf);
        return err;
    }
    rd_kafka_conf_set_opaque(conf, c);
    rd_kafka_conf_set_log_cb(conf, on_log);
    rd_kafka_conf_set_rebalance_cb(conf, on_rebalance);
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why);
    if (c->rk == NULL) { /* conf is still ours then */
        rd_kafka_conf_destroy(conf);
        svc_errbuf_set(errbuf, "kafka consumer: %s", why);
        return SVC_EINTERNAL;
    }
    rd_kafka_set_log_queue(c->rk, NULL);
    (void)rd_kafka_poll_set_consumer(c->rk);
    if (c->o.commit_interval_ms > 0 && (c->commit_q = rd_kafka_queue_new(c->rk)) == NULL)
        return SVC_ENOMEM;
    return SVC_OK;
}

svc_err_t kfk_consumer_new(const kfk_consumer_opts_t *o, kfk_consumer_t **out,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    kfk_consumer_t *c;
    svc_err_t err = kfk_consumer_opts_validate(o, errbuf);

    *out = NULL;
    if (err != SVC_OK)
        return err;
    c = calloc(1, sizeof *c);
    if (c == NULL)
        return SVC_ENOMEM;
    kfk__stats_init(&c->st);
    c->o = *o;
    c->group_id = strdup(o->group_id);
    c->dlq_topic = o->dlq_topic != NULL ? strdup(o->dlq_topic) : NULL;
    c->instance_id = o->group_instance_id != NULL ? strdup(o->group_instance_id) : NULL;
    c->o.group_id = c->group_id;
    c->o.dlq_topic = c->dlq_topic;
    c->o.group_instance_id = c->instance_id;
    c->rand_state = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)c;
    c->slots = calloc(o->batch_max, sizeof *c->slots);
    if (c->group_id == NULL || (o->dlq_topic != NULL && c->dlq_topic == NULL) ||
        (o->group_instance_id != NULL && c->instance_id == NULL) || c->slots == NULL)
        err = SVC_ENOMEM;
    if (err == SVC_OK)
        err = make_client(c, errbuf);
    if (err == SVC_OK)
        err = dlq_new(c, errbuf);
    if (err == SVC_OK)
        err = subscribe(c, errbuf);
    /* Only the copies above are kept: o's other strings are the caller's. */
    c->o.brokers = NULL, c->o.client_id = NULL, c->o.topics = NULL;
    if (err != SVC_OK) {
        c->closed = true; /* never joined: nothing to leave */
        kfk_consumer_free(c);
        return err;
    }
    *out = c;
    return SVC_OK;
}

/* True once the consumer is no member of the group: it has left (librdkafka
 * forgets the member id as it sends the LeaveGroup), or never joined. */
static bool out_of_group(kfk_consumer_t *c)
{
    char *id = rd_kafka_memberid(c->rk);
    bool out = id == NULL || id[0] == '\0';

    if (id != NULL)
        rd_kafka_mem_free(c->rk, id);
    return out;
}

/* Leaves the group ahead of rd_kafka_consumer_close, which sends no
 * LeaveGroup for a static member (KIP-345: closing is taken for a restart),
 * so that its partitions would wait out its session however cleanly it
 * stopped. An unsubscribe is no termination: librdkafka revokes the
 * assignment (served by these polls: on_revoke commits), then leaves by
 * member id, which the coordinator honours for a static member too. Records
 * the polls still hand out are dropped unhandled: their offsets were never
 * stored, so the next owner gets them. A dynamic member leaves the same way
 * (its close would have done it anyway). */
static void leave_group(kfk_consumer_t *c)
{
    uint64_t by = svc_now_ms() + KFK_CONSUMER_LEAVE_WAIT_MS;

    if (out_of_group(c) || rd_kafka_unsubscribe(c->rk) != RD_OK)
        return;
    while (!out_of_group(c) && svc_now_ms() < by) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 20);
        if (m != NULL)
            rd_kafka_message_destroy(m);
    }
}

svc_err_t kfk_consumer_close(kfk_consumer_t *c, char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err;

    if (c->closed)
        return SVC_OK;
    c->closed = true;
    /* Kept records are not done: the next owner gets them again. */
    while (c->n_pending > 0)
        kfk__pending_drop(c, &c->pending[0], false);
    err = kfk__commit_stored(c, errbuf);
    c->stored = false;
    if (c->commit_q != NULL) /* the last asynchronous commits' results */
        (void)rd_kafka_queue_poll_callback(c->commit_q, 0);
    leave_group(c);
    /* Serves what is left of the revoke and waits for the LeaveGroup's
     * answer (librdkafka holds its termination for it). */
    (void)rd_kafka_consumer_close(c->rk);
    return err;
}

void kfk_consumer_free(kfk_consumer_t *c)
{
    if (c == NULL)
        return;
    if (c->rk != NULL) {
        (void)kfk_consumer_close(c, SVC_ERRBUF_SCRATCH);
        if (c->commit_q != NULL)
            rd_kafka_queue_destroy(c->commit_q);
        rd_kafka_destroy(c->rk);
    }
    kfk_producer_free(c->dlq, 2000);
    while (c->n_pending > 0) /* only when rk was never made */
        kfk__pending_drop(c, &c->pending[0], false);
    free(c->pending);
    free(c->slots);
    free(c->group_id);
    free(c->dlq_topic);
    free(c->instance_id);
    kfk__stats_dispose(&c->st);
    free(c);
}

void kfk_consumer_stop(kfk_consumer_t *c)
{
    atomic_store(&c->stop, true);
}

bool kfk_record_cancelled(const kfk_record_t *r)
{
    return atomic_load(&((kfk_consumer_t *)r->consumer)->stop) || svc_now_ms() >= r->deadline_ms;
}
