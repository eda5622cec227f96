/* SPDX-License-Identifier: Apache-2.0 */
/* store.c - the relay's SQL. Every statement is prepared and parameterised. */
#include <stdlib.h>

#include "store.h"

#define RFC3339(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
/* Its own deadline, as in the order store: the batch's may be what ran out. */

enum { STMT_BEGIN, STMT_ASYNC, STMT_CLAIM, STMT_MARK, STMT_COMMIT, STMT_ROLLBACK, STMT_STATS };

static const db_stmt_t stmts[] = {
    [STMT_BEGIN] = {"rly_begin", "BEGIN", 0, true},
    /* The mark's COMMIT need not wait for the WAL flush: a mark lost in a
     * Postgres crash (the last ~0.6 s, 3 x wal_writer_delay) only makes a
     * later claim publish its rows again, with the same ce_id, which the
     * contract allows after any crash. The order's own commit, which
     * creates the event, stays synchronous: this is the relay's session. */
    [STMT_ASYNC] = {"rly_async_commit", "SELECT set_config('synchronous_commit', 'off', true)",
                    0, false},
    /* Oldest first (seq), rows another relay holds skipped, and per
     * aggregate only its oldest unpublished row: a row whose aggregate has
     * an older unpublished row (claimed by another relay, or waiting) is not
     * taken. So two relays never publish two events of one order out of
     * order, and one batch holds at most one event per order. Rows without
     * a wire encoding (written before 0005) are not relayed. */
    [STMT_CLAIM] = {"rly_claim",
                    "SELECT x.id::text, x.aggregate_id, x.topic, x.ce_type, x.ce_source, "
                    "x.payload_pb, x.request_id, " RFC3339("x.created_at") " "
                    "FROM outbox x WHERE x.published_at IS NULL AND x.payload_pb IS NOT NULL "
                    "AND NOT EXISTS (SELECT 1 FROM outbox y WHERE y.aggregate_id = "
                    "x.aggregate_id AND y.published_at IS NULL AND y.payload_pb IS NOT NULL "
                    "AND y.seq < x.seq) "
                    "ORDER BY x.seq LIMIT $1 FOR UPDATE OF x SKIP LOCKED",
                    1, false},
    [STMT_MARK] = {"rly_mark",
                   "UPDATE outbox SET published_at = now() WHERE id = ANY($1::uuid[]) "
                   "AND published_at IS NULL",
                   1, false},
    [STMT_COMMIT] = {"rly_commit", "COMMIT", 0, false},
    [STMT_ROLLBACK] = {"rly_rollback", "ROLLBACK", 0, false},
    /* For /metrics: both halves walk the partial index outbox_relay_queue
     * (published_at IS NULL), the count stops at $1 rows, so a scrape costs
     * the same with a backlog of a million. */
    [STMT_STATS] = {"rly_stats",
                    "SELECT (SELECT count(*) FROM (SELECT 1 FROM outbox WHERE published_at IS "
                    "NULL AND payload_pb IS NOT NULL LIMIT $1) b), "
                    "COALESCE((SELECT (extract(epoch FROM created_at) * 1000)::bigint FROM "
                    "outbox WHERE published_at IS NULL AND payload_pb IS NOT NULL ORDER BY seq "
                    "LIMIT 1), 0)",
                    1, true},
};

svc_err_t rly_store_new(const char *dsn, const char *name, int statement_timeout_ms,
                        rly_store_t **out, char *errbuf)
{
    return db_conn_open(dsn, stmts, SVC_COUNTOF(stmts), statement_timeout_ms, name, out, errbuf);
}

void rly_store_free(rly_store_t *st)
{
    db_conn_free(st);
}

static svc_err_t exec(rly_store_t *st, size_t idx, const char *const *params, char *errbuf)
{
    return db_run(st, idx, params, SVC_DEADLINE_NONE, NULL, errbuf);
}

void rly_store_rollback(rly_store_t *st)
{
    (void)db_rollback(st, STMT_ROLLBACK, NULL);
}

svc_err_t rly_store_claim(rly_store_t *st, int limit, PGresult **rows, char *errbuf)
{
    char lim[16];
    const char *p[] = {lim};
    svc_err_t err = exec(st, STMT_BEGIN, NULL, errbuf);

    *rows = NULL;
    if (err != SVC_OK)
        return err;
    snprintf(lim, sizeof lim, "%d", limit);
    err = exec(st, STMT_ASYNC, NULL, errbuf);
    if (err == SVC_OK)
        err = db_exec(st, STMT_CLAIM, p, SVC_DEADLINE_NONE, rows, errbuf);
    if (err != SVC_OK)
        rly_store_rollback(st);
    return err;
}

svc_err_t rly_store_mark_commit(rly_store_t *st, const char *ids, char *errbuf)
{
    const char *p[] = {ids};
    svc_err_t err = exec(st, STMT_MARK, p, errbuf);

    if (err == SVC_OK)
        err = exec(st, STMT_COMMIT, NULL, errbuf);
    if (err != SVC_OK)
        rly_store_rollback(st);
    return err;
}

svc_err_t rly_store_stats(rly_store_t *st, int64_t cap, int64_t *rows, int64_t *oldest_ms,
                          char *errbuf)
{
    char lim[24];
    const char *p[] = {lim};
    PGresult *r = NULL;
    svc_err_t err;

    snprintf(lim, sizeof lim, "%lld", (long long)cap);
    err = db_exec(st, STMT_STATS, p, SVC_DEADLINE_NONE, &r, errbuf);
    if (err == SVC_OK) {
        *rows = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        *oldest_ms = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
    }
    PQclear(r);
    return err;
}
