/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_relay.c - the outbox relay end to end, on a real Kafka broker
 * (deploy/local/kafka.sh) and the project's Postgres, with the real order,
 * catalog and relay binaries:
 *   - every committed order is on shopmicro.orders.v1 exactly once, keyed by
 *     its id, with the CloudEvents headers and a decodable OrderCreated, and
 *     no outbox row is left unpublished;
 *   - Kafka stopped: orders still succeed, their rows stay unpublished, the
 *     relay logs the outage once; Kafka back: the backlog drains;
 *   - an idle relay (no rows) notices a kill -9 of Kafka and its return by
 *     itself: /readyz 503 within seconds, 200 again after the restart;
 *   - kill -9 of the relay mid-backlog, restart: every row published, a
 *     duplicate only ever with the same ce_id;
 *   - two relays at once: every row published once, each key's events in
 *     the order they were written;
 *   - a row Kafka refuses for good is copied to outbox_dead_letters and
 *     passed, and its shard goes on;
 *   - with 20,000 published rows kept, the relay's reads never scan the
 *     whole outbox (index ranges only);
 *   - a transaction open in another database holds no event back; an older
 *     one of this database holds its shard's later rows until it commits;
 *   - a session's bytea_output, TimeZone and DateStyle change nothing published;
 *   - retention deletes published rows past RELAY_RETENTION_S, never an
 *     unpublished one, however old.
 * The tests share one broker, one order stack and one relay, in this order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "relay_it.h"
#include "shopmicro/events/v1/events.pb-c.h"

#define PUBLISHED   "SELECT count(*) FROM outbox WHERE id NOT IN (SELECT id FROM outbox_pending)"
#define UNPUBLISHED "SELECT count(*) FROM outbox_pending"
#define DRAIN_MS    60000

typedef struct fixture {
    ord_it_t *ord;
    rly_it_kafka_t kafka;
    spawn_proc_t *relay;
    int admin_port; /* the main relay's /metrics /readyz */
    char product_a[37], product_b[37];
} fixture_t;

/* The main relay's /metrics page, and one sample of it. */
static double metric(fixture_t *f, const char *name)
{
    static char page[16384];

    assert_int_equal(rly_it_http_get(f->admin_port, "/metrics", page, sizeof page), 200);
    return rly_it_metric(page, name);
}

/* Gauges are refreshed by the relay's loop: wait up to ms for one to reach want. */
static void wait_metric_within(fixture_t *f, const char *name, double want, int ms)
{
    uint64_t give_up = svc_now_ms() + (uint64_t)it_ms(ms);

    while (metric(f, name) != want && svc_now_ms() < give_up)
        ord_it_sleep_ms(50);
    if (metric(f, name) != want) {
        spawn_log_dump(f->relay, 20);
        fail_msg("%s is %g, not %g", name, metric(f, name), want);
    }
}

static void wait_metric(fixture_t *f, const char *name, double want)
{
    wait_metric_within(f, name, want, 5000);
}

static int readyz(fixture_t *f, char *body, size_t cap)
{
    return rly_it_http_get(f->admin_port, "/readyz", body, cap);
}

static int group_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    static char admin[64];
    const char *extra[] = {admin, NULL};

    *state = f;
    if (f == NULL || rly_it_group_up(&f->kafka, &f->ord, f->product_a, f->product_b) != 0)
        return -1;
    f->admin_port = spawn_free_port();
    snprintf(admin, sizeof admin, "RELAY_ADMIN_LISTEN=127.0.0.1:%d", f->admin_port);
    return rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, extra, &f->relay) == SVC_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    fixture_t *f = *state;
    int rc = rly_it_group_down(&f->kafka, &f->ord, &f->relay);

    free(f);
    return rc;
}

/* Places n orders (each must succeed); their ids go in ids[n][37]. */
static void place(fixture_t *f, int n, char (*ids)[37])
{
    it_item_t items[2] = {{f->product_a, 2}, {f->product_b, 1}};
    it_created_t *c = NULL;
    rpc_result_t res;

    for (int i = 0; i < n; i++) {
        it_order_create(f->ord->ord_ch, "cust-relay", items, 2, NULL, 0, &c, &res);
        IT_ASSERT_CODE(res, SVC_OK);
        snprintf(ids[i], 37, "%s", c->id);
        it_free(c);
    }
}

static void wait_published(fixture_t *f, int64_t want)
{
    int64_t last = -1;

    if (pgtest_wait_int_at_least(f->ord->ord_db.dsn, PUBLISHED, want, it_ms(DRAIN_MS), &last,
                                 SVC_ERRBUF_SCRATCH) != SVC_OK) {
        spawn_log_dump(f->relay, 40);
        fail_msg("%lld rows published, expected %lld", (long long)last, (long long)want);
    }
}

/* The records whose key is id: how many, and (asserted) all with one ce_id. */
static size_t records_of(const rly_it_record_t *r, size_t n, const char *id, size_t *first)
{
    size_t count = 0;

    for (size_t i = 0; i < n; i++) {
        if (strcmp(r[i].key, id) != 0)
            continue;
        if (count++ == 0)
            *first = i;
        else
            assert_string_equal(r[i].id, r[*first].id); /* a duplicate, never another event */
    }
    return count;
}

/* Every header and the payload of the one event of order id. */
static void check_event(fixture_t *f, const rly_it_record_t *r, const char *id)
{
    char sql[512], want[256], got[256];
    Shopmicro__Events__V1__OrderCreated *ev;

    assert_string_equal(r->specversion, "1.0");
    assert_string_equal(r->type, "shopmicro.order.v1.OrderCreated");
    assert_string_equal(r->source, "/shopmicro/order");
    assert_string_equal(r->content_type, "application/protobuf");
    assert_true(r->request_id[0] != '\0'); /* pkg/rpc makes one up when the call has none */
    snprintf(sql, sizeof sql,
             "SELECT concat_ws('|', x.id, x.request_id, to_char(x.created_at AT TIME ZONE 'UTC', "
             "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), o.total_cents) FROM outbox x JOIN orders o "
             "ON o.id::text = x.aggregate_id WHERE x.aggregate_id = '%s'",
             id);
    ord_it_text(f->ord, sql, want, sizeof want);
    snprintf(got, sizeof got, "%s|%s|%s|%d", r->id, r->request_id, r->time, 2 * 1299 + 250);
    assert_string_equal(got, want);
    ev = shopmicro__events__v1__order_created__unpack(NULL, r->value_len, r->value);
    assert_non_null(ev);
    assert_string_equal(ev->order_id, id);
    assert_string_equal(ev->customer_id, "cust-relay");
    assert_int_equal(ev->n_items, 2);
    assert_string_equal(ev->items[0]->product_id, f->product_a);
    assert_int_equal(ev->items[0]->quantity, 2);
    assert_int_equal(ev->items[0]->unit_price_cents, 1299);
    assert_string_equal(ev->items[1]->product_id, f->product_b);
    assert_int_equal(ev->total_cents, 2 * 1299 + 250);
    assert_string_equal(ev->created_at, r->time);
    shopmicro__events__v1__order_created__free_unpacked(ev, NULL);
}

/* Consumes the topic; each of ids is on it (exactly once when `exact`),
 * duplicates only with one ce_id; returns how many duplicates there were. */
static size_t check_topic(fixture_t *f, char (*ids)[37], int n, bool exact)
{
    rly_it_record_t *r = NULL;
    size_t nr = 0, dups = 0, first = 0;

    assert_int_equal(rly_it_consume(&f->kafka, it_ms(30000), &r, &nr), SVC_OK);
    for (int i = 0; i < n; i++) {
        size_t c = records_of(r, nr, ids[i], &first);
        if (c == 0 || (exact && c != 1))
            fail_msg("order %s is on the topic %zu times", ids[i], c);
        check_event(f, &r[first], ids[i]);
        dups += c - 1;
    }
    rly_it_records_free(r, nr);
    return dups;
}

static void every_order_exactly_once(void **state)
{
    fixture_t *f = *state;
    enum { N = 60 };
    char ids[N][37];
    uint64_t t0 = svc_now_ns();
    char one[1][37];
    double ms;

    place(f, N, ids);
    wait_published(f, N);
    printf("[relay] %d orders placed and all published in %.0f ms\n", N, ord_it_ms_since(t0));
    /* The counter is bumped after the commit the test just saw. */
    wait_metric(f, "shopmicro_relay_published_total", N);
    /* Woken by the order's NOTIFY, not by the poll (60 s here). */
    t0 = svc_now_ns();
    place(f, 1, one);
    wait_published(f, N + 1);
    ms = ord_it_ms_since(t0);
    printf("[relay] one order: CreateOrder sent -> row marked published in %.1f ms\n", ms);
    assert_true(ms < it_ms(2000));
    assert_int_equal(ord_it_int(f->ord, UNPUBLISHED), 0);
    wait_metric(f, "shopmicro_relay_published_total", N + 1);
    assert_int_equal((int)metric(f, "shopmicro_relay_produce_errors_total"), 0);
    assert_true(metric(f, "shopmicro_relay_batches_total") >= 2);
    assert_int_equal((int)metric(f, "shopmicro_relay_batch_size_sum"), N + 1);
    wait_metric(f, "shopmicro_relay_backlog_rows", 0);
    assert_true(metric(f, "shopmicro_relay_oldest_unpublished_age_seconds") == 0);
    check_topic(f, ids, N, true);
    check_topic(f, one, 1, true);
}

static void kafka_down_orders_buffer_then_drain(void **state)
{
    fixture_t *f = *state;
    enum { N = 20 };
    char ids[N][37], body[1024];
    int64_t before = ord_it_int(f->ord, PUBLISHED);

    assert_int_equal(rly_it_kafka(&f->kafka, "stop"), SVC_OK);
    place(f, N, ids); /* the outbox is the buffer: no order fails */
    assert_int_equal(spawn_log_wait(f->relay, "kafka unavailable", it_ms(20000)), SVC_OK);
    /* Several failed batches and backoffs later (or one batch still
     * waiting for reports librdkafka holds, see wait_reports), and the idle
     * probe's view before it, still one line. */
    ord_it_sleep_ms(it_ms(5000));
    assert_int_equal(ord_it_int(f->ord, UNPUBLISHED), N);
    assert_int_equal(spawn_log_count(f->relay, "kafka unavailable"), 1);
    assert_int_equal(readyz(f, body, sizeof body), 503);
    printf("[relay] /readyz with Kafka stopped: %s", body);
    assert_non_null(strstr(body, "{\"name\":\"kafka\",\"ok\":false"));
    assert_non_null(strstr(body, "{\"name\":\"database\",\"ok\":true"));
    assert_int_equal((int)metric(f, "shopmicro_relay_kafka_up"), 0);
    assert_int_equal((int)metric(f, "shopmicro_relay_db_up"), 1);
    assert_int_equal((int)metric(f, "shopmicro_relay_backlog_rows"), N);
    assert_true(metric(f, "shopmicro_relay_oldest_unpublished_age_seconds") >= 4.0);
    /* The batch's messages either failed (message.timeout.ms) or are held
     * by the idempotent producer until the broker is back: both are seen,
     * some seconds after the claim (on a loaded machine more than the 5 s
     * above; the idle probe may have said "kafka unavailable" first). */
    {
        uint64_t give_up = svc_now_ms() + (uint64_t)it_ms(20000);
        while (metric(f, "shopmicro_relay_produce_errors_total") <= 0 &&
               spawn_log_count(f->relay, "delivery reports overdue") == 0 && svc_now_ms() < give_up)
            ord_it_sleep_ms(100);
    }
    assert_true(metric(f, "shopmicro_relay_produce_errors_total") > 0 ||
                spawn_log_count(f->relay, "delivery reports overdue") == 1);
    assert_int_equal(rly_it_kafka(&f->kafka, "start"), SVC_OK);
    wait_published(f, before + N);
    assert_int_equal(spawn_log_wait(f->relay, "kafka available again", it_ms(5000)), SVC_OK);
    assert_int_equal(readyz(f, body, sizeof body), 200);
    assert_non_null(strstr(body, "\"status\":\"ok\""));
    assert_int_equal((int)metric(f, "shopmicro_relay_kafka_up"), 1);
    wait_metric(f, "shopmicro_relay_backlog_rows", 0);
    assert_int_equal(spawn_log_count(f->relay, "kafka available again"), 1);
    check_topic(f, ids, N, false);
}

/* Polls /readyz until it answers want; the ms it took (fails after limit_ms). */
static double wait_readyz(fixture_t *f, int want, int limit_ms)
{
    uint64_t t0 = svc_now_ns(), give_up = svc_now_ms() + (uint64_t)it_ms(limit_ms);
    char body[1024];
    int got;

    while ((got = readyz(f, body, sizeof body)) != want && svc_now_ms() < give_up)
        ord_it_sleep_ms(50);
    if (got != want)
        fail_msg("/readyz %d after %d ms, expected %d: %s", got, it_ms(limit_ms), want, body);
    return ord_it_ms_since(t0);
}

/* No batch runs: only the relay's idle probe can see Kafka go and come. */
static void idle_relay_notices_kafka_kill_and_restart(void **state)
{
    fixture_t *f = *state;
    double down_ms, up_ms, batches;
    size_t down_lines, up_lines;
    uint64_t t0;

    wait_metric(f, "shopmicro_relay_backlog_rows", 0);
    (void)wait_readyz(f, 200, 5000);
    batches = metric(f, "shopmicro_relay_batches_total");
    /* Lines of the earlier tests (the probe may have seen test 2's outage
     * first) stay in the log: count the new ones. */
    down_lines = spawn_log_count(f->relay, "no broker answers while idle");
    up_lines = spawn_log_count(f->relay, "kafka available again: a broker answers");
    t0 = svc_now_ns();
    assert_int_equal(rly_it_kafka(&f->kafka, "kill"), SVC_OK);
    printf("[relay] kafka.sh kill took %.0f ms\n", ord_it_ms_since(t0));
    down_ms = wait_readyz(f, 503, 5000);
    printf("[relay] idle relay: /readyz 503 %.0f ms after the broker's ports closed\n", down_ms);
    assert_int_equal((int)metric(f, "shopmicro_relay_kafka_up"), 0);
    assert_int_equal(spawn_log_count(f->relay, "no broker answers while idle"), down_lines + 1);
    t0 = svc_now_ns();
    assert_int_equal(rly_it_kafka(&f->kafka, "start"), SVC_OK);
    printf("[relay] kafka.sh start after kill -9 took %.0f ms\n", ord_it_ms_since(t0));
    up_ms = wait_readyz(f, 200, 30000);
    printf("[relay] idle relay: /readyz 200 %.0f ms after kafka.sh start returned\n", up_ms);
    assert_int_equal((int)metric(f, "shopmicro_relay_kafka_up"), 1);
    assert_int_equal(spawn_log_count(f->relay, "kafka available again: a broker answers"),
                     up_lines + 1);
    assert_true(metric(f, "shopmicro_relay_batches_total") == batches); /* no batch ran */
}

static void kill9_mid_backlog_loses_nothing(void **state)
{
    fixture_t *f = *state;
    enum { N = 400 };
    static char ids[N][37];
    const char *slow[] = {"RELAY_BATCH_SIZE=5", NULL};
    int64_t before = ord_it_int(f->ord, PUBLISHED), left;

    assert_int_equal(rly_it_relay_stop(&f->relay, NULL), 0);
    place(f, N, ids);
    assert_int_equal(rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, slow, &f->relay), SVC_OK);
    wait_published(f, before + 50);
    rly_it_relay_kill(&f->relay);
    left = ord_it_int(f->ord, UNPUBLISHED);
    printf("[relay] killed with %lld of %d rows unpublished\n", (long long)left, N);
    assert_true(left > 0);
    assert_int_equal(rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, NULL, &f->relay), SVC_OK);
    wait_published(f, before + N);
    printf("[relay] after restart: all %d published, %zu duplicates (same ce_id)\n", N,
           check_topic(f, ids, N, false));
}

/* Two relays of one database share its 8 shards (lease.h): the first takes
 * all, gives half up on its next tick once it counts the second, which takes
 * them on its own. */
static void wait_halves(spawn_proc_t *a, spawn_proc_t *b)
{
    if (spawn_log_wait(b, "leases: 4 of 8 shards", it_ms(10000)) != SVC_OK ||
        spawn_log_wait(a, "leases: 4 of 8 shards", it_ms(10000)) != SVC_OK) {
        spawn_log_dump(a, 20);
        spawn_log_dump(b, 20);
        fail_msg("the two relays did not split the shards 4 and 4");
    }
}

/* Rows of 40 aggregates with 5 events each, written event-major (every
 * aggregate's event 1, then every event 2, ...), relayed by two relays
 * reading batches of 3, each from its half of the shards: each key's values
 * must come out 1..5 in order. */
static void two_relays_keep_per_key_order(void **state)
{
    fixture_t *f = *state;
    const char *small[] = {"RELAY_BATCH_SIZE=3", "RELAY_NAME=relay-b", NULL};
    spawn_proc_t *second = NULL;
    int64_t before = ord_it_int(f->ord, PUBLISHED);
    rly_it_record_t *r = NULL;
    size_t nr = 0;
    long pub_a = 0, pub_b = 0;
    char sql[1024], prefix[32];

    assert_int_equal(rly_it_relay_stop(&f->relay, NULL), 0);
    assert_int_equal(rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, small, &f->relay), SVC_OK);
    assert_int_equal(rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, small, &second), SVC_OK);
    wait_halves(f->relay, second);
    snprintf(prefix, sizeof prefix, "seq-%d-", (int)getpid());
    snprintf(sql, sizeof sql,
             "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, topic, "
             "ce_type, ce_source, payload_pb, request_id) SELECT gen_random_uuid(), 'test', "
             "'%s' || a, 'Seq', '{}', '" RLY_IT_TOPIC "', 'shopmicro.test.v1.Seq', '/test', "
             "convert_to(e::text, 'UTF8'), '' FROM generate_series(1, 5) e, "
             "generate_series(1, 40) a ORDER BY e, a; SELECT pg_notify('outbox', '')",
             prefix);
    assert_int_equal(pgtest_exec(f->ord->ord_db.dsn, sql, SVC_ERRBUF_SCRATCH), SVC_OK);
    wait_published(f, before + 200);
    assert_int_equal(rly_it_relay_stop(&second, &pub_b), 0);
    assert_int_equal(rly_it_relay_stop(&f->relay, &pub_a), 0);
    printf("[relay] two relays: %ld + %ld rows\n", pub_a, pub_b);
    assert_true(pub_a > 0 && pub_b > 0);
    assert_int_equal(rly_it_consume(&f->kafka, it_ms(30000), &r, &nr), SVC_OK);
    for (int a = 1; a <= 40; a++) {
        char key[64];
        int next = 1;
        snprintf(key, sizeof key, "%s%d", prefix, a);
        for (size_t i = 0; i < nr; i++) {
            if (strcmp(r[i].key, key) != 0)
                continue;
            if (r[i].value_len != 1 || r[i].value[0] != '0' + next)
                fail_msg("key %s: event %.*s where %d was next", key, (int)r[i].value_len,
                         (const char *)r[i].value, next);
            next++;
        }
        assert_int_equal(next, 6);
    }
    rly_it_records_free(r, nr);
    assert_int_equal(rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, NULL, &f->relay), SVC_OK);
}

#define ALL_SHARDS "leases: 8 of 8 shards (0,1,2,3,4,5,6,7)"

/* A relay killed with -9 holds its leases no longer than its session: the
 * other relay takes its shards on its next tick and publishes their rows. */
static void killed_relay_hands_over_its_shards(void **state)
{
    fixture_t *f = *state;
    const char *named[] = {"RELAY_NAME=relay-b", NULL};
    spawn_proc_t *second = NULL;
    int64_t before = ord_it_int(f->ord, PUBLISHED);
    enum { N = 100 };
    char ids[N][37];
    uint64_t t0;

    size_t all = spawn_log_count(f->relay, ALL_SHARDS);
    uint64_t give_up;

    assert_int_equal(rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, named, &second), SVC_OK);
    wait_halves(f->relay, second);
    rly_it_relay_kill(&second);
    t0 = svc_now_ms();
    place(f, N, ids);
    give_up = svc_now_ms() + (uint64_t)it_ms(10000);
    while (spawn_log_count(f->relay, ALL_SHARDS) == all && svc_now_ms() < give_up)
        usleep(20 * 1000);
    if (spawn_log_count(f->relay, ALL_SHARDS) == all) {
        spawn_log_dump(f->relay, 20);
        fail_msg("the surviving relay did not take the killed one's shards");
    }
    wait_published(f, before + N);
    printf("[relay] one of two relays killed: the other holds all 8 shards and published the "
           "%d orders %llu ms after the kill\n",
           N, (unsigned long long)(svc_now_ms() - t0));
}

static void exec_sql(fixture_t *f, const char *sql)
{
    char errbuf[SVC_ERRBUF_LEN];

    if (pgtest_exec(f->ord->ord_db.dsn, sql, errbuf) != SVC_OK)
        fail_msg("%s: %s", sql, errbuf);
}

/* A row Kafka refuses for good (2 MB: above the producer's message.max.bytes)
 * is copied to outbox_dead_letters and passed; the event after it on the
 * same key, so the same shard, is published; Kafka is not counted down. */
static void refused_row_is_buried_and_its_shard_goes_on(void **state)
{
    fixture_t *f = *state;
    static const char big[] = "deadbeef-0000-4000-8000-000000000001",
                      next[] = "deadbeef-0000-4000-8000-000000000002",
                      key[] = "deadbeef-0000-4000-8000-0000000000ff";
    char admin[64], sql[1024];
    const char *extra[] = {admin, NULL};
    int64_t before = ord_it_int(f->ord, PUBLISHED) + 1;
    rly_it_record_t *r = NULL;
    size_t nr = 0, on_topic = 0;

    assert_int_equal(rly_it_relay_stop(&f->relay, NULL), 0);
    snprintf(admin, sizeof admin, "RELAY_ADMIN_LISTEN=127.0.0.1:%d", f->admin_port);
    assert_int_equal(rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, extra, &f->relay), SVC_OK);
    snprintf(
        sql, sizeof sql,
        "BEGIN; INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, "
        "topic, ce_type, ce_source, payload_pb, request_id) VALUES "
        "('%s', 'order', '%s', 'OrderCreated', '{}', '" RLY_IT_TOPIC "', "
        "'shopmicro.order.v1.OrderCreated', 'test', decode(repeat('ab', 2000000), 'hex'), ''), "
        "('%s', 'order', '%s', 'OrderCreated', '{}', '" RLY_IT_TOPIC "', "
        "'shopmicro.order.v1.OrderCreated', 'test', '\\x0a0131', ''); "
        "SELECT pg_notify('outbox', ''); COMMIT",
        big, key, next, key);
    exec_sql(f, sql);
    wait_published(f, before + 1); /* both passed: the refused one and the next */
    wait_metric(f, "shopmicro_relay_dead_letters_total", 1);
    assert_int_equal(ord_it_int(f->ord, UNPUBLISHED), 0);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM outbox_dead_letters WHERE id = '%s' AND "
             "reason ILIKE '%%too large%%' AND octet_length(payload_pb) = 2000000 AND "
             "aggregate_id = '%s'",
             big, key);
    assert_int_equal(ord_it_int(f->ord, sql), 1);
    assert_int_equal(ord_it_int(f->ord, "SELECT count(*) FROM outbox_dead_letters"), 1);
    assert_int_equal(spawn_log_count(f->relay, "refused by Kafka for good"), 1);
    assert_int_equal(spawn_log_count(f->relay, "kafka unavailable"), 0);
    assert_int_equal((int)metric(f, "shopmicro_relay_kafka_up"), 1);
    assert_int_equal((int)metric(f, "shopmicro_relay_produce_errors_total"), 0);
    assert_int_equal((int)metric(f, "shopmicro_relay_published_total"), 1);
    assert_int_equal(rly_it_consume(&f->kafka, it_ms(30000), &r, &nr), SVC_OK);
    for (size_t i = 0; i < nr; i++) {
        if (strcmp(r[i].key, key) != 0)
            continue;
        on_topic++;
        assert_string_equal(r[i].id, next);
    }
    rly_it_records_free(r, nr);
    assert_int_equal(on_topic, 1);
    printf("[relay] a 2 MB row refused for good: buried in outbox_dead_letters, the next event "
           "of its key published\n");
}

#define OUTBOX_SCANS(kind) "SELECT " kind " FROM pg_stat_user_tables WHERE relname = 'outbox'"

/* The outbox's scan counters once the relay's backend has reported them: a
 * backend sends its counts at the end of a transaction at most once a second,
 * and the relay's lease tick ends one every second. */
static void outbox_scans(fixture_t *f, int64_t *seq, int64_t *idx)
{
    ord_it_sleep_ms(2500);
    *seq = ord_it_int(f->ord, OUTBOX_SCANS("seq_scan"));
    *idx = ord_it_int(f->ord, OUTBOX_SCANS("idx_scan"));
}

/* The relay reads its shards by index range only, whatever the planner's
 * statistics say, so a read costs the same with a week of published rows
 * kept (RELAY_RETENTION_S) as with none: never a scan of the whole outbox.
 * Here 20,000 rows published before the relay starts, no statistics on
 * them, then orders, each read by the relay on its NOTIFY. */
static void reads_never_scan_the_whole_outbox(void **state)
{
    fixture_t *f = *state;
    enum { KEPT = 20000, N = 30 };
    char ids[N][37], admin[64];
    const char *extra[] = {admin, NULL};
    int64_t seq0, idx0, seq1, idx1;

    wait_published(f, ord_it_int(f->ord, "SELECT count(*) FROM outbox"));
    assert_int_equal(rly_it_relay_stop(&f->relay, NULL), 0);
    exec_sql(f, "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, topic, "
                "ce_type, ce_source, payload_pb, request_id) SELECT gen_random_uuid(), 'order', "
                "gen_random_uuid()::text, 'OrderCreated', '{}', '" RLY_IT_TOPIC "', "
                "'shopmicro.order.v1.OrderCreated', 'test-kept', '\\x0a0131', '' "
                "FROM generate_series(1, 20000)");
    /* Published long ago: every cursor past them. */
    exec_sql(f, "UPDATE outbox_cursor c SET txid = m.txid, seq = m.seq FROM (SELECT DISTINCT ON "
                "(shard) shard, txid, seq FROM outbox ORDER BY shard, txid DESC, seq DESC) m "
                "WHERE m.shard = c.shard");
    snprintf(admin, sizeof admin, "RELAY_ADMIN_LISTEN=127.0.0.1:%d", f->admin_port);
    assert_int_equal(rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, extra, &f->relay), SVC_OK);
    outbox_scans(f, &seq0, &idx0);
    place(f, N, ids);
    wait_metric_within(f, "shopmicro_relay_published_total", N, DRAIN_MS);
    outbox_scans(f, &seq1, &idx1);
    printf("[relay] %d orders with %d published rows kept: the outbox scanned %lld times by "
           "index, %lld times whole\n",
           N, KEPT, (long long)(idx1 - idx0), (long long)(seq1 - seq0));
    assert_true(idx1 - idx0 >= N / 2); /* the relay's reads did report */
    assert_int_equal(seq1 - seq0, 0);
    check_topic(f, ids, N, true);
    exec_sql(f, "DELETE FROM outbox WHERE ce_source = 'test-kept'"); /* as retention would */
}

/* A session with a transaction left open (BEGIN, an id assigned, then sql). */
static pgtest_conn_t *open_transaction(const char *dsn, const char *sql)
{
    char errbuf[SVC_ERRBUF_LEN];
    pgtest_conn_t *c = NULL;

    if (pgtest_conn_open(dsn, &c, errbuf) != SVC_OK ||
        pgtest_conn_exec(c, "BEGIN; SELECT pg_current_xact_id()", errbuf) != SVC_OK ||
        (sql != NULL && pgtest_conn_exec(c, sql, errbuf) != SVC_OK))
        fail_msg("open transaction: %s", errbuf);
    return c;
}

/* A transaction left open in another database (the catalog's) holds none of
 * order's events: the horizon is this database's (store.c, rly_horizon).
 * With the cluster's (pg_snapshot_xmin) they waited for it to end. */
static void other_database_transaction_holds_nothing(void **state)
{
    fixture_t *f = *state;
    enum { N = 5 };
    char ids[N][37];
    int64_t before = ord_it_int(f->ord, PUBLISHED), last = 0;
    pgtest_conn_t *other = open_transaction(f->ord->cat_db.dsn, NULL);
    uint64_t t0 = svc_now_ns();

    place(f, N, ids);
    if (pgtest_wait_int_at_least(f->ord->ord_db.dsn, PUBLISHED, before + N, it_ms(10000), &last,
                                 SVC_ERRBUF_SCRATCH) != SVC_OK) {
        pgtest_conn_close(other);
        fail_msg("%lld of %d rows published while a catalog transaction is open",
                 (long long)(last - before), N);
    }
    printf("[relay] a catalog transaction open: %d orders published in %.0f ms\n", N,
           ord_it_ms_since(t0));
    pgtest_conn_close(other);
    check_topic(f, ids, N, true);
}

/* A row of key %s with value %s (hex), for topic shopmicro.orders.v1. */
#define SEQ_ROW                                                                                    \
    "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, topic, "           \
    "ce_type, ce_source, payload_pb, request_id) VALUES (gen_random_uuid(), 'order', "             \
    "'%s', 'Seq', '{}', '" RLY_IT_TOPIC "', 'shopmicro.test.v1.Seq', 'test', '\\x%s', "            \
    "''); SELECT pg_notify('outbox', '')"

/* An older transaction of this database still open holds every later row of
 * its shard: here a row A of key k written in an open transaction, then a
 * row B of k committed after it (a later id, the same shard). B waits (had
 * the cursor passed it, A would be behind the cursor when it commits: lost);
 * once A commits, both are published, A first. */
static void older_transaction_holds_later_rows(void **state)
{
    fixture_t *f = *state;
    static const char key[] = "0dd0e000-0000-4000-8000-000000000001";
    char a[512], b[512], sql[160], errbuf[SVC_ERRBUF_LEN];
    pgtest_conn_t *older;
    rly_it_record_t *r = NULL;
    size_t nr = 0, seen = 0;

    snprintf(a, sizeof a, SEQ_ROW, key, "0a0141"); /* value: field 1 "A" */
    snprintf(b, sizeof b, SEQ_ROW, key, "0a0142");
    older = open_transaction(f->ord->ord_db.dsn, a);
    exec_sql(f, b);
    ord_it_sleep_ms(it_ms(1500));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM outbox_pending WHERE aggregate_id = '%s'", key);
    assert_int_equal(ord_it_int(f->ord, sql), 1); /* B, not published: held behind A */
    if (pgtest_conn_exec(older, "COMMIT", errbuf) != SVC_OK)
        fail_msg("COMMIT: %s", errbuf);
    pgtest_conn_close(older);
    snprintf(sql, sizeof sql, "SELECT 1 - count(*) FROM outbox_pending WHERE aggregate_id = '%s'",
             key);
    assert_int_equal(pgtest_wait_int_at_least(f->ord->ord_db.dsn, sql, 1, it_ms(10000), NULL,
                                              SVC_ERRBUF_SCRATCH),
                     SVC_OK);
    assert_int_equal(rly_it_consume(&f->kafka, it_ms(30000), &r, &nr), SVC_OK);
    for (size_t i = 0; i < nr; i++) {
        if (strcmp(r[i].key, key) != 0)
            continue;
        assert_true(seen < 2);
        assert_int_equal(r[i].value_len, 3);
        assert_int_equal(r[i].value[2], seen == 0 ? 'A' : 'B');
        seen++;
    }
    rly_it_records_free(r, nr);
    assert_int_equal(seen, 2);
    printf("[relay] a row committed after an older open transaction waited for it; then both, "
           "in order\n");
}

/* The relay reads its rows in binary (services/relay/rows.h), so the
 * settings that shape text output - bytea_output, TimeZone, DateStyle, which
 * a database or role may set - change nothing it publishes. check_topic
 * compares each payload and ce_time with what was written. */
static void session_output_settings_change_nothing_published(void **state)
{
    fixture_t *f = *state;
    enum { N = 5 };
    char ids[N][37], admin[64];
    const char *escape[] = {admin,
                            "PGOPTIONS=-c bytea_output=escape -c TimeZone=Pacific/Chatham "
                            "-c DateStyle=SQL,DMY",
                            NULL};

    assert_int_equal(rly_it_relay_stop(&f->relay, NULL), 0);
    snprintf(admin, sizeof admin, "RELAY_ADMIN_LISTEN=127.0.0.1:%d", f->admin_port);
    assert_int_equal(rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, escape, &f->relay), SVC_OK);
    assert_int_equal(ord_it_int(f->ord, UNPUBLISHED), 0);
    place(f, N, ids);
    wait_published(f, ord_it_int(f->ord, "SELECT count(*) FROM outbox"));
    assert_int_equal(ord_it_int(f->ord, UNPUBLISHED), 0);
    check_topic(f, ids, N, true);
    printf("[relay] %d events read with bytea_output=escape, TimeZone=Pacific/Chatham, "
           "DateStyle=SQL,DMY: payloads and ce_time as written\n",
           N);
}

/* Retention: of the rows older than RELAY_RETENTION_S only those a cursor has
 * passed go; a row Kafka never took stays however old, and goes once it is
 * published. Last: it deletes rows the other tests count. */
static void retention_deletes_only_published_old_rows(void **state)
{
    fixture_t *f = *state;
    enum { YOUNG = 5, UNPUB = 5 };
    char young[YOUNG][37], unpub[UNPUB][37], admin[64], sql[512];
    const char *keep[] = {admin, "RELAY_RETENTION_S=3600", "RELAY_PRUNE_INTERVAL_MS=100", NULL};
    rly_it_record_t *r = NULL;
    size_t nr = 0, first = 0;
    int64_t old;

    place(f, YOUNG, young);
    wait_published(f, ord_it_int(f->ord, "SELECT count(*) FROM outbox"));
    assert_int_equal(rly_it_relay_stop(&f->relay, NULL), 0);
    snprintf(sql, sizeof sql,
             "UPDATE outbox SET created_at = created_at - interval '2 hours' "
             "WHERE aggregate_id NOT IN ('%s','%s','%s','%s','%s')",
             young[0], young[1], young[2], young[3], young[4]);
    exec_sql(f, sql);
    old = ord_it_int(f->ord,
                     "SELECT count(*) FROM outbox WHERE created_at < now() - interval '1 hour'");
    assert_true(old > 0);
    /* Two hours old and never published: Kafka is down while they wait. */
    assert_int_equal(rly_it_kafka(&f->kafka, "stop"), SVC_OK);
    place(f, UNPUB, unpub);
    exec_sql(f, "UPDATE outbox SET created_at = now() - interval '2 hours' "
                "WHERE id IN (SELECT id FROM outbox_pending)");
    snprintf(admin, sizeof admin, "RELAY_ADMIN_LISTEN=127.0.0.1:%d", f->admin_port);
    assert_int_equal(rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, keep, &f->relay), SVC_OK);
    wait_metric(f, "shopmicro_relay_pruned_total", (double)old);
    assert_int_equal(ord_it_int(f->ord, UNPUBLISHED), UNPUB);
    assert_int_equal(ord_it_int(f->ord, "SELECT count(*) FROM outbox"), YOUNG + UNPUB);
    assert_int_equal(spawn_log_wait(f->relay, "retention: deleted", it_ms(1000)), SVC_OK);
    printf("[relay] retention: %lld published rows older than 1 h deleted; %d young and %d old "
           "unpublished kept\n",
           (long long)old, YOUNG, UNPUB);
    /* Kafka back: the old rows are published, and then they go too. */
    assert_int_equal(rly_it_kafka(&f->kafka, "start"), SVC_OK);
    wait_metric_within(f, "shopmicro_relay_pruned_total", (double)(old + UNPUB), DRAIN_MS);
    assert_int_equal(ord_it_int(f->ord, "SELECT count(*) FROM outbox"), YOUNG);
    check_topic(f, young, YOUNG, true);
    /* Their rows are gone, so only their presence can be checked. */
    assert_int_equal(rly_it_consume(&f->kafka, it_ms(30000), &r, &nr), SVC_OK);
    for (int i = 0; i < UNPUB; i++)
        assert_true(records_of(r, nr, unpub[i], &first) >= 1);
    rly_it_records_free(r, nr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_order_exactly_once),
        cmocka_unit_test(kafka_down_orders_buffer_then_drain),
        cmocka_unit_test(idle_relay_notices_kafka_kill_and_restart),
        cmocka_unit_test(kill9_mid_backlog_loses_nothing),
        cmocka_unit_test(two_relays_keep_per_key_order),
        cmocka_unit_test(killed_relay_hands_over_its_shards),
        cmocka_unit_test(refused_row_is_buried_and_its_shard_goes_on),
        cmocka_unit_test(reads_never_scan_the_whole_outbox),
        cmocka_unit_test(other_database_transaction_holds_nothing),
        cmocka_unit_test(older_transaction_holds_later_rows),
        cmocka_unit_test(session_output_settings_change_nothing_published),
        cmocka_unit_test(retention_deletes_only_published_old_rows),
    };
    int rc;

    setvbuf(stdout, NULL, _IOLBF, 0);
    cat_it_global_init();
    rc = svc_test_run_group_tests_name("relay", tests, group_setup, group_teardown);
    cat_it_global_fini();
    return rc;
}
