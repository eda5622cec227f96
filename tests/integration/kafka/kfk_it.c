/* SPDX-License-Identifier: Apache-2.0 */
/* kfk_it.c - topics, records and in-process consumers for test_kfk_consumer (kfk_it.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfk_it.h"

/* ------------------------------------------------------------------------
 * Topics and records
 * ------------------------------------------------------------------------ */
rd_kafka_t *kit_client(const kit_fixture_t *f, rd_kafka_type_t type, const char *group)
{
    char why[256];
    rd_kafka_conf_t *c = rd_kafka_conf_new();

    assert_int_equal(rd_kafka_conf_set(c, "bootstrap.servers", f->kafka.brokers, why, sizeof why),
                     RD_KAFKA_CONF_OK);
    if (group != NULL) {
        assert_int_equal(rd_kafka_conf_set(c, "group.id", group, why, sizeof why), 0);
        assert_int_equal(rd_kafka_conf_set(c, "enable.partition.eof", "true", why, sizeof why), 0);
        assert_int_equal(rd_kafka_conf_set(c, "enable.auto.commit", "false", why, sizeof why), 0);
    }
    rd_kafka_t *rk = rd_kafka_new(type, c, why, sizeof why);
    assert_non_null(rk);
    return rk;
}

static void create(const kit_fixture_t *f, const char *const *names, const int *parts, size_t n)
{
    rd_kafka_t *rk = kit_client(f, RD_KAFKA_PRODUCER, NULL);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_NewTopic_t *nt[16];
    const rd_kafka_topic_result_t **res;
    rd_kafka_event_t *ev;
    char why[256];
    size_t got = 0;

    assert_true(n <= SVC_COUNTOF(nt));
    for (size_t i = 0; i < n; i++)
        nt[i] = rd_kafka_NewTopic_new(names[i], parts[i], 1, why, sizeof why);
    rd_kafka_CreateTopics(rk, nt, n, NULL, q);
    ev = rd_kafka_queue_poll(q, it_ms(30000));
    assert_non_null(ev);
    res = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &got);
    assert_int_equal(got, n);
    for (size_t i = 0; i < got; i++) {
        rd_kafka_resp_err_t e = rd_kafka_topic_result_error(res[i]);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
            fail_msg("create %s: %s", rd_kafka_topic_result_name(res[i]),
                     rd_kafka_topic_result_error_string(res[i]));
    }
    rd_kafka_event_destroy(ev);
    rd_kafka_NewTopic_destroy_array(nt, n);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
}

void kit_create_topics(const kit_fixture_t *f)
{
    static const char *const names[] = {"kfk-it.once",   "kfk-it.poison", "kfk-it.poison.dlq",
                                        "kfk-it.retry",  "kfk-it.crash",  "kfk-it.rebalance",
                                        "kfk-it.dlqdown"};
    static const int parts[] = {3, 3, 1, 2, 3, 3, 1};

    create(f, names, parts, SVC_COUNTOF(names));
}

void kit_create_topic(const kit_fixture_t *f, const char *name, int parts)
{
    create(f, &name, &parts, 1);
}

static void on_delivery(void *ctx, void *opaque, svc_err_t err, const char *reason)
{
    int *left = ctx;

    if (err != SVC_OK)
        fail_msg("produce: %s", reason);
    (*left)--;
}

/* n records to topic: id <prefix>-<i>, key keys ? keys(i) : "k<i>", value
 * "v<i>" or "poison" for index poison_at, plus header x-test: kept. */
void kit_produce(const kit_fixture_t *f, const char *topic, const char *prefix, int n,
                 const char *key, int poison_at)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    kfk_producer_opts_t po;
    kfk_producer_t *p = NULL;
    int left = n;

    kfk_producer_opts_init(&po);
    po.brokers = f->kafka.brokers;
    po.on_delivery = on_delivery;
    po.ctx = &left;
    assert_int_equal(kfk_producer_new(&po, &p, errbuf), SVC_OK);
    for (int i = 0; i < n; i++) {
        char id[64], k[64], v[32];
        snprintf(id, sizeof id, "%s-%d", prefix, i);
        snprintf(k, sizeof k, "%s", key != NULL ? key : id);
        snprintf(v, sizeof v, "%s", i == poison_at ? "poison" : "v");
        const kfk_ce_t ce = {id, "shopmicro.test.v1.Thing", "/test", NULL, NULL, NULL};
        kfk_header_t h[KFK_CE_MAX_HEADERS + 1];
        size_t nh = 0;
        assert_int_equal(kfk_ce_headers(&ce, h, &nh, SVC_ERRBUF_SCRATCH), SVC_OK);
        h[nh++] = (kfk_header_t){"x-test", "kept", 4};
        kfk_message_t m = {topic, k, strlen(k), v, strlen(v), h, nh, NULL};
        if (kfk_produce(p, &m, errbuf) != SVC_OK)
            fail_msg("produce: %s", errbuf);
    }
    for (uint64_t give_up = svc_now_ms() + 20000; left > 0 && svc_now_ms() < give_up;)
        kfk_producer_poll(p, 50);
    assert_int_equal(left, 0);
    kfk_producer_free(p, 1000);
}

/* ------------------------------------------------------------------------
 * A consumer in this process
 * ------------------------------------------------------------------------ */
static kfk_verdict_t kit_handler(void *ctx, const kfk_record_t *r, char *reason)
{
    kit_ctx_t *t = ctx;
    kit_seen_t *s;
    bool before = false;

    if (t->n == KIT_MAX_SEEN)
        fail_msg("too many handler calls");
    s = &t->seen[t->n++];
    t->last_ns = svc_now_ns();
    t->first_ns = t->first_ns ? t->first_ns : t->last_ns;
    snprintf(s->id, sizeof s->id, "%s", r->ce_id != NULL ? r->ce_id : "");
    snprintf(s->value, sizeof s->value, "%.*s", (int)r->value_len, (const char *)r->value);
    s->partition = r->partition;
    s->offset = r->offset;
    s->attempt = r->attempt;
    if (t->retry_fails > 0 && t->retry_id[0] == '\0')
        snprintf(t->retry_id, sizeof t->retry_id, "%s", s->id); /* the first record seen */
    for (size_t i = 0; i + 1 < t->n; i++)
        before |= strcmp(t->seen[i].id, s->id) == 0 && t->seen[i].verdict == KFK_HANDLED;
    if (strcmp(s->value, "poison") == 0) {
        snprintf(reason, KFK_REASON_LEN, "undecodable: test poison");
        s->verdict = KFK_POISON;
    } else if (strcmp(s->id, t->retry_id) == 0 && r->attempt <= t->retry_fails) {
        snprintf(reason, KFK_REASON_LEN, "database unavailable (test)");
        s->verdict = KFK_RETRY;
    } else {
        s->verdict = before ? KFK_DUPLICATE : KFK_HANDLED;
    }
    return s->verdict;
}

kfk_consumer_t *kit_consumer(const kit_fixture_t *f, const char *topic, const char *group,
                             kit_ctx_t *t)
{
    const char *topics[] = {topic, NULL};
    char errbuf[SVC_ERRBUF_LEN] = "";
    kfk_consumer_opts_t o;
    kfk_consumer_t *c = NULL;

    kfk_consumer_opts_init(&o);
    o.brokers = f->kafka.brokers;
    o.group_id = group;
    o.topics = topics;
    o.session_timeout_ms = 6000;
    o.handler_timeout_ms = 5000;
    o.dlq_topic = t->dlq_topic;
    o.dlq_timeout_ms = t->dlq_timeout_ms > 0 ? t->dlq_timeout_ms : 5000;
    o.max_poll_interval_ms = 25000;
    o.backoff_base_ms = 100;
    o.backoff_cap_ms = 400;
    o.lag_interval_ms = 200;
    o.handler = kit_handler;
    o.ctx = t;
    if (kfk_consumer_new(&o, &c, errbuf) != SVC_OK)
        fail_msg("kfk_consumer_new: %s", errbuf);
    return c;
}

/* Polls until the handler was called `calls` times (or timeout_ms). */
void kit_drive(kfk_consumer_t *c, kit_ctx_t *t, size_t calls, int timeout_ms)
{
    char errbuf[SVC_ERRBUF_LEN];
    uint64_t give_up = svc_now_ms() + (uint64_t)it_ms(timeout_ms);

    while (t->n < calls && svc_now_ms() < give_up)
        (void)kfk_consumer_poll(c, 100, NULL, errbuf);
    if (t->n < calls)
        fail_msg("the handler was called %zu times, not %zu, within %d ms", t->n, calls,
                 timeout_ms);
}

/* Polls for ms, whatever comes. */
void kit_drive_for(kfk_consumer_t *c, int ms)
{
    char errbuf[SVC_ERRBUF_LEN];

    for (uint64_t until = svc_now_ms() + (uint64_t)ms; svc_now_ms() < until;)
        (void)kfk_consumer_poll(c, 50, NULL, errbuf);
}

/* Polls until the group assigned `parts` partitions to c. */
void kit_wait_assigned(kfk_consumer_t *c, unsigned parts)
{
    char errbuf[SVC_ERRBUF_LEN];
    kfk_consumer_stats_t s = {0};

    for (uint64_t give_up = svc_now_ms() + (uint64_t)it_ms(20000);
         s.n_partitions != parts && svc_now_ms() < give_up;) {
        (void)kfk_consumer_poll(c, 50, NULL, errbuf);
        kfk_consumer_stats(c, &s);
    }
    assert_int_equal(s.n_partitions, parts);
}

void kit_close_free(kfk_consumer_t *c)
{
    char errbuf[SVC_ERRBUF_LEN] = "";

    if (kfk_consumer_close(c, errbuf) != SVC_OK)
        fail_msg("close: %s", errbuf);
    kfk_consumer_free(c);
}

/* A new member of group after the others closed: it gets nothing. */
void kit_group_has_nothing_left(const kit_fixture_t *f, const char *topic, const char *group,
                                unsigned parts)
{
    kit_ctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_t *c = kit_consumer(f, topic, group, t);

    kit_wait_assigned(c, parts);
    kit_drive_for(c, 1500);
    if (t->n != 0)
        fail_msg("%s: a new member got %zu records again (first %s)", group, t->n, t->seen[0].id);
    kit_close_free(c);
    free(t);
}

size_t kit_count_verdict(const kit_ctx_t *t, const char *id, kfk_verdict_t v)
{
    size_t n = 0;

    for (size_t i = 0; i < t->n; i++)
        n += strcmp(t->seen[i].id, id) == 0 && t->seen[i].verdict == v;
    return n;
}

static void hdr(rd_kafka_headers_t *h, const char *name, char *out, size_t len)
{
    const void *v = NULL;
    size_t n = 0;

    out[0] = '\0';
    if (h != NULL && rd_kafka_header_get_last(h, name, &v, &n) == RD_KAFKA_RESP_ERR_NO_ERROR)
        snprintf(out, len, "%.*s", (int)n, (const char *)v);
}

void kit_read_dead_letters(const kit_fixture_t *f, const char *topic, kit_dead_t *d)
{
    rd_kafka_t *rk = kit_client(f, RD_KAFKA_CONSUMER, "it-dlq-reader");
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    bool eof = false;

    rd_kafka_topic_partition_list_add(l, topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    assert_int_equal(rd_kafka_assign(rk, l), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(l);
    memset(d, 0, sizeof *d);
    for (uint64_t give_up = svc_now_ms() + 15000; !eof && svc_now_ms() < give_up;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        rd_kafka_headers_t *h = NULL;
        if (m == NULL)
            continue;
        eof = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && d->n++ == 0) {
            snprintf(d->key, sizeof d->key, "%.*s", (int)m->key_len, (const char *)m->key);
            snprintf(d->value, sizeof d->value, "%.*s", (int)m->len, (const char *)m->payload);
            (void)rd_kafka_message_headers(m, &h);
            hdr(h, "ce_id", d->ce_id, sizeof d->ce_id);
            hdr(h, "x-test", d->x_test, sizeof d->x_test);
            hdr(h, KFK_DLQ_REASON, d->reason, sizeof d->reason);
            hdr(h, KFK_DLQ_ORIG_TOPIC, d->topic, sizeof d->topic);
            hdr(h, KFK_DLQ_ORIG_PARTITION, d->partition, sizeof d->partition);
            hdr(h, KFK_DLQ_ORIG_OFFSET, d->offset, sizeof d->offset);
            hdr(h, KFK_DLQ_GROUP, d->group, sizeof d->group);
            hdr(h, KFK_DLQ_TIME, d->time, sizeof d->time);
        }
        rd_kafka_message_destroy(m);
    }
    assert_true(eof);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
}

size_t kit_handled_count(const kit_ctx_t *t)
{
    size_t n = 0;

    for (size_t i = 0; i < t->n; i++)
        n += t->seen[i].verdict == KFK_HANDLED;
    return n;
}

/* Two members of one group in this process, polled in turn. */
void kit_drive_two(kfk_consumer_t *a, kfk_consumer_t *b, int ms)
{
    char errbuf[SVC_ERRBUF_LEN];

    for (uint64_t until = svc_now_ms() + (uint64_t)ms; svc_now_ms() < until;) {
        if (a != NULL)
            (void)kfk_consumer_poll(a, 20, NULL, errbuf);
        (void)kfk_consumer_poll(b, 20, NULL, errbuf);
    }
}
