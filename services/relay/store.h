/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.h - the relay's SQL on an outbox table (see
 * services/order/migrations/0002_outbox.sql and 0005_outbox_wire.sql for its
 * columns): claim a batch in a transaction, mark the published rows, commit.
 */
#ifndef RLY_STORE_H
#define RLY_STORE_H

#include "db/db.h"

typedef struct db_conn rly_store_t;

/* The columns of a claimed row, in this order (RLY_COL_*). */
enum {
    RLY_COL_ID,        /* uuid text: ce_id */
    RLY_COL_KEY,       /* aggregate_id: the Kafka key */
    RLY_COL_TOPIC,
    RLY_COL_TYPE,
    RLY_COL_SOURCE,
    RLY_COL_PAYLOAD,   /* bytea, text form (\x...): PQunescapeBytea */
    RLY_COL_REQUEST_ID,
    RLY_COL_TIME,      /* created_at, RFC 3339 UTC */
};

/* A connection handle (connects on first use). Owned by caller: rly_store_free. */
svc_err_t rly_store_new(const char *dsn, const char *name, int statement_timeout_ms,
                        rly_store_t **out, char *errbuf);
void rly_store_free(rly_store_t *st);

/* BEGIN, then claims up to limit rows (see store.c for which): *rows is
 * owned by caller (PQclear). On error, no transaction is left open. */
svc_err_t rly_store_claim(rly_store_t *st, int limit, PGresult **rows, char *errbuf);
/* Marks the rows whose ids are in `ids` (a Postgres uuid[] literal
 * "{id,id}") published, then COMMITs. On error the transaction is rolled
 * back: no row is marked. */
svc_err_t rly_store_mark_commit(rly_store_t *st, const char *ids, char *errbuf);
/* Rolls back the claim: every claimed row stays unpublished. */
void rly_store_rollback(rly_store_t *st);
/* Outside a claim: the unpublished rows (counted up to cap) and the oldest
 * one's created_at in Unix ms (0 when none). */
svc_err_t rly_store_stats(rly_store_t *st, int64_t cap, int64_t *rows, int64_t *oldest_ms,
                          char *errbuf);

#endif
