/* SPDX-License-Identifier: Apache-2.0 */
/*
 * No order answered OK is lost, and none answered "nothing written" exists,
 * whatever happens to Postgres under load.
 *
 * Six clients place 2-item orders on the real order service (priced by the
 * real catalog), every other one with an idempotency key, while the test
 * restarts Postgres with -m fast, then with -m immediate, and ends the order
 * service's backends with pg_terminate_backend, each several times. Each
 * answer is one of three things:
 *   - OK: the order must be in the database, with its two lines and its
 *     OutboxCreated row (a "lost" order otherwise);
 *   - an unknown outcome (DEADLINE_EXCEEDED, or a status that says the
 *     order may have been placed): either way is right, but a keyed one is
 *     replayed with its key afterwards and must then be OK;
 *   - any other failure, a verdict that nothing was written: no order may
 *     exist for it (a "ghost" otherwise).
 * Every request has a customer id of its own, so the database tells which
 * request an order belongs to, and no customer may have two orders.
 *
 * The faults hit the shared test Postgres (deploy/local/stack.sh), hence
 * RUN_SERIAL; the teardown brings it back whatever happened.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "order_it.h"

#define CLIENTS      6
#define MAX_REQUESTS 4000 /* per client: far more than a run places */
#define CALL_MS      3000
#define LOAD_MS      1200 /* unscaled: load between two faults */
#define REPLAY_TRIES 40
/* Of each: every one loses an OK order on a pkg/db that trusts rows
 * before ReadyForQuery in about one run of three, together most runs. */
#define RESTARTS     3 /* -m fast, then -m immediate */
#define TERMINATIONS 6
#define UNKNOWN_NOTE "may have been placed"

typedef enum outcome { OUT_NONE, OUT_OK, OUT_UNKNOWN, OUT_REFUSED } outcome_t;

typedef struct request {
    outcome_t outcome;
    bool keyed;
    char order_id[37];
    char message[SVC_ERRBUF_LEN + 32]; /* the status of a failure, for the report */
} request_t;

typedef struct client {
    ord_it_t *t;
    int index;
    const it_item_t *items;
    volatile int *stop;
    size_t n; /* requests made */
    request_t req[MAX_REQUESTS];
} client_t;

static void customer_of(int client, size_t i, char *out, size_t cap)
{
    snprintf(out, cap, "dur-%d-%zu", client, i);
}

static void key_of(int client, size_t i, char *out, size_t cap)
{
    snprintf(out, cap, "durability-key-%d-%d-%zu", (int)getpid(), client, i);
}

/* A failed call whose status does not rule out a committed order. */
static bool unknown(const rpc_result_t *res)
{
    return res->err == SVC_ETIMEDOUT || strstr(res->message, UNKNOWN_NOTE) != NULL;
}

static svc_err_t place(client_t *c, size_t i, request_t *r)
{
    char customer[32], key[64];
    it_created_t *out = NULL;
    rpc_result_t res;

    customer_of(c->index, i, customer, sizeof customer);
    key_of(c->index, i, key, sizeof key);
    it_order_create(c->t->ord_ch, customer, c->items, 2, r->keyed ? key : NULL, CALL_MS, &out,
                    &res);
    if (res.err == SVC_OK) {
        r->outcome = OUT_OK;
        snprintf(r->order_id, sizeof r->order_id, "%s", out->id);
    } else {
        r->outcome = unknown(&res) ? OUT_UNKNOWN : OUT_REFUSED;
        snprintf(r->message, sizeof r->message, "%s %s", svc_err_name(res.err), res.message);
    }
    it_free(out);
    return res.err;
}

static void *client_main(void *arg)
{
    client_t *c = arg;

    while (!*c->stop && c->n < MAX_REQUESTS) {
        request_t *r = &c->req[c->n];
        r->keyed = c->n % 2 == 1;
        if (place(c, c->n++, r) != SVC_OK)
            ord_it_sleep_ms(20); /* Postgres is down: do not spin */
    }
    return NULL;
}

static void wait_ms(int ms)
{
    ord_it_sleep_ms(it_ms(ms));
}

static void stack(const char *cmd, const char *arg)
{
    int st = it_stack_args(cmd, arg);

    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("deploy/local/stack.sh %s %s failed", cmd, arg != NULL ? arg : "");
}

/* SIGTERM to each of the order service's backends, as an operator's
 * pg_terminate_backend does: each session ends at its next interrupt
 * check, inside a statement or between a statement and its commit. */
static int64_t terminate_backends(const ord_it_t *t)
{
    char sql[256], dsn[PGTEST_DSN_MAX], errbuf[SVC_ERRBUF_LEN] = "";
    int64_t n = -1;

    pgtest_dsn("postgres", dsn, sizeof dsn);
    snprintf(sql, sizeof sql,
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
             "WHERE datname = '%s' AND application_name = 'order'",
             t->ord_db.name);
    if (pgtest_scalar_int(dsn, sql, &n, errbuf) != SVC_OK)
        fail_msg("pg_terminate_backend: %s", errbuf);
    return n;
}

/* The faults, with load before and after each. */
static void faults(ord_it_t *t)
{
    for (int round = 0; round < RESTARTS; round++) {
        wait_ms(LOAD_MS);
        stack("pg-restart", "fast");
        wait_ms(LOAD_MS);
        stack("pg-restart", "immediate");
    }
    for (int round = 0; round < TERMINATIONS; round++) {
        wait_ms(LOAD_MS);
        print_message("pg_terminate_backend: %lld backends of order ended\n",
                      (long long)terminate_backends(t));
    }
    wait_ms(LOAD_MS);
}

/* A keyed request without a verdict of OK: replayed with its key until the
 * database answers (Postgres is up again by now). */
static void replay(client_t *c, size_t i)
{
    request_t *r = &c->req[i];

    for (int n = 0; n < REPLAY_TRIES && r->outcome != OUT_OK; n++) {
        if (n > 0)
            ord_it_sleep_ms(100);
        place(c, i, r);
    }
    if (r->outcome != OUT_OK)
        fail_msg("client %d request %zu: its key's replay did not succeed: %s", c->index, i,
                 r->message);
}

/* What the database holds of one customer's order. */
typedef struct row {
    int client;
    size_t i;
    char id[37];
    int lines, outbox;
} row_t;

static size_t load_rows(const ord_it_t *t, row_t *rows, size_t cap)
{
    PGconn *pg = PQconnectdb(t->ord_db.dsn);
    PGresult *r;
    size_t n = 0;

    if (PQstatus(pg) != CONNECTION_OK)
        fail_msg("connecting to the orders database: %s", PQerrorMessage(pg));
    r = PQexec(pg, "SELECT o.customer_id, o.id::text, "
                   "(SELECT count(*) FROM order_items i WHERE i.order_id = o.id), "
                   "(SELECT count(*) FROM outbox x WHERE x.aggregate_id = o.id::text "
                   " AND x.event_type = 'OrderCreated') FROM orders o");
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("reading the orders: %s", PQerrorMessage(pg));
    for (int k = 0; k < PQntuples(r) && n < cap; k++, n++) {
        row_t *w = &rows[n];
        if (sscanf(PQgetvalue(r, k, 0), "dur-%d-%zu", &w->client, &w->i) != 2)
            fail_msg("an order of an unknown customer: %s", PQgetvalue(r, k, 0));
        snprintf(w->id, sizeof w->id, "%s", PQgetvalue(r, k, 1));
        w->lines = atoi(PQgetvalue(r, k, 2));
        w->outbox = atoi(PQgetvalue(r, k, 3));
    }
    PQclear(r);
    PQfinish(pg);
    return n;
}

typedef struct tally {
    size_t ok, unknown, refused, lost, ghosts, twice, partial;
} tally_t;

/* Which request each row belongs to; twice counts a request with two. */
static void index_rows(const client_t *cl, const row_t *rows, size_t n_rows,
                       unsigned char seen[CLIENTS][MAX_REQUESTS], tally_t *y)
{
    memset(seen, 0, sizeof(unsigned char[CLIENTS][MAX_REQUESTS]));
    for (size_t k = 0; k < n_rows; k++) {
        const row_t *w = &rows[k];
        if (w->client < 0 || w->client >= CLIENTS || w->i >= cl[w->client].n)
            fail_msg("order %s: no request of this test placed it", w->id);
        if (seen[w->client][w->i]++ > 0)
            y->twice++;
    }
}

/* Before any replay: a request refused with a verdict has no order. */
static void count_ghosts(const client_t *cl, const row_t *rows, size_t n_rows, tally_t *y)
{
    static unsigned char seen[CLIENTS][MAX_REQUESTS];

    index_rows(cl, rows, n_rows, seen, y);
    for (int c = 0; c < CLIENTS; c++)
        for (size_t i = 0; i < cl[c].n; i++) {
            const request_t *r = &cl[c].req[i];
            y->unknown += r->outcome == OUT_UNKNOWN;
            y->refused += r->outcome == OUT_REFUSED;
            if (r->outcome == OUT_REFUSED && seen[c][i]) {
                y->ghosts++;
                print_message("ghost: an order of dur-%d-%zu, answered %s\n", c, i, r->message);
            }
        }
}

/* After the replays: every OK answer is an order, whole, under its id. */
static void count_lost(const client_t *cl, const row_t *rows, size_t n_rows, tally_t *y)
{
    static unsigned char seen[CLIENTS][MAX_REQUESTS];

    y->twice = 0;
    index_rows(cl, rows, n_rows, seen, y);
    for (size_t k = 0; k < n_rows; k++) {
        const row_t *w = &rows[k];
        const request_t *r = &cl[w->client].req[w->i];
        if (w->lines != 2 || w->outbox != 1)
            y->partial++;
        if (r->outcome == OUT_OK && strcmp(r->order_id, w->id) != 0)
            y->twice++; /* answered with another order than the one kept */
    }
    for (int c = 0; c < CLIENTS; c++)
        for (size_t i = 0; i < cl[c].n; i++) {
            const request_t *r = &cl[c].req[i];
            y->ok += r->outcome == OUT_OK;
            if (r->outcome == OUT_OK && !seen[c][i]) {
                y->lost++;
                print_message("lost: order %s of dur-%d-%zu was answered OK\n", r->order_id, c, i);
            }
        }
}

static void no_answered_order_is_lost_and_none_refused_exists(void **state)
{
    ord_it_t *t = *state;
    static client_t cl[CLIENTS];
    static row_t rows[CLIENTS * MAX_REQUESTS];
    char a[37], b[37];
    it_item_t items[2] = {{a, 1}, {b, 2}};
    pthread_t th[CLIENTS];
    volatile int stop = 0;
    size_t replayed = 0, n_rows;
    tally_t y = {0};

    ord_it_product(t, "Mug", 1299, a);
    ord_it_product(t, "Tea", 250, b);
    for (int c = 0; c < CLIENTS; c++) {
        cl[c] = (client_t){.t = t, .index = c, .items = items, .stop = &stop};
        assert_int_equal(pthread_create(&th[c], NULL, client_main, &cl[c]), 0);
    }
    faults(t);
    stop = 1;
    for (int c = 0; c < CLIENTS; c++)
        pthread_join(th[c], NULL);

    count_ghosts(cl, rows, load_rows(t, rows, SVC_COUNTOF(rows)), &y);
    for (int c = 0; c < CLIENTS; c++)
        for (size_t i = 0; i < cl[c].n; i++)
            if (cl[c].req[i].keyed && cl[c].req[i].outcome != OUT_OK) {
                replayed++;
                replay(&cl[c], i);
            }
    n_rows = load_rows(t, rows, SVC_COUNTOF(rows));
    count_lost(cl, rows, n_rows, &y);
    print_message("requests: %zu unknown, %zu refused at first; %zu keyed ones replayed; "
                  "%zu OK in the end; orders in the database: %zu; lost %zu, ghosts %zu, "
                  "twice %zu, partial %zu\n",
                  y.unknown, y.refused, replayed, y.ok, n_rows, y.lost, y.ghosts, y.twice,
                  y.partial);
    assert_true(y.ok > 0);
    assert_int_equal(y.lost, 0);
    assert_int_equal(y.ghosts, 0);
    assert_int_equal(y.twice, 0);
    assert_int_equal(y.partial, 0);
}

static int setup(void **state)
{
    return ord_it_setup(state, NULL, NULL);
}

static int teardown(void **state)
{
    return it_teardown_after_pg(state, ord_it_teardown);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(no_answered_order_is_lost_and_none_refused_exists, setup,
                                        teardown),
    };
    int rc;

    cat_it_global_init();
    rc = svc_test_run_group_tests_name("order_durability", tests, NULL, NULL);
    cat_it_global_fini();
    return rc;
}
