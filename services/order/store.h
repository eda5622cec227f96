/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.h - the order service's SQL, and nothing else.
 *
 * One ord_store_t per worker thread (it owns that worker's connection).
 * Orders come back as protobuf messages whose memory comes from the
 * caller's allocator (the call's arena), so nothing here is ever freed.
 * Every function takes the incoming call's deadline and returns what db_exec
 * returns (SVC_EUNAVAIL database down, SVC_ETIMEDOUT deadline, ...), with
 * libpq's message in errbuf.
 */
#ifndef ORD_STORE_H
#define ORD_STORE_H

#include "lines.h"
#include "shopmicro/events/v1/events.pb-c.h"
#include "shopmicro/order/v1/order.pb-c.h"
#include "svc/core.h"

typedef Shopmicro__Order__V1__Order ord_order_t;
typedef Shopmicro__Order__V1__OrderStatus ord_status_t;
/* One per worker thread: that worker's database connection (pkg/db). */
typedef struct db_conn ord_store_t;

#define ORD_ID_LEN 37 /* canonical UUID + NUL */

/* What CreateOrder answers, and what an idempotency key keeps of it. */
typedef struct ord_created {
    char id[ORD_ID_LEN];
    ord_status_t status;
    int64_t total_cents;
} ord_created_t;

/* A priced order to insert. Everything borrowed. */
typedef struct ord_new_order {
    const char *customer_id;
    const ord_line_t *lines; /* merged and priced */
    size_t n_lines;
    int64_t total_cents;
    const char *idem_key;     /* NULL: the call carried no idempotency key */
    const char *request_hash; /* ord_lines_fingerprint(); with idem_key */
} ord_new_order_t;

/* ------------------------------------------------------------------------
 * The stock reservation saga (saga.c decides, this applies).
 * ------------------------------------------------------------------------ */
typedef Shopmicro__Events__V1__StockShortage ord_shortage_t;

/* What one inventory event asks of its order. Everything borrowed. */
typedef struct ord_saga_event {
    const char *event_id;       /* ce_id: what processed_events dedupes on */
    const char *event_type;     /* ce_type, recorded with it */
    const char *order_id;       /* canonical UUID */
    bool confirm;               /* StockReserved; false: StockRejected */
    const char *reason;         /* cancel: for people (ord_saga_cancel_reason) */
    ord_shortage_t **shortages; /* cancel: at most ORD_MAX_ITEMS (borrowed, not changed) */
    size_t n_shortages;
    const char *request_id; /* for the outbox row's x-request-id; "" if none */
} ord_saga_event_t;

/* What ord_store_saga did. */
typedef enum ord_saga_effect {
    ORD_SAGA_MOVED,       /* PENDING -> CONFIRMED/CANCELLED, its event in the outbox */
    ORD_SAGA_DUPLICATE,   /* the event id was processed before: nothing written */
    ORD_SAGA_NOT_PENDING, /* the order had left PENDING: only the event id recorded */
    ORD_SAGA_NO_ORDER,    /* no order has this id: nothing written */
} ord_saga_effect_t;

/*
 * Applies ev inside the transaction that ord_store_saga_begin opened (the
 * saga's consumer commits one per batch of events): locks the order (none:
 * ORD_SAGA_NO_ORDER, nothing written), records ev->event_id in
 * processed_events (a repeat: ORD_SAGA_DUPLICATE, nothing written), and,
 * only if the order is PENDING, moves it and writes its OrderConfirmed /
 * OrderCancelled outbox row (with pg_notify); an order in any other status
 * stays as it is (ORD_SAGA_NOT_PENDING, the event id kept). *status (may be
 * NULL) gets the order's status before the event. After an error the
 * transaction is aborted: roll it back.
 */
svc_err_t ord_store_saga(ord_store_t *st, const ord_saga_event_t *ev, uint64_t deadline_ns,
                         ord_saga_effect_t *effect, ord_status_t *status,
                         char errbuf[static SVC_ERRBUF_LEN]);
/* The saga's transaction: BEGIN; COMMIT (an aborted one is an error, see
 * db_commit); ROLLBACK (within DB_ROLLBACK_MS). */
svc_err_t ord_store_saga_begin(ord_store_t *st, uint64_t deadline_ns,
                               char errbuf[static SVC_ERRBUF_LEN]);
svc_err_t ord_store_saga_commit(ord_store_t *st, uint64_t deadline_ns,
                                char errbuf[static SVC_ERRBUF_LEN]);
void ord_store_saga_rollback(ord_store_t *st);

/* Creates the store (does not connect). dsn is copied. */
svc_err_t ord_store_new(const char *dsn, int statement_timeout_ms, ord_store_t **out,
                        char errbuf[static SVC_ERRBUF_LEN]);
/* NULL-safe. */
void ord_store_free(ord_store_t *st);
/* Applies services/order/migrations/ (its own connection), waiting up to
 * wait_ms for a database that is still starting (db_migrate_wait). */
svc_err_t ord_store_migrate(const char *dsn, int64_t wait_ms, char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Looks up an idempotency key. On SVC_OK request_hash and *out describe the
 * first request made with it; SVC_ENOTFOUND when the key is unused.
 */
svc_err_t ord_store_key_get(ord_store_t *st, const char *key, uint64_t deadline_ns,
                            char request_hash[ORD_FINGERPRINT_LEN], ord_created_t *out,
                            char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Writes an order in ONE transaction, which is ONE statement (one round
 * trip): the idempotency key (if any) first, then the order (status
 * PENDING), its items and its OrderCreated outbox row, with pg_notify. On
 * any failure nothing is written. The statement is never re-run by pkg/db
 * (it may have committed before its connection broke).
 *
 * With a key that another call has claimed, the insert of the key waits for
 * that call's transaction to end; if it committed, *key_taken is set, nothing
 * is written and SVC_OK is returned: read the winner's answer with
 * ord_store_key_get(). On SVC_OK with *key_taken false, *out is the new order.
 */
svc_err_t ord_store_create(ord_store_t *st, const ord_new_order_t *o, uint64_t deadline_ns,
                           ord_created_t *out, bool *key_taken, char errbuf[static SVC_ERRBUF_LEN]);

/* What a CreateOrder whose outcome is unknown tells its client: the words
 * the gateway adds to such an answer (gateway/upstream.c), so that a client
 * sees the same advice whichever way it called. */
#define ORD_UNKNOWN_NOTE "the order may have been placed: retry with the same Idempotency-Key"

/* After a failed ord_store_create (or any call): true when its write may
 * have been committed all the same, the database never having said
 * (db_outcome_unknown). Only the idempotency key can tell then. */
bool ord_store_outcome_unknown(const ord_store_t *st);

/* The order with its items in position order. SVC_ENOTFOUND when no order
 * has this id (id must be a canonical UUID). */
svc_err_t ord_store_get(ord_store_t *st, const char *id, uint64_t deadline_ns, const svc_alloc_t *a,
                        ord_order_t **out, char errbuf[static SVC_ERRBUF_LEN]);

/* Deletes at most `limit` idempotency keys older than ttl_s seconds, oldest
 * first; *deleted gets how many. */
svc_err_t ord_store_expire_keys(ord_store_t *st, int64_t ttl_s, int limit, uint64_t deadline_ns,
                                int64_t *deleted, char errbuf[static SVC_ERRBUF_LEN]);

/* Exposed for unit tests: the PostgreSQL array literal {"a","b\"c"} of the
 * lines' product ids, every element quoted and escaped. A new string owned
 * by caller (free()), NULL when out of memory. */
char *ord_store_text_array(const ord_line_t *lines, size_t n);

#endif
