/* SPDX-License-Identifier: Apache-2.0 */
/*
 * producer.c - the librdkafka producer behind kfk_producer_t.
 *
 * Every callback librdkafka makes (delivery reports, errors, log lines) is
 * served from rd_kafka_poll() on the caller's thread, never from librdkafka's
 * own threads: the log queue is forwarded to the main queue. So a caller's
 * callbacks need no locks.
 */
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "kafka/kafka.h"

/* Topics whose metadata this producer asked for before its first message
 * (learn_topic); more than this many are left to librdkafka alone. */
#define KNOWN_TOPICS    16
#define TOPIC_LOOKUP_MS 500

struct kfk_producer {
    rd_kafka_t *rk;
    kfk_delivery_fn on_delivery;
    kfk_log_fn on_log;
    void *ctx;
    atomic_int outstanding;
    pthread_mutex_t known_mu; /* kfk_produce is thread-safe             */
    char *known[KNOWN_TOPICS];
    int n_known;
};

static void on_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    kfk_producer_t *p = opaque;

    atomic_fetch_sub(&p->outstanding, 1);
    p->on_delivery(p->ctx, m->_private, kfk_err_from_rd(m->err),
                   m->err ? rd_kafka_err2str(m->err) : "");
}

static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    kfk_producer_t *p = rd_kafka_opaque(rk);

    if (p != NULL && p->on_log != NULL)
        p->on_log(p->ctx, level, fac, buf);
}

/* librdkafka reports connection trouble here (and retries by itself); the
 * messages concerned get their own delivery reports later. */
static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    kfk_producer_t *p = opaque;
    char line[512];

    if (p->on_log == NULL)
        return;
    snprintf(line, sizeof line, "%s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
    p->on_log(p->ctx, 3, "ERROR", line);
}

static svc_err_t configure(rd_kafka_conf_t *conf, const kfk_producer_opts_t *o,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    char linger[16], timeout[16], queue[16];

    snprintf(linger, sizeof linger, "%d", o->linger_ms);
    snprintf(timeout, sizeof timeout, "%d", o->delivery_timeout_ms);
    snprintf(queue, sizeof queue, "%d", o->queue_max_msgs);
    const char *const kv[][2] = {
        {"bootstrap.servers", o->brokers},
        {"client.id", o->client_id},
        {"acks", o->acks},
        {"enable.idempotence", o->idempotence ? "true" : "false"},
        {"linger.ms", linger},
        {"message.timeout.ms", timeout},
        {"queue.buffering.max.messages", queue},
        /* Log lines through the main queue, so rd_kafka_poll serves them. */
        {"log.queue", "true"},
    };
    return kfk__conf_apply(conf, "producer", kv, SVC_COUNTOF(kv), errbuf);
}

svc_err_t kfk_producer_new(const kfk_producer_opts_t *o, kfk_producer_t **out,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    char why[512];
    kfk_producer_t *p;
    rd_kafka_conf_t *conf;
    svc_err_t err = kfk_producer_opts_validate(o, errbuf);

    *out = NULL;
    if (err != SVC_OK)
        return err;
    p = calloc(1, sizeof *p);
    conf = rd_kafka_conf_new();
    if (p == NULL || conf == NULL) {
        free(p);
        if (conf != NULL)
            rd_kafka_conf_destroy(conf);
        return SVC_ENOMEM;
    }
    p->on_delivery = o->on_delivery;
    p->on_log = o->on_log;
    p->ctx = o->ctx;
    err = configure(conf, o, errbuf);
    if (err != SVC_OK) {
        rd_kafka_conf_destroy(conf);
        free(p);
        return err;
    }
    rd_kafka_conf_set_opaque(conf, p);
    rd_kafka_conf_set_dr_msg_cb(conf, on_dr);
    rd_kafka_conf_set_log_cb(conf, on_log);
    rd_kafka_conf_set_error_cb(conf, on_error);
    p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof why);
    if (p->rk == NULL) { /* conf is still ours then */
        rd_kafka_conf_destroy(conf);
        free(p);
        svc_errbuf_set(errbuf, "kafka producer: %s", why);
        return SVC_EINTERNAL;
    }
    rd_kafka_set_log_queue(p->rk, NULL);
    pthread_mutex_init(&p->known_mu, NULL); /* last: nothing fails after it */
    *out = p;
    return SVC_OK;
}

void kfk_producer_free(kfk_producer_t *p, int timeout_ms)
{
    if (p == NULL)
        return;
    rd_kafka_flush(p->rk, timeout_ms);
    /* What the flush could not deliver gets its report now (purged), so that
     * every accepted message is reported exactly once, as promised. */
    rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    for (int i = 0; i < 100 && atomic_load(&p->outstanding) > 0; i++)
        rd_kafka_poll(p->rk, 10);
    rd_kafka_destroy(p->rk);
    for (int i = 0; i < p->n_known; i++)
        free(p->known[i]);
    pthread_mutex_destroy(&p->known_mu);
    free(p);
}

/* Claims topic's place in the known set: true once, for its first message. */
static bool first_message_to(kfk_producer_t *p, const char *topic)
{
    bool first = true;

    pthread_mutex_lock(&p->known_mu);
    for (int i = 0; first && i < p->n_known; i++)
        first = strcmp(p->known[i], topic) != 0;
    if (first && p->n_known < KNOWN_TOPICS && (p->known[p->n_known] = strdup(topic)) != NULL)
        p->n_known++;
    else
        first = false; /* known, or no room: librdkafka finds it alone */
    pthread_mutex_unlock(&p->known_mu);
    return first;
}

/*
 * Before the first message to a topic, asks for that topic's metadata and
 * waits for it (at most TOPIC_LOOKUP_MS). Left alone, librdkafka 2.0 may
 * learn a new topic's partitions only at its next once-a-second topic
 * scan, and sends nothing to the topic until then: every relay start, and
 * every hand-over of shards, paid that wait before its first event left
 * (docs/bench/history.md, "The producer learns a new topic first"). A
 * broker that does not answer costs that wait once; the message is queued
 * anyway.
 */
static void learn_topic(kfk_producer_t *p, const char *topic)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *t;

    if (!first_message_to(p, topic) || (t = rd_kafka_topic_new(p->rk, topic, NULL)) == NULL)
        return;
    (void)rd_kafka_metadata(p->rk, 0, t, &md, TOPIC_LOOKUP_MS);
    if (md != NULL)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
}

static rd_kafka_headers_t *headers_new(const kfk_message_t *m, char errbuf[static SVC_ERRBUF_LEN])
{
    rd_kafka_headers_t *h = rd_kafka_headers_new(m->n_headers);

    for (size_t i = 0; h != NULL && i < m->n_headers; i++) {
        const kfk_header_t *x = &m->headers[i];
        if (rd_kafka_header_add(h, x->name, -1, x->value, (ssize_t)x->len) != 0) {
            svc_errbuf_set(errbuf, "kafka: header %s refused", x->name);
            rd_kafka_headers_destroy(h);
            return NULL;
        }
    }
    return h;
}

svc_err_t kfk_produce(kfk_producer_t *p, const kfk_message_t *m, char errbuf[static SVC_ERRBUF_LEN])
{
    rd_kafka_headers_t *h;
    rd_kafka_resp_err_t rc;

    if (m->topic == NULL || m->topic[0] == '\0' || m->n_headers > KFK_MAX_HEADERS) {
        svc_errbuf_set(errbuf, "kafka: %s",
                       m->n_headers > KFK_MAX_HEADERS ? "too many headers" : "topic is required");
        return SVC_EINVAL;
    }
    for (size_t i = 0; i < m->n_headers; i++) {
        if (m->headers[i].name == NULL || m->headers[i].name[0] == '\0') {
            svc_errbuf_set(errbuf, "kafka: header %zu has no name", i);
            return SVC_EINVAL;
        }
    }
    h = headers_new(m, errbuf);
    if (h == NULL)
        return SVC_EINVAL;
    learn_topic(p, m->topic);
    /* Counted before the call: a report may fire on the next poll. */
    atomic_fetch_add(&p->outstanding, 1);
    rc = rd_kafka_producev(p->rk, RD_KAFKA_V_TOPIC(m->topic), RD_KAFKA_V_KEY(m->key, m->key_len),
                           RD_KAFKA_V_VALUE((void *)m->value, m->value_len),
                           RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h),
                           RD_KAFKA_V_OPAQUE(m->opaque), RD_KAFKA_V_END);
    if (rc == RD_KAFKA_RESP_ERR_NO_ERROR)
        return SVC_OK; /* librdkafka owns h now */
    atomic_fetch_sub(&p->outstanding, 1);
    rd_kafka_headers_destroy(h);
    svc_errbuf_set(errbuf, "kafka: produce to %s: %s", m->topic, rd_kafka_err2str(rc));
    return kfk_err_from_rd(rc);
}

int kfk_producer_poll(kfk_producer_t *p, int timeout_ms)
{
    return rd_kafka_poll(p->rk, timeout_ms);
}

int kfk_producer_flush(kfk_producer_t *p, int timeout_ms)
{
    /* rd_kafka_flush also serves the main queue (delivery reports, log
     * lines) while it waits, like rd_kafka_poll. */
    (void)rd_kafka_flush(p->rk, timeout_ms);
    return atomic_load(&p->outstanding);
}

void kfk_producer_yield(kfk_producer_t *p)
{
    rd_kafka_yield(p->rk); /* a flag of the calling thread, checked after each report */
}

svc_err_t kfk_producer_ping(kfk_producer_t *p, int timeout_ms, char errbuf[static SVC_ERRBUF_LEN])
{
    const struct rd_kafka_metadata *md = NULL;
    /* Neither all topics nor one: the smallest request, for the topics
     * this producer already knows (none: brokers only). */
    rd_kafka_resp_err_t rc = rd_kafka_metadata(p->rk, 0, NULL, &md, timeout_ms);

    if (md != NULL)
        rd_kafka_metadata_destroy(md);
    if (rc == RD_KAFKA_RESP_ERR_NO_ERROR)
        return SVC_OK;
    svc_errbuf_set(errbuf, "kafka: metadata request: %s", rd_kafka_err2str(rc));
    return SVC_EUNAVAIL;
}

int kfk_producer_outstanding(const kfk_producer_t *p)
{
    return atomic_load(&((kfk_producer_t *)p)->outstanding);
}
