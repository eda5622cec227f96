/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_kfk_consumer.c - pkg/kafka's consumer (kafka/consumer.h) on a real
 * broker (deploy/local/kafka.sh through relay_it, on free ports):
 *   - every record is handed once, a relay duplicate (same ce_id) is the
 *     handler's KFK_DUPLICATE, the offsets are committed: after close, a new
 *     member of the group gets nothing;
 *   - a poison record lands on the dead-letter topic with its key, value and
 *     headers and the dlq-* headers naming it, and the records behind it are
 *     handled;
 *   - KFK_RETRY (the database is down) hands the same record again after a
 *     backoff, nothing behind it on its partition is handed meanwhile, and
 *     nothing is dead-lettered;
 *   - a second member joins (cooperative-sticky: it gets a share, the first
 *     keeps the rest); the first closes while it holds a record for a retry:
 *     the second gets that record and every other one, each handled once;
 *   - kill -9 of a consumer process after its handler's effect but before
 *     the offset commit: that one record is handed again to the next member
 *     (at least once), and no other record is.
 * Topics are created by the test itself (the admin API), one set per case.
 */
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kafka/consumer.h"
#include "relay_it.h"

#define MAX_SEEN 256

typedef struct fixture {
    rly_it_kafka_t kafka;
} fixture_t;

/* What the handler saw, call by call. */
typedef struct seen {
    char id[64], value[32];
    int32_t partition;
    int64_t offset;
    unsigned attempt;
    kfk_verdict_t verdict;
} seen_t;

typedef struct tctx {
    seen_t seen[MAX_SEEN];
    size_t n;
    char retry_id[64];    /* the record that gets KFK_RETRY ...            */
    unsigned retry_fails; /* ... this many times (0: none)                 */
    uint64_t first_ns, last_ns; /* the first and the last handler call     */
} tctx_t;

static uint64_t t_start;

/* ------------------------------------------------------------------------
 * Topics and records
 * ------------------------------------------------------------------------ */
static rd_kafka_t *client(const fixture_t *f, rd_kafka_type_t type, const char *group)
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

static void create_topics(const fixture_t *f)
{
    static const struct {
        const char *name;
        int parts;
    } t[] = {{"kfk-it.once", 3}, {"kfk-it.poison", 3}, {"kfk-it.poison.dlq", 1},
             {"kfk-it.retry", 2}, {"kfk-it.crash", 3},
             {"kfk-it.rebalance", 3}};
    rd_kafka_t *rk = client(f, RD_KAFKA_PRODUCER, NULL);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_NewTopic_t *nt[SVC_COUNTOF(t)];
    const rd_kafka_topic_result_t **res;
    rd_kafka_event_t *ev;
    char why[256];
    size_t n = 0;

    for (size_t i = 0; i < SVC_COUNTOF(t); i++)
        nt[i] = rd_kafka_NewTopic_new(t[i].name, t[i].parts, 1, why, sizeof why);
    rd_kafka_CreateTopics(rk, nt, SVC_COUNTOF(t), NULL, q);
    ev = rd_kafka_queue_poll(q, it_ms(30000));
    assert_non_null(ev);
    res = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    assert_int_equal(n, SVC_COUNTOF(t));
    for (size_t i = 0; i < n; i++) {
        rd_kafka_resp_err_t e = rd_kafka_topic_result_error(res[i]);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
            fail_msg("create %s: %s", rd_kafka_topic_result_name(res[i]),
                     rd_kafka_topic_result_error_string(res[i]));
    }
    rd_kafka_event_destroy(ev);
    rd_kafka_NewTopic_destroy_array(nt, SVC_COUNTOF(t));
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
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
static void produce(const fixture_t *f, const char *topic, const char *prefix, int n,
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
        assert_int_equal(kfk_ce_headers(&ce, h, &nh, NULL), SVC_OK);
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
static kfk_verdict_t handler(void *ctx, const kfk_record_t *r, char *reason)
{
    tctx_t *t = ctx;
    seen_t *s;
    bool before = false;

    if (t->n == MAX_SEEN)
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

static kfk_consumer_t *consumer(const fixture_t *f, const char *topic, const char *group,
                                tctx_t *t)
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
    o.dlq_timeout_ms = 5000;
    o.max_poll_interval_ms = 20000;
    o.backoff_base_ms = 100;
    o.backoff_cap_ms = 400;
    o.lag_interval_ms = 200;
    o.handler = handler;
    o.ctx = t;
    if (kfk_consumer_new(&o, &c, errbuf) != SVC_OK)
        fail_msg("kfk_consumer_new: %s", errbuf);
    return c;
}

/* Polls until the handler was called `calls` times (or timeout_ms). */
static void drive(kfk_consumer_t *c, tctx_t *t, size_t calls, int timeout_ms)
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
static void drive_for(kfk_consumer_t *c, int ms)
{
    char errbuf[SVC_ERRBUF_LEN];

    for (uint64_t until = svc_now_ms() + (uint64_t)ms; svc_now_ms() < until;)
        (void)kfk_consumer_poll(c, 50, NULL, errbuf);
}

/* Polls until the group assigned `parts` partitions to c. */
static void wait_assigned(kfk_consumer_t *c, unsigned parts)
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

static void close_free(kfk_consumer_t *c)
{
    char errbuf[SVC_ERRBUF_LEN] = "";

    if (kfk_consumer_close(c, errbuf) != SVC_OK)
        fail_msg("close: %s", errbuf);
    kfk_consumer_free(c);
}

/* A new member of group after the others closed: it gets nothing. */
static void group_has_nothing_left(const fixture_t *f, const char *topic, const char *group,
                                   unsigned parts)
{
    tctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_t *c = consumer(f, topic, group, t);

    wait_assigned(c, parts);
    drive_for(c, 1500);
    if (t->n != 0)
        fail_msg("%s: a new member got %zu records again (first %s)", group, t->n, t->seen[0].id);
    close_free(c);
    free(t);
}

static size_t count_verdict(const tctx_t *t, const char *id, kfk_verdict_t v)
{
    size_t n = 0;

    for (size_t i = 0; i < t->n; i++)
        n += strcmp(t->seen[i].id, id) == 0 && t->seen[i].verdict == v;
    return n;
}

/* ------------------------------------------------------------------------
 * Cases
 * ------------------------------------------------------------------------ */
static void every_record_once_then_committed(void **state)
{
    fixture_t *f = *state;
    tctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_stats_t s;
    char page[16384], id[32];
    kfk_consumer_t *c;
    uint64_t t0;

    produce(f, "kfk-it.once", "once", 30, NULL, -1);
    produce(f, "kfk-it.once", "once", 8, "once-7", -1); /* once-7 again, as a relay would */
    t0 = svc_now_ms();
    c = consumer(f, "kfk-it.once", "it-once", t);
    drive(c, t, 38, 30000);
    fprintf(stderr, "[kfk] 38 records handled %llu ms after the consumer was made; first to "
                    "last handler call %.1f ms (a synchronous commit after each)\n",
            (unsigned long long)(svc_now_ms() - t0), (double)(t->last_ns - t->first_ns) / 1e6);
    for (int i = 0; i < 30; i++) {
        snprintf(id, sizeof id, "once-%d", i);
        assert_int_equal(count_verdict(t, id, KFK_HANDLED), 1);
        assert_int_equal(count_verdict(t, id, KFK_DUPLICATE), i < 8 ? 1 : 0);
    }
    kfk_consumer_stats(c, &s);
    assert_int_equal(s.consumed, 38);
    assert_int_equal(s.handled, 30);
    assert_int_equal(s.duplicates, 8);
    assert_int_equal(s.dead_lettered + s.retries + s.commit_errors, 0);
    assert_int_equal(s.latency_count, 38);
    drive_for(c, 400); /* a lag sample after the last commit */
    kfk_consumer_stats(c, &s);
    assert_int_equal(s.lag_total, 0);
    kfk_consumer_metrics(c, "it_consumer", page, sizeof page);
    assert_non_null(strstr(page, "it_consumer_consumed_total 38\n"));
    assert_non_null(strstr(page, "it_consumer_deduplicated_total 8\n"));
    assert_non_null(strstr(page, "it_consumer_handler_seconds_count 38\n"));
    assert_non_null(strstr(page, "it_consumer_assigned_partitions 3\n"));
    assert_non_null(strstr(page, "it_consumer_lag{topic=\"kfk-it.once\",partition=\"0\"} 0\n"));
    assert_non_null(strstr(page, "it_consumer_lag{topic=\"kfk-it.once\",partition=\"2\"} 0\n"));
    close_free(c);
    group_has_nothing_left(f, "kfk-it.once", "it-once", 3);
    free(t);
}

/* The dead letter, as read back from the dead-letter topic. */
typedef struct dead {
    char key[64], value[32], ce_id[64], x_test[16], reason[128], topic[64], partition[16],
        offset[24], group[64], time[40];
    size_t n;
} dead_t;

static void hdr(rd_kafka_headers_t *h, const char *name, char *out, size_t len)
{
    const void *v = NULL;
    size_t n = 0;

    out[0] = '\0';
    if (h != NULL && rd_kafka_header_get_last(h, name, &v, &n) == RD_KAFKA_RESP_ERR_NO_ERROR)
        snprintf(out, len, "%.*s", (int)n, (const char *)v);
}

static void read_dead_letters(const fixture_t *f, const char *topic, dead_t *d)
{
    rd_kafka_t *rk = client(f, RD_KAFKA_CONSUMER, "it-dlq-reader");
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

static void poison_goes_to_dlq_and_the_rest_is_handled(void **state)
{
    fixture_t *f = *state;
    tctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_stats_t s;
    char want[16];
    dead_t d;
    kfk_consumer_t *c;

    /* one key: one partition, so "behind it" is well defined */
    produce(f, "kfk-it.poison", "p", 10, "order-1", 4);
    c = consumer(f, "kfk-it.poison", "it-poison", t);
    drive(c, t, 10, 30000);
    for (size_t i = 0; i < 10; i++) {
        char id[16];
        snprintf(id, sizeof id, "p-%zu", i);
        assert_string_equal(t->seen[i].id, id); /* in order, each once */
        assert_int_equal(t->seen[i].verdict, i == 4 ? KFK_POISON : KFK_HANDLED);
    }
    kfk_consumer_stats(c, &s);
    assert_int_equal(s.dead_lettered, 1);
    assert_int_equal(s.handled, 9);
    assert_int_equal(s.retries, 0);
    close_free(c);

    read_dead_letters(f, "kfk-it.poison.dlq", &d);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.key, "order-1");
    assert_string_equal(d.value, "poison");
    assert_string_equal(d.ce_id, "p-4");
    assert_string_equal(d.x_test, "kept");
    assert_string_equal(d.reason, "undecodable: test poison");
    assert_string_equal(d.topic, "kfk-it.poison");
    snprintf(want, sizeof want, "%d", (int)t->seen[4].partition);
    assert_string_equal(d.partition, want);
    snprintf(want, sizeof want, "%lld", (long long)t->seen[4].offset);
    assert_string_equal(d.offset, want);
    assert_string_equal(d.group, "it-poison");
    assert_int_equal(strlen(d.time), 24); /* 2026-12-03T10:40:12.345Z */
    fprintf(stderr, "[kfk] dead letter: %s [%s] offset %s, reason \"%s\", at %s\n", d.topic,
            d.partition, d.offset, d.reason, d.time);
    group_has_nothing_left(f, "kfk-it.poison", "it-poison", 3);
    free(t);
}

static void retry_holds_its_partition_then_succeeds(void **state)
{
    fixture_t *f = *state;
    tctx_t *t = calloc(1, sizeof *t);
    kfk_consumer_stats_t s;
    size_t first = MAX_SEEN, done = MAX_SEEN, behind = 0, others_meanwhile = 0;
    unsigned attempts = 0;
    kfk_consumer_t *c;
    const seen_t *x;

    t->retry_fails = 3;
    produce(f, "kfk-it.retry", "r", 20, NULL, -1);
    c = consumer(f, "kfk-it.retry", "it-retry", t);
    drive(c, t, 23, 30000);
    kfk_consumer_stats(c, &s);
    x = &t->seen[0];
    for (size_t i = 0; i < t->n; i++) {
        const seen_t *y = &t->seen[i];
        if (strcmp(y->id, t->retry_id) == 0) {
            first = first == MAX_SEEN ? i : first;
            assert_int_equal(y->attempt, ++attempts); /* 1, 2, 3, 4 */
            if (y->verdict == KFK_HANDLED)
                done = i;
            continue;
        }
        assert_int_equal(y->attempt, 1);
        if (y->partition == x->partition) {
            behind++;
            /* nothing behind the held record is handed before it is done */
            if (done == MAX_SEEN)
                fail_msg("%s (offset %lld) was handed while %s (offset %lld) was held", y->id,
                         (long long)y->offset, x->id, (long long)x->offset);
        } else if (done == MAX_SEEN) {
            others_meanwhile++;
        }
    }
    assert_int_equal(first, 0);
    assert_true(done != MAX_SEEN);
    assert_int_equal(count_verdict(t, t->retry_id, KFK_RETRY), 3);
    assert_int_equal(count_verdict(t, t->retry_id, KFK_HANDLED), 1);
    assert_true(behind > 0);
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "r-%d", i);
        assert_int_equal(count_verdict(t, id, KFK_HANDLED), 1);
    }
    assert_int_equal(s.retries, 3);
    assert_int_equal(s.dead_lettered, 0);
    assert_int_equal(s.handled, 20);
    assert_int_equal(s.consumed, 20);
    fprintf(stderr, "[kfk] %s held for 3 retries; %zu records waited behind it, %zu of the other "
                    "partition were handled meanwhile\n", x->id, behind, others_meanwhile);
    close_free(c);
    free(t);
}

static size_t handled_count(const tctx_t *t)
{
    size_t n = 0;

    for (size_t i = 0; i < t->n; i++)
        n += t->seen[i].verdict == KFK_HANDLED;
    return n;
}

/* Two members of one group in this process, polled in turn. */
static void drive_two(kfk_consumer_t *a, kfk_consumer_t *b, int ms)
{
    char errbuf[SVC_ERRBUF_LEN];

    for (uint64_t until = svc_now_ms() + (uint64_t)ms; svc_now_ms() < until;) {
        if (a != NULL)
            (void)kfk_consumer_poll(a, 20, NULL, errbuf);
        (void)kfk_consumer_poll(b, 20, NULL, errbuf);
    }
}

static void rebalance_moves_partitions_and_drops_retry_state(void **state)
{
    fixture_t *f = *state;
    tctx_t *ta = calloc(1, sizeof *ta), *tb = calloc(1, sizeof *tb);
    kfk_consumer_stats_t sa, sb;
    kfk_consumer_t *a, *b;
    char id[16];
    uint64_t give_up;

    ta->retry_fails = 1000000; /* A never gets its first record done */
    produce(f, "kfk-it.rebalance", "b", 20, NULL, -1);
    a = consumer(f, "kfk-it.rebalance", "it-rebalance", ta);
    wait_assigned(a, 3);
    drive(a, ta, 3, 10000); /* held, and retried: the backoff is 100-400 ms */
    b = consumer(f, "kfk-it.rebalance", "it-rebalance", tb);
    /* cooperative-sticky: B gets a share, A keeps the rest */
    give_up = svc_now_ms() + (uint64_t)it_ms(20000);
    do {
        drive_two(a, b, 200);
        kfk_consumer_stats(a, &sa);
        kfk_consumer_stats(b, &sb);
    } while ((sb.n_partitions == 0 || sa.n_partitions + sb.n_partitions != 3) &&
             svc_now_ms() < give_up);
    fprintf(stderr, "[kfk] rebalance: A has %u partitions, B %u\n", sa.n_partitions,
            sb.n_partitions);
    assert_true(sb.n_partitions >= 1 && sa.n_partitions >= 1);
    assert_int_equal(sa.n_partitions + sb.n_partitions, 3);
    drive_two(a, b, 500);
    /* The held record is not done: B gets it, either in that rebalance (its
     * partition moved: A dropped it on revoke) or now, when A leaves. */
    close_free(a);
    give_up = svc_now_ms() + (uint64_t)it_ms(20000);
    do {
        drive_two(NULL, b, 200);
        kfk_consumer_stats(b, &sb);
    } while ((handled_count(ta) + handled_count(tb) < 20 || sb.n_partitions != 3) &&
             svc_now_ms() < give_up);
    drive_two(NULL, b, 300);
    kfk_consumer_stats(b, &sb);
    assert_int_equal(sb.n_partitions, 3);
    for (int i = 0; i < 20; i++) {
        snprintf(id, sizeof id, "b-%d", i);
        /* exactly once across the two: every commit was synchronous */
        if (count_verdict(ta, id, KFK_HANDLED) + count_verdict(tb, id, KFK_HANDLED) != 1)
            fail_msg("%s handled %zu times by A, %zu by B", id, count_verdict(ta, id, KFK_HANDLED),
                     count_verdict(tb, id, KFK_HANDLED));
    }
    assert_int_equal(count_verdict(ta, ta->retry_id, KFK_HANDLED), 0);
    assert_int_equal(count_verdict(tb, ta->retry_id, KFK_HANDLED), 1);
    assert_int_equal(sb.dead_lettered, 0);
    fprintf(stderr, "[kfk] A handled %zu and held %s for %zu attempts; B handled %llu, %s among "
                    "them (attempt 1 there)\n", handled_count(ta),
            ta->retry_id, count_verdict(ta, ta->retry_id, KFK_RETRY),
            (unsigned long long)sb.handled, ta->retry_id);
    close_free(b);
    free(ta);
    free(tb);
}

/* ------------------------------------------------------------------------
 * Crash: kill -9 between the handler's effect and the offset commit
 * ------------------------------------------------------------------------ */
static spawn_proc_t *start_helper(const fixture_t *f, const char *out, const char *hang)
{
    char brokers[64], file[600], errbuf[SVC_ERRBUF_LEN] = "";
    const char *env[] = {brokers, "KFK_IT_TOPIC=kfk-it.crash", "KFK_IT_GROUP=it-crash", file,
                         hang, NULL};
    spawn_opts_t o;
    spawn_proc_t *p = NULL;

    snprintf(brokers, sizeof brokers, "KFK_IT_BROKERS=%s", f->kafka.brokers);
    snprintf(file, sizeof file, "KFK_IT_OUT=%s", out);
    spawn_opts_init(&o);
    o.path = getenv("KFK_IT_CONSUMER_BIN");
    assert_non_null(o.path);
    o.env = env;
    if (spawn_start(&o, &p, errbuf) != SVC_OK)
        fail_msg("start kfk_it_consumer: %s", errbuf);
    return p;
}

/* The ids in the file, one per line: how often id occurs; *lines gets the total. */
static int occurrences(const char *path, const char *id, int *lines)
{
    char line[128];
    FILE *fp = fopen(path, "r");
    int n = 0;

    *lines = 0;
    while (fp != NULL && fgets(line, sizeof line, fp) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        (*lines)++;
        n += id != NULL && strcmp(line, id) == 0;
    }
    if (fp != NULL)
        fclose(fp);
    return n;
}

static void kill9_after_effect_redelivers_that_record(void **state)
{
    fixture_t *f = *state;
    char out[512], hung[64] = "", *log, *at;
    spawn_proc_t *a, *b;
    int lines = 0, ws = -1;
    uint64_t t0;

    snprintf(out, sizeof out, "%s/crash-ids.txt", getenv("RELAY_IT_RUN_DIR"));
    unlink(out);
    produce(f, "kfk-it.crash", "c", 20, NULL, -1);
    a = start_helper(f, out, "KFK_IT_HANG_AT=8");
    if (spawn_log_wait(a, "hanging at ", it_ms(30000)) != SVC_OK) {
        spawn_log_dump(a, 40);
        fail_msg("the first consumer never reached its 8th record");
    }
    log = spawn_log_read(a);
    at = log != NULL ? strstr(log, "hanging at ") : NULL;
    assert_non_null(at);
    sscanf(at + strlen("hanging at "), "%63s", hung);
    free(log);
    assert_int_equal(occurrences(out, hung, &lines), 1);
    assert_int_equal(lines, 8);
    spawn_signal(a, SIGKILL);
    assert_int_equal(spawn_wait_exit(a, 5000, &ws), SVC_OK);
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    spawn_free(a);

    t0 = svc_now_ms();
    b = start_helper(f, out, "KFK_IT_HANG_AT=0");
    for (uint64_t give_up = t0 + (uint64_t)it_ms(40000); svc_now_ms() < give_up;) {
        (void)occurrences(out, NULL, &lines);
        if (lines >= 21)
            break;
        usleep(50000);
    }
    fprintf(stderr, "[kfk] killed at %s; the next member had all 20 (%d lines) %llu ms later\n",
            hung, lines, (unsigned long long)(svc_now_ms() - t0));
    usleep(500000); /* any further (wrong) redelivery would show now */
    spawn_signal(b, SIGTERM);
    if (spawn_wait_exit(b, it_ms(20000), &ws) != SVC_OK || !WIFEXITED(ws) ||
        WEXITSTATUS(ws) != 0) {
        spawn_log_dump(b, 40);
        fail_msg("the second consumer did not exit 0 after SIGTERM");
    }
    spawn_free(b);
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "c-%d", i);
        /* at least once; and only the record whose commit was lost, twice */
        assert_int_equal(occurrences(out, id, &lines), strcmp(id, hung) == 0 ? 2 : 1);
    }
    assert_int_equal(lines, 21);
}

static int group_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);

    t_start = svc_now_ms();
    if (f == NULL || rly_it_kafka(&f->kafka, "start") != SVC_OK) {
        free(f);
        return -1;
    }
    fprintf(stderr, "[kfk] broker up on %s in %llu ms\n", f->kafka.brokers,
            (unsigned long long)(svc_now_ms() - t_start));
    create_topics(f);
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    fixture_t *f = *state;

    if (f != NULL) {
        rly_it_kafka_cleanup(&f->kafka);
        free(f);
    }
    fprintf(stderr, "[kfk] all done in %llu ms\n", (unsigned long long)(svc_now_ms() - t_start));
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_record_once_then_committed),
        cmocka_unit_test(poison_goes_to_dlq_and_the_rest_is_handled),
        cmocka_unit_test(retry_holds_its_partition_then_succeeds),
        cmocka_unit_test(rebalance_moves_partitions_and_drops_retry_state),
        cmocka_unit_test(kill9_after_effect_redelivers_that_record),
    };
    return cmocka_run_group_tests_name("kfk_consumer_it", tests, group_setup, group_teardown);
}
