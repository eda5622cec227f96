/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stock.h - the SQL of the stock reservation (the catalog's half of the
 * saga, docs/events.md §5), and nothing else: saga.c decides, this file
 * reads and writes.
 *
 * One cat_stock_t is one database connection with these statements
 * prepared, owned by the saga's consumer thread. A reservation is one
 * transaction: begin, claim the event id, look whether the order was
 * decided, lock the products, then either take the stock or not, record the
 * decision, add the outbox row, commit. Every call takes a deadline
 * (monotonic ns) and returns pkg/db's errors (db/db.h): SVC_EUNAVAIL and
 * SVC_ETIMEDOUT mean "the database, not the event".
 */
#ifndef CAT_STOCK_H
#define CAT_STOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "svc/core.h"

typedef struct db_conn cat_stock_t;

/* Creates the connection handle (does not connect). dsn is copied. */
svc_err_t cat_stock_new(const char *dsn, int statement_timeout_ms, cat_stock_t **out,
                        char errbuf[static SVC_ERRBUF_LEN]);
void cat_stock_free(cat_stock_t *st);

svc_err_t cat_stock_begin(cat_stock_t *st, uint64_t deadline_ns,
                          char errbuf[static SVC_ERRBUF_LEN]);
svc_err_t cat_stock_commit(cat_stock_t *st, uint64_t deadline_ns,
                           char errbuf[static SVC_ERRBUF_LEN]);
/* Best effort, with a short deadline of its own. */
void cat_stock_rollback(cat_stock_t *st);

/* Records event_id as processed. *fresh is false when it was already. */
svc_err_t cat_stock_claim_event(cat_stock_t *st, const char *event_id, const char *event_type,
                                uint64_t deadline_ns, bool *fresh,
                                char errbuf[static SVC_ERRBUF_LEN]);

/* *decided: whether order_id (a canonical UUID) has a decision already. */
svc_err_t cat_stock_decided(cat_stock_t *st, const char *order_id, uint64_t deadline_ns,
                            bool *decided, char errbuf[static SVC_ERRBUF_LEN]);

/* A product as locked for the reservation. */
typedef struct cat_stock_row {
    char id[37];
    int32_t stock;
} cat_stock_row_t;

/*
 * Locks the rows of the products ids[0..n) (canonical UUIDs, distinct) FOR
 * UPDATE, in id order (two reservations of the same products always lock
 * in the same order, so they queue rather than deadlock), and returns those
 * that exist in rows (capacity n) and *n_rows.
 */
svc_err_t cat_stock_lock(cat_stock_t *st, const char *const *ids, size_t n, uint64_t deadline_ns,
                         cat_stock_row_t *rows, size_t *n_rows, char errbuf[static SVC_ERRBUF_LEN]);

/* Takes qty[i] of ids[i] for order_id and records the reservation rows.
 * The products must be locked (cat_stock_lock) and have enough stock; the
 * CHECK (stock >= 0) would refuse it otherwise (SVC_EINVAL). */
svc_err_t cat_stock_take(cat_stock_t *st, const char *order_id, const char *const *ids,
                         const int32_t *qty, size_t n, uint64_t deadline_ns,
                         char errbuf[static SVC_ERRBUF_LEN]);

/* Records the order's decision ("RESERVED" or "REJECTED") and its event. */
svc_err_t cat_stock_decide(cat_stock_t *st, const char *order_id, const char *event_id,
                           const char *outcome, uint64_t deadline_ns,
                           char errbuf[static SVC_ERRBUF_LEN]);

/* One outbox row: the event in its wire form (docs/events.md §2). */
typedef struct cat_outbox_row {
    const char *aggregate_id; /* the order id: the Kafka key          */
    const char *event_type;   /* e.g. "StockReserved"                  */
    const char *json;         /* the event as protojson (jsonb column) */
    const char *topic;
    const char *ce_type;
    const char *ce_source;
    const uint8_t *pb; /* the event as protobuf: the record's value */
    size_t pb_len;
    const char *request_id; /* "" when none */
} cat_outbox_row_t;

/* Adds the row and notifies the relays (pg_notify at commit). */
svc_err_t cat_stock_outbox_add(cat_stock_t *st, const cat_outbox_row_t *row, uint64_t deadline_ns,
                               char errbuf[static SVC_ERRBUF_LEN]);

#endif
