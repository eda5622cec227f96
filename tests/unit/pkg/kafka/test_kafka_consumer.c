/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_kafka_consumer.c - pkg/kafka's consumer without a broker: option
 * defaults and validation, the verdict -> action table, the retry backoff,
 * the dead letter's topic and headers, and a consumer pointed at a closed
 * port (creating one never connects): its stats, its Prometheus text, stop.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "kafka/consumer.h"

static kfk_verdict_t never(void *ctx, const kfk_record_t *r, char *reason)
{
    return KFK_HANDLED;
}

static const char *const topics[] = {"shopmicro.orders.v1", NULL};

static void valid_opts(kfk_consumer_opts_t *o)
{
    kfk_consumer_opts_init(o);
    o->brokers = "127.0.0.1:1";
    o->group_id = "catalog";
    o->topics = topics;
    o->handler = never;
}

static void defaults_are_documented_values(void **state)
{
    kfk_consumer_opts_t o;

    kfk_consumer_opts_init(&o);
    assert_null(o.brokers);
    assert_null(o.group_id);
    assert_null(o.topics);
    assert_null(o.dlq_topic);
    assert_null(o.handler);
    assert_string_equal(o.client_id, "shopmicro");
    assert_null(o.group_instance_id); /* dynamic unless a caller names the member */
    assert_int_equal(o.session_timeout_ms, 6000);
    assert_int_equal(o.heartbeat_interval_ms, 1000);
    assert_int_equal(o.max_poll_interval_ms, 300000);
    assert_int_equal(o.handler_timeout_ms, 30000);
    assert_int_equal(o.backoff_base_ms, 100);
    assert_int_equal(o.backoff_cap_ms, 30000);
    assert_int_equal(o.max_attempts, 0);
    assert_int_equal(o.dlq_timeout_ms, 10000);
    assert_int_equal(o.lag_interval_ms, 5000);
    assert_int_equal(o.batch_max, 1);
    assert_int_equal(o.commit_interval_ms, 0);
    assert_null(o.batch);
    valid_opts(&o);
    assert_int_equal(kfk_consumer_opts_validate(&o, SVC_ERRBUF_SCRATCH), SVC_OK);
    o.max_poll_interval_ms = 80001;
    assert_int_equal(kfk_consumer_opts_validate(&o, SVC_ERRBUF_SCRATCH), SVC_OK);
    o.group_instance_id = "catalog-2.pod_a";
    assert_int_equal(kfk_consumer_opts_validate(&o, SVC_ERRBUF_SCRATCH), SVC_OK);
    o.heartbeat_interval_ms = 2000; /* a third of the 6 s session */
    assert_int_equal(kfk_consumer_opts_validate(&o, SVC_ERRBUF_SCRATCH), SVC_OK);
}

typedef void (*mutate_fn)(kfk_consumer_opts_t *o);

static void no_brokers(kfk_consumer_opts_t *o)
{
    o->brokers = "";
}
static void no_group(kfk_consumer_opts_t *o)
{
    o->group_id = NULL;
}
static void no_client(kfk_consumer_opts_t *o)
{
    o->client_id = "";
}
static void empty_dlq(kfk_consumer_opts_t *o)
{
    o->dlq_topic = "";
}
static void no_topics(kfk_consumer_opts_t *o)
{
    o->topics = NULL;
}
static void empty_topic(kfk_consumer_opts_t *o)
{
    static const char *const t[] = {"a", "", NULL};
    o->topics = t;
}
static void many_topics(kfk_consumer_opts_t *o)
{
    static const char *const t[] = {"1",  "2",  "3",  "4",  "5",  "6",  "7",  "8",  "9",
                                    "10", "11", "12", "13", "14", "15", "16", "17", NULL};
    o->topics = t;
}
static void dlq_is_consumed(kfk_consumer_opts_t *o)
{
    o->dlq_topic = "shopmicro.orders.v1";
}
static void short_session(kfk_consumer_opts_t *o)
{
    o->session_timeout_ms = 5999;
}
static void heartbeat_slow(kfk_consumer_opts_t *o)
{
    o->heartbeat_interval_ms = 2001;
}
static void heartbeat_fast(kfk_consumer_opts_t *o)
{
    o->heartbeat_interval_ms = 99;
}
static void instance_empty(kfk_consumer_opts_t *o)
{
    o->group_instance_id = "";
}
static void instance_space(kfk_consumer_opts_t *o)
{
    o->group_instance_id = "catalog 2";
}
static void instance_dots(kfk_consumer_opts_t *o)
{
    o->group_instance_id = "..";
}
static void instance_long(kfk_consumer_opts_t *o)
{
    static char id[KFK_CONSUMER_INSTANCE_ID_MAX + 2];
    memset(id, 'a', sizeof id - 1);
    o->group_instance_id = id;
}
static void handler_fast(kfk_consumer_opts_t *o)
{
    o->handler_timeout_ms = 99;
}
static void dlq_slow(kfk_consumer_opts_t *o)
{
    o->dlq_timeout_ms = 300001;
}
/* 2 x (30000 + 10000): two handler calls and their dead letters must fit */
static void poll_too_short(kfk_consumer_opts_t *o)
{
    o->max_poll_interval_ms = 80000;
}
static void base_zero(kfk_consumer_opts_t *o)
{
    o->backoff_base_ms = 0;
}
static void cap_below_base(kfk_consumer_opts_t *o)
{
    o->backoff_cap_ms = 50;
}
static void lag_fast(kfk_consumer_opts_t *o)
{
    o->lag_interval_ms = 10;
}
static void no_handler(kfk_consumer_opts_t *o)
{
    o->handler = NULL;
}
static void batch_zero(kfk_consumer_opts_t *o)
{
    o->batch_max = 0;
}
static void commit_slow(kfk_consumer_opts_t *o)
{
    o->commit_interval_ms = 60001;
}
static void batch_huge(kfk_consumer_opts_t *o)
{
    o->batch_max = KFK_CONSUMER_MAX_BATCH + 1;
}
static void batch_half(kfk_consumer_opts_t *o)
{
    static const kfk_batch_ops_t half = {NULL, NULL, NULL};
    o->batch = &half;
}

static void validation_names_the_bad_option(void **state)
{
    static const struct {
        mutate_fn f;
        const char *names;
    } cases[] = {
        {no_brokers, "brokers"},
        {no_group, "group_id"},
        {no_client, "client_id"},
        {empty_dlq, "dlq_topic"},
        {no_topics, "topics is required"},
        {empty_topic, "empty name"},
        {many_topics, "more than 16"},
        {dlq_is_consumed, "dlq_topic must not be a consumed topic"},
        {short_session, "session_timeout_ms"},
        {heartbeat_slow, "heartbeat_interval_ms"},
        {heartbeat_fast, "heartbeat_interval_ms"},
        {instance_empty, "group_instance_id must be NULL"},
        {instance_space, "group_instance_id: only"},
        {instance_dots, "group_instance_id must not be"},
        {instance_long, "1..249 characters"},
        {handler_fast, "handler_timeout_ms"},
        {dlq_slow, "dlq_timeout_ms"},
        {poll_too_short, "max_poll_interval_ms"},
        {base_zero, "backoff_base_ms"},
        {cap_below_base, "backoff_cap_ms"},
        {lag_fast, "lag_interval_ms"},
        {no_handler, "handler is required"},
        {batch_zero, "batch_max must be 1..1000"},
        {commit_slow, "commit_interval_ms must be 0..60000"},
        {batch_huge, "batch_max must be 1..1000"},
        {batch_half, "batch needs begin, commit and rollback"},
    };
    char errbuf[SVC_ERRBUF_LEN];
    kfk_consumer_opts_t o;
    kfk_consumer_t *c = (kfk_consumer_t *)&o;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        valid_opts(&o);
        cases[i].f(&o);
        errbuf[0] = '\0';
        assert_int_equal(kfk_consumer_opts_validate(&o, errbuf), SVC_EINVAL);
        if (strstr(errbuf, cases[i].names) == NULL)
            fail_msg("case %zu: \"%s\" does not name %s", i, errbuf, cases[i].names);
        /* kfk_consumer_new validates first and leaves *out NULL */
        assert_int_equal(kfk_consumer_new(&o, &c, SVC_ERRBUF_SCRATCH), SVC_EINVAL);
        assert_null(c);
    }
}

static void verdicts_map_to_actions(void **state)
{
    bool ex = true;

    assert_int_equal(kfk_verdict_action(KFK_HANDLED, 1, 0, &ex), KFK_ACT_COMMIT);
    assert_false(ex);
    assert_int_equal(kfk_verdict_action(KFK_DUPLICATE, 7, 3, &ex), KFK_ACT_COMMIT);
    assert_int_equal(kfk_verdict_action(KFK_POISON, 1, 0, &ex), KFK_ACT_DEAD_LETTER);
    assert_false(ex);
    /* unlimited: a database outage never dead-letters */
    assert_int_equal(kfk_verdict_action(KFK_RETRY, 1000000, 0, &ex), KFK_ACT_BACKOFF);
    assert_false(ex);
    assert_int_equal(kfk_verdict_action(KFK_RETRY, 2, 3, &ex), KFK_ACT_BACKOFF);
    assert_int_equal(kfk_verdict_action(KFK_RETRY, 3, 3, &ex), KFK_ACT_DEAD_LETTER);
    assert_true(ex);
    /* an answer outside the enum never skips a record */
    assert_int_equal(kfk_verdict_action((kfk_verdict_t)42, 1, 0, &ex), KFK_ACT_BACKOFF);
}

static void backoff_doubles_with_equal_jitter_and_a_cap(void **state)
{
    /* attempt 1: window 100 -> [50, 100]; attempt 4: 800 -> [400, 800] */
    for (uint64_t r = 0; r < 5000; r += 7) {
        uint64_t rnd = r * 0x9e3779b97f4a7c15ull;
        uint32_t a = kfk_backoff_ms(100, 30000, 1, rnd), d = kfk_backoff_ms(100, 30000, 4, rnd),
                 capped = kfk_backoff_ms(100, 1000, 20, rnd);
        assert_in_range(a, 50, 100);
        assert_in_range(d, 400, 800);
        assert_in_range(capped, 500, 1000);
    }
    assert_in_range(kfk_backoff_ms(100, 30000, 0, 0), 50, 100); /* 0 reads as 1 */
    assert_in_range(kfk_backoff_ms(100, 30000, 1000, UINT64_MAX), 15000, 30000);
}

static void dlq_topic_default_and_override(void **state)
{
    char out[32];

    assert_true(kfk_dlq_topic(NULL, "shopmicro.orders.v1", out, sizeof out));
    assert_string_equal(out, "shopmicro.orders.v1.dlq");
    assert_true(kfk_dlq_topic("shopmicro.dlq.v1", "shopmicro.orders.v1", out, sizeof out));
    assert_string_equal(out, "shopmicro.dlq.v1");
    assert_false(kfk_dlq_topic(NULL, "a-very-long-topic-name-indeed.v1", out, sizeof out));
}

static void header_is(const kfk_header_t *h, const char *name, const char *value)
{
    assert_string_equal(h->name, name);
    assert_int_equal(h->len, strlen(value));
    assert_memory_equal(h->value, value, h->len);
}

static void dlq_headers_keep_originals_and_name_the_record(void **state)
{
    const kfk_header_t orig[] = {{"ce_id", "id-1", 4},
                                 {"dlq-reason", "old", 3}, /* from an earlier dead letter */
                                 {"bin", "\0\1", 2}};
    kfk_dlq_info_t info = {"undecodable: truncated varint",
                           "shopmicro.orders.v1",
                           2,
                           41,
                           "catalog",
                           1796294412345}; /* 2026-12-03T10:40:12.345Z */
    kfk_dlq_text_t text;
    kfk_header_t h[KFK_MAX_HEADERS];
    size_t n = 0;

    assert_int_equal(kfk_dlq_headers(orig, 3, &info, &text, h, &n, SVC_ERRBUF_SCRATCH), SVC_OK);
    assert_int_equal(n, 8);
    header_is(&h[0], "ce_id", "id-1");
    assert_string_equal(h[1].name, "bin");
    assert_int_equal(h[1].len, 2);
    header_is(&h[2], "dlq-reason", "undecodable: truncated varint");
    header_is(&h[3], "dlq-original-topic", "shopmicro.orders.v1");
    header_is(&h[4], "dlq-original-partition", "2");
    header_is(&h[5], "dlq-original-offset", "41");
    header_is(&h[6], "dlq-consumer-group", "catalog");
    header_is(&h[7], "dlq-time", "2026-12-03T10:40:12.345Z");
}

static void dlq_headers_cap_and_defaults(void **state)
{
    kfk_header_t orig[40], h[KFK_MAX_HEADERS];
    kfk_dlq_info_t info = {NULL, "t", 0, 0, "g", 0};
    kfk_dlq_text_t text;
    char errbuf[SVC_ERRBUF_LEN];
    size_t n = 0;

    for (size_t i = 0; i < 40; i++)
        orig[i] = (kfk_header_t){"x", "v", 1};
    assert_int_equal(kfk_dlq_headers(orig, 40, &info, &text, h, &n, SVC_ERRBUF_SCRATCH), SVC_OK);
    assert_int_equal(n, KFK_MAX_HEADERS);
    header_is(&h[24], "x", "v");
    header_is(&h[25], "dlq-reason", "unspecified");
    header_is(&h[31], "dlq-dropped-headers", "15"); /* 40 - 25 kept */
    header_is(&h[30], "dlq-time", "1970-01-01T00:00:00.000Z");

    info.group = "";
    assert_int_equal(kfk_dlq_headers(orig, 0, &info, &text, h, &n, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "consumer group"));
    info.group = "g", info.topic = NULL;
    assert_int_equal(kfk_dlq_headers(orig, 0, &info, &text, h, &n, errbuf), SVC_EINVAL);
    assert_non_null(strstr(errbuf, "topic"));
}

static void consumer_without_broker_stats_metrics_stop(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "", page[8192], tiny[16];
    kfk_consumer_opts_t o;
    kfk_consumer_stats_t s;
    kfk_consumer_t *c = NULL;
    int served = 7;
    size_t need;

    valid_opts(&o);
    o.session_timeout_ms = 6000;
    assert_int_equal(kfk_consumer_new(&o, &c, errbuf), SVC_OK);
    (void)kfk_consumer_poll(c, 10, &served, errbuf);
    assert_int_equal(served, 0);
    kfk_consumer_stats(c, &s);
    assert_int_equal(s.consumed, 0);
    assert_int_equal(s.n_partitions, 0);
    assert_int_equal(s.lag_total, -1);

    need = kfk_consumer_metrics(c, "shop_x", page, sizeof page);
    assert_int_equal(need, strlen(page));
    assert_non_null(
        strstr(page, "# TYPE shop_x_consumed_total counter\nshop_x_consumed_total 0\n"));
    assert_non_null(strstr(page, "shop_x_deduplicated_total 0\n"));
    assert_non_null(strstr(page, "shop_x_dead_lettered_total 0\n"));
    assert_non_null(strstr(page, "shop_x_commit_errors_total 0\n"));
    assert_non_null(strstr(page, "shop_x_handler_seconds_bucket{le=\"0.001\"} 0\n"));
    assert_non_null(strstr(page, "shop_x_handler_seconds_bucket{le=\"+Inf\"} 0\n"));
    assert_non_null(strstr(page, "shop_x_handler_seconds_count 0\n"));
    assert_non_null(strstr(page, "shop_x_assigned_partitions 0\n"));
    assert_non_null(strstr(page, "# TYPE shop_x_lag gauge\n"));
    /* cut like snprintf: the full length back, NUL-terminated */
    assert_int_equal(kfk_consumer_metrics(c, "shop_x", tiny, sizeof tiny), need);
    assert_int_equal(strlen(tiny), sizeof tiny - 1);

    kfk_consumer_stop(c);
    assert_int_equal(kfk_consumer_poll(c, 1000, &served, errbuf), SVC_ECANCELLED);
    assert_int_equal(kfk_consumer_close(c, errbuf), SVC_OK);
    assert_int_equal(kfk_consumer_close(c, errbuf), SVC_OK); /* once is enough */
    kfk_consumer_free(c);
    kfk_consumer_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_documented_values),
        cmocka_unit_test(validation_names_the_bad_option),
        cmocka_unit_test(verdicts_map_to_actions),
        cmocka_unit_test(backoff_doubles_with_equal_jitter_and_a_cap),
        cmocka_unit_test(dlq_topic_default_and_override),
        cmocka_unit_test(dlq_headers_keep_originals_and_name_the_record),
        cmocka_unit_test(dlq_headers_cap_and_defaults),
        cmocka_unit_test(consumer_without_broker_stats_metrics_stop),
    };
    return cmocka_run_group_tests_name("kfk_consumer", tests, NULL, NULL);
}
