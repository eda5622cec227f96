/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store.h - the relay's SQL on an outbox table (the columns: services/order/
 * migrations 0002 and 0005; the cursor: services/relay/schema/0007): read
 * the rows after the cursors of some shards, move those cursors, count the
 * backlog, and the advisory locks that lease shards (lease.h). No statement
 * runs inside an explicit transaction: nothing is locked between calls.
 */
#ifndef RLY_STORE_H
#define RLY_STORE_H

#include "db/db.h"

/* The relay's connection (opaque). Not thread-safe: the relay's thread. */
typedef struct rly_store rly_store_t;

/* The longest parameters a read sent ahead is kept for (8 shards need
 * about 400 bytes). */
#define RLY_STORE_KEY_MAX 512

/* The columns of a read row, in this order, in binary format (rows.h
 * decodes them). */
enum {
    RLY_COL_HELD,  /* bool: committed rows wait for an older transaction */
    RLY_COL_SHARD, /* smallint; NULL in the one row of an empty read */
    RLY_COL_TXID,  /* xid8 and bigint: the row's position (txid, seq) */
    RLY_COL_SEQ,
    RLY_COL_ID,  /* uuid: ce_id */
    RLY_COL_KEY, /* aggregate_id (text): the Kafka key */
    RLY_COL_TOPIC,
    RLY_COL_TYPE,
    RLY_COL_SOURCE,
    RLY_COL_PAYLOAD, /* bytea */
    RLY_COL_REQUEST_ID,
    RLY_COL_TIME, /* created_at: timestamptz */
    RLY_N_COLS
};

/* Three Postgres array literals naming shards and their positions, e.g.
 * "{0,3}", "{812,0}", "{17,0}": what the read and the advance take. */
typedef struct rly_positions {
    const char *shards, *txids, *seqs;
} rly_positions_t;

/* A connection handle (connects on first use). Owned by caller: rly_store_free. */
svc_err_t rly_store_new(const char *dsn, const char *name, int statement_timeout_ms,
                        rly_store_t **out, char errbuf[static SVC_ERRBUF_LEN]);
void rly_store_free(rly_store_t *st);

/* Up to `limit` rows of each shard in p after its position, oldest first
 * ((txid, seq) order); only rows whose transaction and every older one of
 * this database have ended (two statements: the horizon, then the read).
 * *rows owned by caller (PQclear), binary, for rly_rows_decode; at least
 * one row (RLY_COL_SHARD NULL when none was read). */
svc_err_t rly_store_read(rly_store_t *st, const rly_positions_t *p, int limit, PGresult **rows,
                         char errbuf[static SVC_ERRBUF_LEN]);
/* Sends the read of these positions ahead, without waiting (a backlog: the
 * next batch is read while this one is produced). The next rly_store_read
 * of the same positions and limit takes its result; any other statement
 * first receives it (and keeps it), and a read of other positions drops
 * it. A failure is not reported here: the read itself meets it. */
void rly_store_read_ahead(rly_store_t *st, const rly_positions_t *p, int limit);
/* Takes in what has arrived of a read sent ahead, without waiting: called
 * while the relay waits for the broker, so that the next batch's rows are
 * parsed then, not when the next statement needs the connection. */
void rly_store_pump(rly_store_t *st);
/* Moves each shard's cursor forward to the given position (never back), on
 * a connection of its own: it never waits behind a read sent ahead. */
svc_err_t rly_store_advance(rly_store_t *st, const rly_positions_t *p,
                            char errbuf[static SVC_ERRBUF_LEN]);
/* The cursors of the shards in the literal (e.g. "{0,3}"): rows of
 * (shard, txid text, seq). *rows owned by caller. */
svc_err_t rly_store_cursors(rly_store_t *st, const char *shards, PGresult **rows,
                            char errbuf[static SVC_ERRBUF_LEN]);
/* Every shard (rows of one column, ascending). *rows owned by caller. */
svc_err_t rly_store_shards(rly_store_t *st, PGresult **rows, char errbuf[static SVC_ERRBUF_LEN]);
/* The unpublished rows of every shard (counted up to cap) and the oldest
 * one's created_at in Unix ms (0 when none). */
svc_err_t rly_store_stats(rly_store_t *st, int64_t cap, int64_t *rows, int64_t *oldest_ms,
                          char errbuf[static SVC_ERRBUF_LEN]);

/* The session's advisory locks (lease.c): what it holds, as rows of
 * (kind, shard) with kind 'm' for the membership lock and 's' for a shard. */
svc_err_t rly_store_locks_held(rly_store_t *st, PGresult **rows,
                               char errbuf[static SVC_ERRBUF_LEN]);
/* Takes the shared membership lock (without waiting); *got says whether. */
svc_err_t rly_store_join(rly_store_t *st, bool *got, char errbuf[static SVC_ERRBUF_LEN]);
/* How many sessions hold the membership lock on this database. */
svc_err_t rly_store_members(rly_store_t *st, int *n, char errbuf[static SVC_ERRBUF_LEN]);
/* Tries to lock shard (without waiting); *got says whether. */
svc_err_t rly_store_lock_shard(rly_store_t *st, int shard, bool *got,
                               char errbuf[static SVC_ERRBUF_LEN]);
svc_err_t rly_store_unlock_shard(rly_store_t *st, int shard, char errbuf[static SVC_ERRBUF_LEN]);

/* Retention: deletes, per shard in the literal, rows its cursor has passed
 * that are older than older_than_s seconds, among its `limit` oldest;
 * *deleted: how many in all. */
svc_err_t rly_store_prune(rly_store_t *st, const char *shards, int64_t older_than_s, int limit,
                          int *deleted, char errbuf[static SVC_ERRBUF_LEN]);

/* Copies outbox row id (uuid text) into outbox_dead_letters with reason
 * (Kafka refused it for good); a copy made before stays. */
svc_err_t rly_store_bury(rly_store_t *st, const char *id, const char *reason,
                         char errbuf[static SVC_ERRBUF_LEN]);

#endif
