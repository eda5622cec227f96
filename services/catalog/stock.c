/* SPDX-License-Identifier: Apache-2.0 */
/* stock.c - the reservation's SQL (see stock.h). Every statement is
 * prepared and parameterised; arrays travel as Postgres array literals. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "stock.h"

enum {
    STMT_BEGIN,
    STMT_COMMIT,
    STMT_ROLLBACK,
    STMT_CLAIM,
    STMT_DECIDED,
    STMT_LOCK,
    STMT_TAKE,
    STMT_DECIDE,
    STMT_OUTBOX,
};

static const db_stmt_t stmts[] = {
    /* BEGIN is safe to re-run on a fresh connection (pkg/db does that only
     * outside a transaction); nothing after it is. */
    [STMT_BEGIN] = {"cat_stock_begin", "BEGIN", 0, DB_STMT_IDEMPOTENT},
    [STMT_COMMIT] = {"cat_stock_commit", "COMMIT", 0, 0},
    [STMT_ROLLBACK] = {"cat_stock_rollback", "ROLLBACK", 0, 0},
    /* Inside the transaction: if another open transaction holds the same
     * event id, Postgres makes this wait for it, so two consumers that got
     * the same event (a rebalance) never both apply it. */
    [STMT_CLAIM] = {"cat_stock_claim",
                    "INSERT INTO processed_events (event_id, event_type) VALUES ($1, $2) "
                    "ON CONFLICT (event_id) DO NOTHING RETURNING 1",
                    2, 0},
    [STMT_DECIDED] = {"cat_stock_decided",
                      "SELECT 1 FROM stock_decisions WHERE order_id = $1::uuid", 1, 0},
    [STMT_LOCK] = {"cat_stock_lock",
                   "SELECT id::text, stock FROM products WHERE id = ANY($1::uuid[]) "
                   "ORDER BY id FOR UPDATE",
                   1, 0},
    [STMT_TAKE] = {"cat_stock_take",
                   "WITH want AS (SELECT * FROM unnest($2::uuid[], $3::int[]) AS t(id, qty)), "
                   "upd AS (UPDATE products p SET stock = p.stock - w.qty FROM want w "
                   "WHERE p.id = w.id RETURNING p.id) "
                   "INSERT INTO stock_reservations (order_id, product_id, quantity) "
                   "SELECT $1::uuid, w.id, w.qty FROM want w JOIN upd ON upd.id = w.id "
                   "RETURNING 1",
                   3, 0},
    [STMT_DECIDE] = {"cat_stock_decide",
                     "INSERT INTO stock_decisions (order_id, event_id, outcome) "
                     "VALUES ($1::uuid, $2, $3)",
                     3, 0},
    /* pg_notify is delivered at commit, and never if the transaction rolls
     * back: the relay wakes exactly when there is a row to publish. */
    [STMT_OUTBOX] = {"cat_stock_outbox",
                     "WITH ins AS (INSERT INTO outbox (id, aggregate_type, aggregate_id, "
                     "event_type, payload, topic, ce_type, ce_source, payload_pb, request_id) "
                     "VALUES (gen_random_uuid(), 'order', $1, $2, $3::jsonb, $4, $5, $6, "
                     "$7::bytea, $8) RETURNING 1) "
                     "SELECT pg_notify('outbox', '') FROM ins",
                     8, 0},
};

svc_err_t cat_stock_new(const char *dsn, int statement_timeout_ms, cat_stock_t **out,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    return db_conn_open(dsn, stmts, SVC_COUNTOF(stmts), statement_timeout_ms, "catalog.saga", out,
                        errbuf);
}

void cat_stock_free(cat_stock_t *st)
{
    db_conn_free(st);
}

svc_err_t cat_stock_begin(cat_stock_t *st, uint64_t deadline_ns, char errbuf[static SVC_ERRBUF_LEN])
{
    return db_run(st, STMT_BEGIN, NULL, deadline_ns, NULL, errbuf);
}

svc_err_t cat_stock_commit(cat_stock_t *st, uint64_t deadline_ns,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    return db_commit(st, STMT_COMMIT, deadline_ns, errbuf);
}

void cat_stock_rollback(cat_stock_t *st)
{
    (void)db_rollback(st, STMT_ROLLBACK, SVC_ERRBUF_SCRATCH);
}

svc_err_t cat_stock_claim_event(cat_stock_t *st, const char *event_id, const char *event_type,
                                uint64_t deadline_ns, bool *fresh,
                                char errbuf[static SVC_ERRBUF_LEN])
{
    const char *p[] = {event_id, event_type};
    int n = 0;
    svc_err_t err = db_run(st, STMT_CLAIM, p, deadline_ns, &n, errbuf);

    *fresh = n == 1;
    return err;
}

svc_err_t cat_stock_decided(cat_stock_t *st, const char *order_id, uint64_t deadline_ns,
                            bool *decided, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *p[] = {order_id};
    int n = 0;
    svc_err_t err = db_run(st, STMT_DECIDED, p, deadline_ns, &n, errbuf);

    *decided = n > 0;
    return err;
}

/* "{a,b,c}" of n canonical UUIDs (no quoting needed), or NULL. */
static char *uuid_array(const char *const *ids, size_t n)
{
    char *buf = malloc(n * 37 + 3), *p = buf;

    if (buf == NULL)
        return NULL;
    *p++ = '{';
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s%.36s", i > 0 ? "," : "", ids[i]);
    *p++ = '}';
    *p = '\0';
    return buf;
}

/* "{1,2,3}" of n int32s, or NULL. */
static char *int_array(const int32_t *v, size_t n)
{
    char *buf = malloc(n * 12 + 3), *p = buf;

    if (buf == NULL)
        return NULL;
    *p++ = '{';
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s%" PRId32, i > 0 ? "," : "", v[i]);
    *p++ = '}';
    *p = '\0';
    return buf;
}

svc_err_t cat_stock_lock(cat_stock_t *st, const char *const *ids, size_t n, uint64_t deadline_ns,
                         cat_stock_row_t *rows, size_t *n_rows, char errbuf[static SVC_ERRBUF_LEN])
{
    char *arr = uuid_array(ids, n);
    const char *p[] = {arr};
    PGresult *r = NULL;
    svc_err_t err;

    *n_rows = 0;
    if (arr == NULL) {
        svc_errbuf_set(errbuf, "out of memory");
        return SVC_ENOMEM;
    }
    err = db_exec(st, STMT_LOCK, p, deadline_ns, &r, errbuf);
    for (int i = 0; err == SVC_OK && i < PQntuples(r) && (size_t)i < n; i++) {
        snprintf(rows[i].id, sizeof rows[i].id, "%s", PQgetvalue(r, i, 0));
        rows[i].stock = (int32_t)strtol(PQgetvalue(r, i, 1), NULL, 10);
        (*n_rows)++;
    }
    PQclear(r);
    free(arr);
    return err;
}

svc_err_t cat_stock_take(cat_stock_t *st, const char *order_id, const char *const *ids,
                         const int32_t *qty, size_t n, uint64_t deadline_ns,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    char *a_ids = uuid_array(ids, n), *a_qty = int_array(qty, n);
    const char *p[] = {order_id, a_ids, a_qty};
    svc_err_t err = SVC_ENOMEM;
    int taken = 0;

    if (a_ids != NULL && a_qty != NULL)
        err = db_run(st, STMT_TAKE, p, deadline_ns, &taken, errbuf);
    else
        svc_errbuf_set(errbuf, "out of memory");
    if (err == SVC_OK && (size_t)taken != n) {
        /* The rows are locked: only a caller that skipped cat_stock_lock
         * (or passed an unknown id) gets here. */
        svc_errbuf_set(errbuf, "took stock of %d products, not %zu", taken, n);
        err = SVC_EINTERNAL;
    }
    free(a_ids);
    free(a_qty);
    return err;
}

svc_err_t cat_stock_decide(cat_stock_t *st, const char *order_id, const char *event_id,
                           const char *outcome, uint64_t deadline_ns,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    const char *p[] = {order_id, event_id, outcome};

    return db_run(st, STMT_DECIDE, p, deadline_ns, NULL, errbuf);
}

/* bytea's hex input form: "\x" and two digits per byte. */
static char *bytea_hex(const uint8_t *b, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char *s = malloc(2 * n + 3), *p = s;

    if (s == NULL)
        return NULL;
    *p++ = '\\';
    *p++ = 'x';
    for (size_t i = 0; i < n; i++) {
        *p++ = digits[b[i] >> 4];
        *p++ = digits[b[i] & 15];
    }
    *p = '\0';
    return s;
}

svc_err_t cat_stock_outbox_add(cat_stock_t *st, const cat_outbox_row_t *row, uint64_t deadline_ns,
                               char errbuf[static SVC_ERRBUF_LEN])
{
    char *hex = bytea_hex(row->pb, row->pb_len);
    const char *p[] = {row->aggregate_id, row->event_type, row->json, row->topic,
                       row->ce_type,      row->ce_source,  hex,       row->request_id};
    svc_err_t err;

    if (hex == NULL) {
        svc_errbuf_set(errbuf, "out of memory");
        return SVC_ENOMEM;
    }
    err = db_run(st, STMT_OUTBOX, p, deadline_ns, NULL, errbuf);
    free(hex);
    return err;
}
