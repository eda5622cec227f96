/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_relay_crash.c - the outbox relay under crashes during a load, on a
 * real Kafka broker (deploy/local/kafka.sh) and the project's Postgres, with
 * the real order, catalog and relay binaries:
 *   - 2,000 orders from 4 client threads through the order service (gRPC)
 *     while the relay is killed with SIGKILL every 0.5-1.5 s and started
 *     again, most kills mid-batch (rows read that its cursors have not passed);
 *   - Kafka killed with SIGKILL during a load: every CreateOrder still
 *     succeeds, the backlog grows, /readyz says 503; the broker started
 *     again, the backlog drains.
 * After each, the topic is read back whole and held against the outbox:
 * every row is on the topic, every record is a row (its ce_id, key and
 * identical value), a row more than once only as a duplicate of itself,
 * and each key's events on one partition in the order they were written.
 *
 * What per-order order means here. An order writes one event today
 * (OrderCreated), so with orders alone "in order" would only say that a
 * key's duplicates are consecutive copies of one event. So after each
 * CreateOrder the client writes two more outbox rows for the same
 * aggregate in SQL (type shopmicro.test.v1.Seq, values "2" and "3"): their
 * seq comes after the OrderCreated row's, and the topic must show each key
 * on one partition with its events' outbox seq never decreasing from one
 * offset to the next. That is the contract of docs/events.md section 2: a
 * duplicate of event N (the relay died after Kafka had it, before the mark
 * committed) always comes before the key's event N+1.
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "relay_it.h"

#define UNPUBLISHED "SELECT count(*) FROM outbox_pending"
#define PUBLISHED   "SELECT count(*) FROM outbox WHERE id NOT IN (SELECT id FROM outbox_pending)"
#define ROWS        "SELECT count(*) FROM outbox"
#define RELAY_NAME  "relay-crash"
#define CLIENTS     4
#define MIN_KILLS   5
#define DRAIN_MS    60000

typedef struct fixture {
    ord_it_t *ord;
    rly_it_kafka_t kafka;
    spawn_proc_t *relay;
    int admin_port;
    size_t duplicates; /* on the topic after the previous test */
    char product_a[37], product_b[37];
} fixture_t;

/* ------------------------------------------------------------------------
 * The load: CLIENTS threads, each placing up to `per_client` orders, one
 * every period_ms (paced, so the load lasts long enough for the kills),
 * until `stop`. Each order is followed by its two Seq rows (see above).
 * ------------------------------------------------------------------------ */
typedef struct load load_t;

typedef struct client {
    load_t *load;
    pthread_t th;
    int ok, failed, extra_failed;
    char last_error[SVC_ERRBUF_LEN + 64];
} client_t;

struct load {
    fixture_t *f;
    int per_client, period_ms;
    atomic_bool stop;
    atomic_int running, placed;
    client_t c[CLIENTS];
};

static void *client_main(void *arg)
{
    client_t *c = arg;
    load_t *l = c->load;
    it_item_t items[2] = {{l->f->product_a, 2}, {l->f->product_b, 1}};
    char errbuf[SVC_ERRBUF_LEN] = "", sql[1024];
    pgtest_conn_t *pg = NULL;
    uint64_t next = svc_now_ms();

    if (pgtest_conn_open(l->f->ord->ord_db.dsn, &pg, errbuf) != SVC_OK) {
        snprintf(c->last_error, sizeof c->last_error, "session: %s", errbuf);
        c->extra_failed = l->per_client;
    }
    for (int i = 0; pg != NULL && i < l->per_client && !atomic_load(&l->stop); i++) {
        it_created_t *created = NULL;
        rpc_result_t res;

        if (it_order_create(l->f->ord->ord_ch, "cust-crash", items, 2, NULL, 0, &created, &res) !=
            SVC_OK) {
            c->failed++;
            snprintf(c->last_error, sizeof c->last_error, "CreateOrder: %s %s",
                     svc_err_name(res.err), res.message);
        } else {
            c->ok++;
            atomic_fetch_add(&l->placed, 1);
            snprintf(sql, sizeof sql,
                     "INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, "
                     "topic, ce_type, ce_source, payload_pb, request_id) SELECT "
                     "gen_random_uuid(), 'test', '%s', 'Seq', '{}', '" RLY_IT_TOPIC "', "
                     "'shopmicro.test.v1.Seq', '/test', convert_to(e::text, 'UTF8'), '' FROM "
                     "generate_series(2, 3) e ORDER BY e; SELECT pg_notify('outbox', '')",
                     created->id);
            it_free(created);
            if (pgtest_conn_exec(pg, sql, errbuf) != SVC_OK) {
                c->extra_failed++;
                snprintf(c->last_error, sizeof c->last_error, "Seq rows: %s", errbuf);
            }
        }
        next += (uint64_t)l->period_ms;
        while (svc_now_ms() < next && !atomic_load(&l->stop))
            ord_it_sleep_ms(2);
    }
    pgtest_conn_close(pg);
    atomic_fetch_sub(&l->running, 1);
    return NULL;
}

static void load_start(load_t *l, fixture_t *f, int per_client, int period_ms)
{
    memset(l, 0, sizeof *l);
    l->f = f;
    l->per_client = per_client;
    l->period_ms = period_ms;
    atomic_init(&l->running, CLIENTS);
    for (int k = 0; k < CLIENTS; k++) {
        l->c[k].load = l;
        assert_int_equal(pthread_create(&l->c[k].th, NULL, client_main, &l->c[k]), 0);
    }
}

/* Joins the clients (after stopping them when `stop`); every CreateOrder
 * and every Seq insert must have succeeded. Returns the orders placed. */
static int load_finish(load_t *l, bool stop)
{
    int ok = 0, failed = 0;

    if (stop)
        atomic_store(&l->stop, true);
    for (int k = 0; k < CLIENTS; k++)
        pthread_join(l->c[k].th, NULL);
    for (int k = 0; k < CLIENTS; k++) {
        ok += l->c[k].ok;
        failed += l->c[k].failed + l->c[k].extra_failed;
        if (l->c[k].last_error[0] != '\0')
            fprintf(stderr, "client %d: %d ok, %d failed, %d Seq inserts failed; last: %s\n", k,
                    l->c[k].ok, l->c[k].failed, l->c[k].extra_failed, l->c[k].last_error);
    }
    assert_int_equal(failed, 0);
    return ok;
}

/* ------------------------------------------------------------------------
 * The topic against the outbox
 * ------------------------------------------------------------------------ */
typedef struct row {
    char id[64], key[64];
    int64_t seq;
    unsigned char *pb;
    size_t pb_len, seen;
} row_t;

typedef struct verdict {
    size_t rows, records, duplicates, keys, keys_multi;
} verdict_t;

static int row_cmp(const void *a, const void *b)
{
    return strcmp(((const row_t *)a)->id, ((const row_t *)b)->id);
}

/* Every row of the outbox that has a wire form; *n rows, sorted by id. */
static row_t *load_rows(fixture_t *f, size_t *n)
{
    PGconn *pg = PQconnectdb(f->ord->ord_db.dsn);
    PGresult *r = PQexec(pg, "SELECT id::text, aggregate_id, seq, payload_pb FROM outbox "
                             "WHERE payload_pb IS NOT NULL");
    row_t *rows;

    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("outbox rows: %s", PQerrorMessage(pg));
    *n = (size_t)PQntuples(r);
    rows = calloc(*n + 1, sizeof *rows);
    assert_non_null(rows);
    for (size_t i = 0; i < *n; i++) {
        snprintf(rows[i].id, sizeof rows[i].id, "%s", PQgetvalue(r, (int)i, 0));
        snprintf(rows[i].key, sizeof rows[i].key, "%s", PQgetvalue(r, (int)i, 1));
        rows[i].seq = strtoll(PQgetvalue(r, (int)i, 2), NULL, 10);
        rows[i].pb =
            PQunescapeBytea((const unsigned char *)PQgetvalue(r, (int)i, 3), &rows[i].pb_len);
        assert_non_null(rows[i].pb);
    }
    PQclear(r);
    PQfinish(pg);
    qsort(rows, *n, sizeof *rows, row_cmp);
    return rows;
}

/* Sorts record indexes by key, then partition, then offset. */
static const rly_it_record_t *sort_recs;
static int rec_cmp(const void *a, const void *b)
{
    const rly_it_record_t *x = &sort_recs[*(const size_t *)a], *y = &sort_recs[*(const size_t *)b];
    int c = strcmp(x->key, y->key);

    if (c != 0)
        return c;
    if (x->partition != y->partition)
        return x->partition < y->partition ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void check_key_order(const rly_it_record_t *recs, const row_t *const *row_of, size_t *idx,
                            size_t nr, verdict_t *v)
{
    sort_recs = recs;
    qsort(idx, nr, sizeof *idx, rec_cmp);
    for (size_t i = 0; i < nr;) {
        size_t j = i, distinct = 1;

        for (j = i + 1; j < nr && strcmp(recs[idx[j]].key, recs[idx[i]].key) == 0; j++) {
            const rly_it_record_t *a = &recs[idx[j - 1]], *b = &recs[idx[j]];
            if (b->partition != a->partition)
                fail_msg("key %s on partitions %d and %d", b->key, a->partition, b->partition);
            if (row_of[idx[j]]->seq < row_of[idx[j - 1]]->seq)
                fail_msg("key %s, partition %d: offset %lld holds outbox seq %lld after offset "
                         "%lld held seq %lld",
                         b->key, b->partition, (long long)b->offset, (long long)row_of[idx[j]]->seq,
                         (long long)a->offset, (long long)row_of[idx[j - 1]]->seq);
            distinct += row_of[idx[j]] != row_of[idx[j - 1]];
        }
        v->keys++;
        v->keys_multi += distinct > 1;
        i = j;
    }
}

/* Reads the whole topic and holds it against the whole outbox (asserts). */
static verdict_t check_topic(fixture_t *f)
{
    verdict_t v = {0};
    rly_it_record_t *recs = NULL;
    size_t nr = 0, nrows = 0, *idx;
    row_t *rows = load_rows(f, &nrows);
    const row_t **row_of;

    assert_int_equal(rly_it_consume(&f->kafka, it_ms(60000), &recs, &nr), SVC_OK);
    idx = calloc(nr + 1, sizeof *idx);
    row_of = calloc(nr + 1, sizeof *row_of);
    assert_true(idx != NULL && row_of != NULL);
    for (size_t i = 0; i < nr; i++) {
        row_t want, *row;
        snprintf(want.id, sizeof want.id, "%s", recs[i].id);
        row = bsearch(&want, rows, nrows, sizeof *rows, row_cmp);
        if (row == NULL)
            fail_msg("partition %d offset %lld: ce_id '%s' is no outbox row's", recs[i].partition,
                     (long long)recs[i].offset, recs[i].id);
        assert_string_equal(recs[i].key, row->key);
        if (recs[i].value_len != row->pb_len || memcmp(recs[i].value, row->pb, row->pb_len) != 0)
            fail_msg("partition %d offset %lld (ce_id %s): value differs from the row's",
                     recs[i].partition, (long long)recs[i].offset, row->id);
        if (row->seen++ > 0)
            v.duplicates++;
        row_of[i] = row;
        idx[i] = i;
    }
    for (size_t i = 0; i < nrows; i++) {
        if (rows[i].seen == 0)
            fail_msg("outbox row %s (key %s, seq %lld) is not on the topic", rows[i].id,
                     rows[i].key, (long long)rows[i].seq);
    }
    check_key_order(recs, row_of, idx, nr, &v);
    v.rows = nrows;
    v.records = nr;
    for (size_t i = 0; i < nrows; i++)
        PQfreemem(rows[i].pb);
    free(rows);
    free(idx);
    free(row_of);
    rly_it_records_free(recs, nr);
    return v;
}

static void print_verdict(const char *what, const verdict_t *v)
{
    printf("[crash] %s: %zu outbox rows, %zu records on the topic, %zu duplicates (same ce_id, "
           "same value), %zu keys (%zu with several events) each on one partition in seq "
           "order\n",
           what, v->rows, v->records, v->duplicates, v->keys, v->keys_multi);
}

/* Waits until every outbox row is published. */
static void wait_drained(fixture_t *f)
{
    int64_t want = ord_it_int(f->ord, ROWS), last = -1;

    if (pgtest_wait_int_at_least(f->ord->ord_db.dsn, PUBLISHED, want, it_ms(DRAIN_MS), &last,
                                 SVC_ERRBUF_SCRATCH) != SVC_OK) {
        spawn_log_dump(f->relay, 40);
        fail_msg("%lld of %lld rows published", (long long)last, (long long)want);
    }
    assert_int_equal(ord_it_int(f->ord, UNPUBLISHED), 0);
}

/* ------------------------------------------------------------------------ */

static svc_err_t relay_start(fixture_t *f, bool admin)
{
    static char listen[64];
    const char *plain[] = {"RELAY_NAME=" RELAY_NAME, NULL};
    const char *with_admin[] = {"RELAY_NAME=" RELAY_NAME, listen, NULL};

    snprintf(listen, sizeof listen, "RELAY_ADMIN_LISTEN=127.0.0.1:%d", f->admin_port);
    return rly_it_relay_start(f->ord->ord_db.dsn, &f->kafka, admin ? with_admin : plain, &f->relay);
}

static int group_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);

    *state = f;
    if (f == NULL || rly_it_group_up(&f->kafka, &f->ord, f->product_a, f->product_b) != 0)
        return -1;
    f->admin_port = spawn_free_port();
    return relay_start(f, true) == SVC_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    fixture_t *f = *state;
    int rc = rly_it_group_down(&f->kafka, &f->ord, &f->relay);

    free(f);
    return rc;
}

/* The relay is mid-batch: it has read rows that no cursor has passed yet
 * (its gauge, set before the first produce and cleared after the advance). */
static bool relay_in_batch(const fixture_t *f)
{
    char page[16384];

    return rly_it_http_get(f->admin_port, "/metrics", page, sizeof page) == 200 &&
           rly_it_metric(page, "shopmicro_relay_rows_in_flight") > 0;
}

/* Kill intervals need spread, not quality: a seeded LCG. */
static int random_ms(unsigned *state, int lo, int hi)
{
    *state = *state * 1103515245u + 12345u;
    return lo + (int)((*state >> 8) % (unsigned)(hi - lo + 1));
}

/* 2,000 orders (500 per client, 1 every 16 ms each: about 250/s, so that
 * the load lasts some 8 s) while the relay is killed every 0.5-1.5 s: at
 * the next moment within 300 ms that it holds a claim (mid-batch), else
 * wherever it is. */
static void relay_kill9_repeatedly_during_load(void **state)
{
    fixture_t *f = *state;
    load_t l;
    int kills = 0, mid_batch = 0, placed;
    uint64_t t0 = svc_now_ms(), give_up = t0 + (uint64_t)it_ms(60000);

    unsigned seed = (unsigned)getpid();

    load_start(&l, f, 2000 / CLIENTS, 16);
    while ((atomic_load(&l.running) > 0 || kills < MIN_KILLS) && svc_now_ms() < give_up) {
        uint64_t look_until;
        bool busy = false;
        int64_t left;

        ord_it_sleep_ms(random_ms(&seed, 500, 1500));
        look_until = svc_now_ms() + 300;
        while (!(busy = relay_in_batch(f)) && svc_now_ms() < look_until)
            ord_it_sleep_ms(1);
        rly_it_relay_kill(&f->relay);
        left = ord_it_int(f->ord, UNPUBLISHED);
        kills++;
        mid_batch += busy;
        printf("[crash] kill %d at %.1f s, %s, %d orders placed, %lld rows unpublished\n", kills,
               (double)(svc_now_ms() - t0) / 1000.0, busy ? "mid-batch" : "between batches",
               atomic_load(&l.placed), (long long)left);
        assert_int_equal(relay_start(f, true), SVC_OK);
    }
    placed = load_finish(&l, false);
    assert_int_equal(placed, 2000);
    assert_true(kills >= MIN_KILLS);
    /* Most kills find a claim open while the load runs; demand a few. */
    assert_true(mid_batch >= 3);
    wait_drained(f);
    printf("[crash] %d orders (+2 Seq rows each), %d kills (%d mid-batch), all drained %.1f s "
           "after the start\n",
           placed, kills, mid_batch, (double)(svc_now_ms() - t0) / 1000.0);
    verdict_t v = check_topic(f);
    print_verdict("after the relay kills", &v);
    f->duplicates = v.duplicates;
    assert_int_equal(v.rows, 3 * placed);
    assert_true(v.keys_multi >= (size_t)placed);
}

/* A load of about 130 orders/s; the broker is killed, the backlog grows
 * while every order succeeds; the broker comes back, the backlog drains. */
static void kafka_kill9_during_load(void **state)
{
    fixture_t *f = *state;
    load_t l;
    int64_t before = ord_it_int(f->ord, ROWS), u1, u2;
    char body[1024], page[16384];
    uint64_t t0;
    int placed, st;

    assert_int_equal(rly_it_relay_stop(&f->relay, NULL), 0);
    assert_int_equal(relay_start(f, true), SVC_OK);
    load_start(&l, f, 100000, 30);
    ord_it_sleep_ms(1500);
    t0 = svc_now_ms();
    assert_int_equal(rly_it_kafka(&f->kafka, "kill"), SVC_OK);
    printf("[crash] kafka killed with %d orders placed\n", atomic_load(&l.placed));
    ord_it_sleep_ms(1000);
    u1 = ord_it_int(f->ord, UNPUBLISHED);
    ord_it_sleep_ms(2000);
    u2 = ord_it_int(f->ord, UNPUBLISHED);
    printf("[crash] broker down: %lld rows unpublished, 2 s later %lld\n", (long long)u1,
           (long long)u2);
    assert_true(u2 > u1);
    assert_int_equal(spawn_log_wait(f->relay, "kafka unavailable", it_ms(10000)), SVC_OK);
    assert_int_equal(rly_it_http_get(f->admin_port, "/readyz", body, sizeof body), 503);
    /* The gauges are refreshed at most once a second, just after the line. */
    for (uint64_t give_up = svc_now_ms() + (uint64_t)it_ms(3000);;) {
        assert_int_equal(rly_it_http_get(f->admin_port, "/metrics", page, sizeof page), 200);
        if (rly_it_metric(page, "shopmicro_relay_backlog_rows") > 0 || svc_now_ms() >= give_up)
            break;
        ord_it_sleep_ms(50);
    }
    assert_true(rly_it_metric(page, "shopmicro_relay_backlog_rows") > 0);
    assert_true(rly_it_metric(page, "shopmicro_relay_kafka_up") == 0);
    assert_int_equal(rly_it_kafka(&f->kafka, "start"), SVC_OK);
    printf("[crash] kafka back %.1f s after the kill, %d orders placed\n",
           (double)(svc_now_ms() - t0) / 1000.0, atomic_load(&l.placed));
    ord_it_sleep_ms(1000);
    placed = load_finish(&l, true);
    wait_drained(f);
    printf("[crash] %d orders, none failed; backlog drained %.1f s after the kill\n", placed,
           (double)(svc_now_ms() - t0) / 1000.0);
    st = rly_it_http_get(f->admin_port, "/readyz", body, sizeof body);
    assert_int_equal(st, 200);
    verdict_t v = check_topic(f);
    print_verdict("after the broker kill", &v);
    printf("[crash] duplicates from the broker kill: %zu\n", v.duplicates - f->duplicates);
    assert_int_equal((int64_t)v.rows, before + 3 * placed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(relay_kill9_repeatedly_during_load),
        cmocka_unit_test(kafka_kill9_during_load),
    };
    int rc;

    setvbuf(stdout, NULL, _IOLBF, 0);
    cat_it_global_init();
    rc = svc_test_run_group_tests_name("relay_crash", tests, group_setup, group_teardown);
    cat_it_global_fini();
    return rc;
}
