/* SPDX-License-Identifier: Apache-2.0 */
/* store.c - order SQL. Every statement is prepared and parameterised. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "events.h"
#include "store.h"

extern const db_migration_t ord_migrations[];
extern const size_t ord_migrations_count;

#define RFC3339(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

enum {
    STMT_BEGIN,
    STMT_COMMIT,
    STMT_ROLLBACK,
    STMT_KEY_GET,
    STMT_ORDER_CREATE,
    STMT_ORDER_GET,
    STMT_KEYS_EXPIRE,
    STMT_EVENT_CLAIM,
    STMT_ORDER_LOCK,
    STMT_ORDER_CONFIRM,
    STMT_ORDER_CANCEL,
};

static const db_stmt_t stmts[] = {
    /* The saga's transaction (CreateOrder needs none: its write is one
     * statement). BEGIN may be re-run on a fresh connection when the old one
     * is found dead (pkg/db does that only outside a transaction): on a dead
     * session it began nothing. COMMIT and ROLLBACK must never be re-run. */
    [STMT_BEGIN] = {"ord_begin", "BEGIN", 0, DB_STMT_IDEMPOTENT},
    [STMT_COMMIT] = {"ord_commit", "COMMIT", 0, 0},
    [STMT_ROLLBACK] = {"ord_rollback", "ROLLBACK", 0, 0},
    /* A replay answers the order's status as it is now (the saga moves it
     * after the key was written), so it comes from orders. The key's own
     * status column is the one at creation; it is the answer only if the
     * order were missing, which the foreign key rules out once committed. */
    [STMT_KEY_GET] = {"ord_key_get",
                      "SELECT k.request_hash, k.order_id::text, COALESCE(o.status, k.status), "
                      "k.total_cents FROM idempotency_keys k "
                      "LEFT JOIN orders o ON o.id = k.order_id WHERE k.key = $1",
                      1, DB_STMT_IDEMPOTENT},
    /*
     * CreateOrder's whole write, one statement and so one round trip and one
     * transaction of its own (no BEGIN/COMMIT): the key, the order, its
     * lines and its OrderCreated outbox row, each CTE reading the rows the
     * one before it wrote (RETURNING), which also orders them: nothing is
     * written before the key is claimed.
     *
     * k claims the idempotency key ($1; NULL: the call has none). If another
     * open transaction holds the same key, Postgres makes this insert wait
     * for it: committed, k gets no row and so nothing else is written (the
     * statement returns no row: the key is taken); rolled back, k gets it.
     * o is the order, under the key's order id; i its lines ($5..$7, one
     * INSERT for all of them); x the outbox row, whose jsonb payload is built
     * from the rows i and o returned, so it cannot disagree with them.
     *
     * The event's protobuf ($11) is encoded by the caller without the two
     * fields only this statement knows, order_id (1) and created_at (5),
     * which are spliced in here as field 1 first and field 5 last: the bytes
     * are exactly those protobuf-c packs for the whole message (fields in
     * number order, proto3's empty strings left out). 0x0a/0x2a are the keys
     * of fields 1 and 5 as length-delimited, 0x24 (36) the length of a
     * uuid's text, 0x1b (27) that of RFC3339()'s. pg_notify wakes the relays
     * when the statement commits (never when it writes nothing or fails).
     */
    [STMT_ORDER_CREATE] =
        {"ord_order_create",
         "WITH k AS (INSERT INTO idempotency_keys (key, request_hash, order_id, status, "
         "total_cents) SELECT $1::text, $2::text, gen_random_uuid(), 'PENDING', $3::bigint "
         "WHERE $1::text IS NOT NULL ON CONFLICT (key) DO NOTHING RETURNING order_id), "
         "o AS (INSERT INTO orders (id, customer_id, status, total_cents) "
         "SELECT COALESCE((SELECT order_id FROM k), gen_random_uuid()), $4, 'PENDING', $3 "
         "WHERE $1::text IS NULL OR EXISTS (SELECT FROM k) "
         "RETURNING id, customer_id, total_cents, created_at, " RFC3339(
             "created_at") " AS at), "
                           "i AS (INSERT INTO order_items (order_id, position, product_id, "
                           "quantity, "
                           "unit_price_cents) SELECT o.id, t.pos - 1, t.product_id, t.quantity, "
                           "t.price "
                           "FROM o, unnest($5::text[], $6::int[], $7::bigint[]) "
                           "WITH ORDINALITY AS t(product_id, quantity, price, pos) "
                           "RETURNING position, product_id, quantity, unit_price_cents), "
                           "x AS (INSERT INTO outbox (id, aggregate_type, aggregate_id, "
                           "event_type, payload, "
                           "created_at, topic, ce_type, ce_source, payload_pb, request_id) "
                           "SELECT gen_random_uuid(), 'order', o.id::text, 'OrderCreated', "
                           "jsonb_build_object('order_id', o.id, 'customer_id', o.customer_id, "
                           "'items', (SELECT jsonb_agg(jsonb_build_object('product_id', "
                           "i.product_id, "
                           "'quantity', i.quantity, 'unit_price_cents', i.unit_price_cents) ORDER "
                           "BY i.position) "
                           "FROM i), 'total_cents', o.total_cents, 'created_at', o.at), "
                           "o.created_at, $8, $9, $10, '\\x0a24'::bytea || convert_to(o.id::text, "
                           "'UTF8') || "
                           "$11::bytea || '\\x2a1b'::bytea || convert_to(o.at, 'UTF8'), $12 FROM o "
                           "RETURNING 1) "
                           "SELECT o.id::text, pg_notify('outbox', '') FROM o, x",
         12, 0},
    [STMT_ORDER_GET] =
        {"ord_order_get",
         "SELECT o.id::text, o.customer_id, o.status, o.total_cents, " RFC3339(
             "o.created_at") ", "
                             "i.product_id, i.quantity, i.unit_price_cents, o.cancel_reason "
                             "FROM orders o LEFT JOIN order_items i ON i.order_id = o.id "
                             "WHERE o.id = $1::uuid ORDER BY i.position",
         1, DB_STMT_IDEMPOTENT},
    [STMT_KEYS_EXPIRE] = {"ord_keys_expire",
                          "DELETE FROM idempotency_keys WHERE key IN (SELECT key "
                          "FROM idempotency_keys WHERE created_at < now() - make_interval(secs "
                          "=> $1) ORDER BY created_at LIMIT $2)",
                          2, DB_STMT_IDEMPOTENT},
    /* The saga (ord_store_saga). The event id is claimed first: a
     * redelivered event gets no row and changes nothing. */
    [STMT_EVENT_CLAIM] = {"ord_event_claim",
                          "INSERT INTO processed_events (event_id, event_type) VALUES ($1, $2) "
                          "ON CONFLICT (event_id) DO NOTHING RETURNING 1",
                          2, 0},
    /* The order's status, locked until the transaction ends, and the
     * transaction's time (now() is fixed for the whole transaction, so it is
     * also the outbox row's created_at and the event's *_at field). */
    [STMT_ORDER_LOCK] = {"ord_order_lock",
                         "SELECT status, " RFC3339("now()") " FROM orders "
                                                            "WHERE id = $1::uuid FOR UPDATE",
                         1, 0},
    /* PENDING -> CONFIRMED and the OrderConfirmed outbox row ($2..$6:
     * topic, type, source, protobuf, request id), one statement. The jsonb
     * payload is the event with the proto's field names, as OrderCreated's.
     * The status condition is the rule "never back" said once more in SQL:
     * an order that is not PENDING gets no update and so no outbox row. */
    [STMT_ORDER_CONFIRM] =
        {"ord_order_confirm",
         "WITH upd AS (UPDATE orders SET status = 'CONFIRMED' "
         "WHERE id = $1::uuid AND status = 'PENDING' RETURNING id), "
         "ins AS (INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, "
         "created_at, topic, ce_type, ce_source, payload_pb, request_id) "
         "SELECT gen_random_uuid(), 'order', upd.id::text, 'OrderConfirmed', "
         "jsonb_build_object('order_id', upd.id, 'confirmed_at', " RFC3339(
             "now()") "), "
                      "now(), $2, $3, $4, $5::bytea, $6 FROM upd RETURNING 1) "
                      "SELECT pg_notify('outbox', '') FROM ins",
         6, 0},
    /* PENDING -> CANCELLED with the reason ($2) and the OrderCancelled
     * outbox row ($7..$11 as $2..$6 above); the shortages come as four
     * parallel arrays ($3..$6: product ids, wanted, available, unknown). */
    [STMT_ORDER_CANCEL] =
        {"ord_order_cancel",
         "WITH upd AS (UPDATE orders SET status = 'CANCELLED', cancel_reason = $2 "
         "WHERE id = $1::uuid AND status = 'PENDING' RETURNING id), "
         "ins AS (INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, "
         "created_at, topic, ce_type, ce_source, payload_pb, request_id) "
         "SELECT gen_random_uuid(), 'order', upd.id::text, 'OrderCancelled', "
         "jsonb_build_object('order_id', upd.id, 'reason', $2::text, 'shortages', "
         "COALESCE((SELECT jsonb_agg(jsonb_build_object('product_id', s.product_id, "
         "'wanted', s.wanted, 'available', s.available, 'unknown_product', s.unknown) "
         "ORDER BY s.n) FROM unnest($3::text[], $4::int[], $5::int[], $6::bool[]) "
         "WITH ORDINALITY AS s(product_id, wanted, available, unknown, n)), '[]'::jsonb), "
         "'cancelled_at', " RFC3339(
             "now()") "), "
                      "now(), $7, $8, $9, $10::bytea, $11 FROM upd RETURNING 1) "
                      "SELECT pg_notify('outbox', '') FROM ins",
         11, 0},
};

/* A store is its worker's connection: the statement table above is the
 * whole of what makes it the order store. */
svc_err_t ord_store_new(const char *dsn, int statement_timeout_ms, ord_store_t **out,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    return db_conn_open(dsn, stmts, SVC_COUNTOF(stmts), statement_timeout_ms, "order", out, errbuf);
}

void ord_store_free(ord_store_t *st)
{
    db_conn_free(st);
}

svc_err_t ord_store_migrate(const char *dsn, int64_t wait_ms, char errbuf[static SVC_ERRBUF_LEN])
{
    return db_migrate_wait(dsn, ord_migrations, ord_migrations_count, "order", wait_ms, errbuf);
}

static ord_status_t status_from_text(const char *s)
{
    if (strcmp(s, "PENDING") == 0)
        return SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_PENDING;
    if (strcmp(s, "CONFIRMED") == 0)
        return SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_CONFIRMED;
    if (strcmp(s, "CANCELLED") == 0)
        return SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_CANCELLED;
    return SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_UNSPECIFIED;
}

svc_err_t ord_store_key_get(ord_store_t *st, const char *key, uint64_t deadline_ns,
                            char request_hash[ORD_FINGERPRINT_LEN], ord_created_t *out,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    const char *params[] = {key};
    PGresult *r = NULL;
    svc_err_t err = db_exec(st, STMT_KEY_GET, params, deadline_ns, &r, errbuf);

    if (err == SVC_OK && PQntuples(r) == 0)
        err = SVC_ENOTFOUND;
    if (err == SVC_OK) {
        snprintf(request_hash, ORD_FINGERPRINT_LEN, "%s", PQgetvalue(r, 0, 0));
        snprintf(out->id, sizeof out->id, "%s", PQgetvalue(r, 0, 1));
        out->status = status_from_text(PQgetvalue(r, 0, 2));
        out->total_cents = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
    }
    PQclear(r);
    return err;
}

/* The array literal of n strings, the i-th being at(arg, i). */
static char *text_array(size_t n, const char *(*at)(const void *arg, size_t i), const void *arg)
{
    size_t cap = 3, len = 0;
    char *buf;

    for (size_t i = 0; i < n; i++)
        cap += 2 * strlen(at(arg, i)) + 3;
    buf = malloc(cap);
    if (buf == NULL)
        return NULL;
    buf[len++] = '{';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            buf[len++] = ',';
        buf[len++] = '"';
        for (const char *p = at(arg, i); *p != '\0'; p++) {
            if (*p == '"' || *p == '\\')
                buf[len++] = '\\';
            buf[len++] = *p;
        }
        buf[len++] = '"';
    }
    buf[len++] = '}';
    buf[len] = '\0';
    return buf;
}

static const char *line_product(const void *arg, size_t i)
{
    return ((const ord_line_t *)arg)[i].product_id;
}

char *ord_store_text_array(const ord_line_t *lines, size_t n)
{
    return text_array(n, line_product, lines);
}

/* {q1,q2,...} and {p1,p2,...}: at most 100 numbers of at most 20 digits. */
#define NUM_ARRAY_MAX (ORD_MAX_ITEMS * 22 + 3)

static void number_arrays(const ord_line_t *lines, size_t n, char *qty, char *price)
{
    size_t q = 0, p = 0;

    qty[q++] = '{';
    price[p++] = '{';
    for (size_t i = 0; i < n; i++) {
        q += (size_t)snprintf(qty + q, NUM_ARRAY_MAX - q, "%s%" PRId32, i ? "," : "",
                              lines[i].quantity);
        p += (size_t)snprintf(price + p, NUM_ARRAY_MAX - p, "%s%" PRId64, i ? "," : "",
                              lines[i].unit_price_cents);
    }
    snprintf(qty + q, NUM_ARRAY_MAX - q, "}");
    snprintf(price + p, NUM_ARRAY_MAX - p, "}");
}

/*
 * An event's protobuf (events.c: pb, *len bytes) in bytea's hex input form
 * ("\\x0a24..."), because pkg/db sends text parameters. Takes pb (NULL: out
 * of memory) and frees it. NULL when out of memory; owned by caller (free).
 * The length is passed by pointer so that a call like event_hex(pack(...,
 * &n), &n) reads it after the pack has set it (C leaves the order in which
 * arguments are evaluated open).
 */
static char *event_hex(uint8_t *pb, const size_t *len)
{
    size_t n = *len;
    static const char digits[] = "0123456789abcdef";
    char *hex = pb != NULL ? malloc(2 * n + 3) : NULL;

    if (hex != NULL) {
        hex[0] = '\\';
        hex[1] = 'x';
        for (size_t i = 0; i < n; i++) {
            hex[2 + 2 * i] = digits[pb[i] >> 4];
            hex[3 + 2 * i] = digits[pb[i] & 0xf];
        }
        hex[2 * n + 2] = '\0';
    }
    free(pb);
    return hex;
}

static svc_err_t exec(ord_store_t *st, size_t idx, const char *const *params, uint64_t deadline_ns,
                      char errbuf[static SVC_ERRBUF_LEN])
{
    return db_run(st, idx, params, deadline_ns, NULL, errbuf);
}

svc_err_t ord_store_create(ord_store_t *st, const ord_new_order_t *o, uint64_t deadline_ns,
                           ord_created_t *out, bool *key_taken, char errbuf[static SVC_ERRBUF_LEN])
{
    char qty[NUM_ARRAY_MAX], price[NUM_ARRAY_MAX], total[24];
    char *ids = ord_store_text_array(o->lines, o->n_lines);
    char *event = NULL;
    PGresult *r = NULL;
    svc_err_t err = SVC_ENOMEM;
    size_t n = 0;

    *key_taken = false;
    /* Without order_id and created_at, which STMT_ORDER_CREATE adds. */
    event = event_hex(ord_event_created_pack(o, "", "", &n), &n);
    if (ids == NULL || event == NULL)
        goto out;
    number_arrays(o->lines, o->n_lines, qty, price);
    snprintf(total, sizeof total, "%" PRId64, o->total_cents);
    {
        const char *p[] = {o->idem_key,
                           o->request_hash,
                           total,
                           o->customer_id,
                           ids,
                           qty,
                           price,
                           ORD_EVENT_TOPIC,
                           ORD_EVENT_CREATED_TYPE,
                           ORD_EVENT_CE_SOURCE,
                           event,
                           svc_log_request_id()};
        err = db_exec(st, STMT_ORDER_CREATE, p, deadline_ns, &r, errbuf);
    }
    if (err != SVC_OK)
        goto out;
    if (PQntuples(r) == 0) {
        *key_taken = o->idem_key != NULL; /* the winner's; nothing of ours was written */
        if (!*key_taken) {
            svc_errbuf_set(errbuf, "creating the order wrote no row");
            err = SVC_EINTERNAL;
        }
        goto out;
    }
    snprintf(out->id, sizeof out->id, "%s", PQgetvalue(r, 0, 0));
    out->status = SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_PENDING;
    out->total_cents = o->total_cents;
out:
    PQclear(r);
    free(ids);
    free(event);
    return err;
}

bool ord_store_outcome_unknown(const ord_store_t *st)
{
    return db_outcome_unknown(st);
}

svc_err_t ord_store_get(ord_store_t *st, const char *id, uint64_t deadline_ns, const svc_alloc_t *a,
                        ord_order_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *params[] = {id};
    PGresult *r = NULL;
    ord_order_t *o;
    int rows;
    svc_err_t err = db_exec(st, STMT_ORDER_GET, params, deadline_ns, &r, errbuf);

    if (err != SVC_OK)
        goto out;
    rows = PQntuples(r);
    if (rows == 0) {
        err = SVC_ENOTFOUND;
        goto out;
    }
    err = SVC_ENOMEM;
    o = a->fn(a->ctx, sizeof *o);
    if (o == NULL)
        goto out;
    shopmicro__order__v1__order__init(o);
    o->id = svc_alloc_strdup(a, PQgetvalue(r, 0, 0));
    o->customer_id = svc_alloc_strdup(a, PQgetvalue(r, 0, 1));
    o->status = status_from_text(PQgetvalue(r, 0, 2));
    o->total_cents = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
    o->created_at = svc_alloc_strdup(a, PQgetvalue(r, 0, 4));
    o->cancel_reason = svc_alloc_strdup(a, PQgetvalue(r, 0, 8));
    o->items = a->fn(a->ctx, (size_t)rows * sizeof *o->items);
    if (o->id == NULL || o->customer_id == NULL || o->created_at == NULL ||
        o->cancel_reason == NULL || o->items == NULL)
        goto out;
    /* LEFT JOIN: an order without items (none exist; the schema allows it)
     * comes back as one row of NULL item columns. */
    for (int i = 0; i < rows && !PQgetisnull(r, i, 5); i++) {
        ord_item_t *it = a->fn(a->ctx, sizeof *it);
        if (it == NULL)
            goto out;
        shopmicro__order__v1__order_item__init(it);
        it->product_id = svc_alloc_strdup(a, PQgetvalue(r, i, 5));
        it->quantity = (int32_t)strtol(PQgetvalue(r, i, 6), NULL, 10);
        it->unit_price_cents = strtoll(PQgetvalue(r, i, 7), NULL, 10);
        if (it->product_id == NULL)
            goto out;
        o->items[o->n_items++] = it;
    }
    *out = o;
    err = SVC_OK;
out:
    PQclear(r);
    return err;
}

svc_err_t ord_store_expire_keys(ord_store_t *st, int64_t ttl_s, int limit, uint64_t deadline_ns,
                                int64_t *deleted, char errbuf[static SVC_ERRBUF_LEN])
{
    char ttl[24], lim[16];
    const char *params[] = {ttl, lim};
    PGresult *r = NULL;
    svc_err_t err;

    snprintf(ttl, sizeof ttl, "%" PRId64, ttl_s);
    snprintf(lim, sizeof lim, "%d", limit);
    err = db_exec(st, STMT_KEYS_EXPIRE, params, deadline_ns, &r, errbuf);
    if (err == SVC_OK)
        *deleted = strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return err;
}

/* The shortages' four parallel arrays for STMT_ORDER_CANCEL. */
typedef struct shortage_arrays {
    char *ids;
    char wanted[NUM_ARRAY_MAX], available[NUM_ARRAY_MAX], unknown[ORD_MAX_ITEMS * 2 + 3];
} shortage_arrays_t;

static const char *shortage_product(const void *arg, size_t i)
{
    const ord_saga_event_t *ev = arg;
    const char *id = ev->shortages[i]->product_id;

    return id != NULL ? id : "";
}

static svc_err_t shortage_arrays(const ord_saga_event_t *ev, shortage_arrays_t *a)
{
    size_t n = ev->n_shortages < ORD_MAX_ITEMS ? ev->n_shortages : ORD_MAX_ITEMS;
    size_t w = 0, v = 0, u = 0;

    a->ids = text_array(n, shortage_product, ev);
    if (a->ids == NULL)
        return SVC_ENOMEM;
    a->wanted[w++] = '{';
    a->available[v++] = '{';
    a->unknown[u++] = '{';
    for (size_t i = 0; i < n; i++) {
        const ord_shortage_t *s = ev->shortages[i];
        w += (size_t)snprintf(a->wanted + w, NUM_ARRAY_MAX - w, "%s%" PRId32, i ? "," : "",
                              s->wanted);
        v += (size_t)snprintf(a->available + v, NUM_ARRAY_MAX - v, "%s%" PRId32, i ? "," : "",
                              s->available);
        if (i > 0)
            a->unknown[u++] = ',';
        a->unknown[u++] = s->unknown_product ? 't' : 'f';
    }
    snprintf(a->wanted + w, NUM_ARRAY_MAX - w, "}");
    snprintf(a->available + v, NUM_ARRAY_MAX - v, "}");
    a->unknown[u++] = '}';
    a->unknown[u] = '\0';
    return SVC_OK;
}

/* The move and its outbox row (the order is locked and PENDING). */
static svc_err_t saga_move(ord_store_t *st, const ord_saga_event_t *ev, const char *at,
                           uint64_t deadline_ns, char errbuf[static SVC_ERRBUF_LEN])
{
    shortage_arrays_t a = {0};
    size_t n = 0;
    char *event;
    svc_err_t err;

    if (ev->confirm) {
        event = event_hex(ord_event_confirmed_pack(ev->order_id, at, &n), &n);
        if (event == NULL)
            return SVC_ENOMEM;
        const char *p[] = {ev->order_id,        ORD_EVENT_TOPIC, ORD_EVENT_CONFIRMED_TYPE,
                           ORD_EVENT_CE_SOURCE, event,           ev->request_id};
        err = exec(st, STMT_ORDER_CONFIRM, p, deadline_ns, errbuf);
        free(event);
        return err;
    }
    event = event_hex(ord_event_cancelled_pack(ev, at, &n), &n);
    err = event != NULL ? shortage_arrays(ev, &a) : SVC_ENOMEM;
    if (err == SVC_OK) {
        const char *p[] = {
            ev->order_id,        ev->reason, a.ids,           a.wanted,
            a.available,         a.unknown,  ORD_EVENT_TOPIC, ORD_EVENT_CANCELLED_TYPE,
            ORD_EVENT_CE_SOURCE, event,      ev->request_id};
        err = exec(st, STMT_ORDER_CANCEL, p, deadline_ns, errbuf);
    }
    free(a.ids);
    free(event);
    return err;
}

svc_err_t ord_store_saga_begin(ord_store_t *st, uint64_t deadline_ns,
                               char errbuf[static SVC_ERRBUF_LEN])
{
    return exec(st, STMT_BEGIN, NULL, deadline_ns, errbuf);
}

svc_err_t ord_store_saga_commit(ord_store_t *st, uint64_t deadline_ns,
                                char errbuf[static SVC_ERRBUF_LEN])
{
    return db_commit(st, STMT_COMMIT, deadline_ns, errbuf);
}

void ord_store_saga_rollback(ord_store_t *st)
{
    /* Nothing to add to the failure that led here, which the saga has logged;
     * a ROLLBACK that fails has lost its connection, and with it the
     * transaction. */
    (void)db_rollback(st, STMT_ROLLBACK, SVC_ERRBUF_SCRATCH);
}

/* The order first: an event for no order writes nothing, not even its id,
 * so it can be replayed once the order exists (a restored backup). */
svc_err_t ord_store_saga(ord_store_t *st, const ord_saga_event_t *ev, uint64_t deadline_ns,
                         ord_saga_effect_t *effect, ord_status_t *status,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    const char *lock_p[] = {ev->order_id}, *claim_p[] = {ev->event_id, ev->event_type};
    char at[40];
    PGresult *r = NULL;
    ord_status_t before;
    svc_err_t err = db_exec(st, STMT_ORDER_LOCK, lock_p, deadline_ns, &r, errbuf);

    if (err != SVC_OK || PQntuples(r) == 0) {
        *effect = ORD_SAGA_NO_ORDER;
        PQclear(r);
        return err;
    }
    before = status_from_text(PQgetvalue(r, 0, 0));
    snprintf(at, sizeof at, "%s", PQgetvalue(r, 0, 1));
    PQclear(r);
    r = NULL;
    err = db_exec(st, STMT_EVENT_CLAIM, claim_p, deadline_ns, &r, errbuf);
    if (err == SVC_OK && PQntuples(r) == 0)
        *effect = ORD_SAGA_DUPLICATE; /* nothing written */
    PQclear(r);
    if (err != SVC_OK || *effect == ORD_SAGA_DUPLICATE)
        return err;
    if (status != NULL)
        *status = before;
    if (before != SHOPMICRO__ORDER__V1__ORDER_STATUS__ORDER_STATUS_PENDING) {
        *effect = ORD_SAGA_NOT_PENDING;
        return SVC_OK;
    }
    err = saga_move(st, ev, at, deadline_ns, errbuf);
    if (err == SVC_OK)
        *effect = ORD_SAGA_MOVED;
    return err;
}
