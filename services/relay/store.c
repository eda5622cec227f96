/* SPDX-License-Identifier: Apache-2.0 */
/* store.c - the relay's SQL. Every statement is prepared and parameterised. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

/* The advisory lock keys (two int4s; pg_locks shows them as classid and
 * objid): a shard's lease is (RLY_LOCK_SHARD, shard), exclusive; every
 * relay of a database also holds (RLY_LOCK_MEMBER, 0) shared, so that each
 * can count the others. */
#define RLY_LOCK_SHARD    "1919249529"
#define RLY_LOCK_MEMBER   "1919249530"
#define MY_ADVISORY_LOCKS "FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "

enum {
    STMT_HORIZON,
    STMT_READ,
    STMT_CURSORS,
    STMT_SHARDS,
    STMT_STATS,
    STMT_HELD,
    STMT_JOIN,
    STMT_MEMBERS,
    STMT_LOCK,
    STMT_UNLOCK,
    STMT_PRUNE,
    STMT_BURY,
};

static const db_stmt_t stmts[] = {
    /* The horizon, in two steps; the read may only return rows below it:
     * every transaction of this database with a smaller id has ended, so no
     * row can still join them from a transaction committing late
     * (services/relay/schema/0007). This statement: B, the xmax of its own
     * snapshot (every id below B was assigned before it), then L, the ids of
     * the transactions of this database running now (pg_stat_activity, read
     * during execution, so after that snapshot). The read, a statement later,
     * takes as horizon the oldest id running at its own snapshot that is in
     * L or not below B (its xmax if none). An id below B that is not in L
     * and still runs at the read belongs to another database: had it been
     * ours, it was running when L was read. So a long transaction in another
     * database (the catalog's, for order's outbox) no longer holds these
     * rows back, as pg_snapshot_xmin, the whole cluster's, did. (No prepared
     * transactions: they have no pg_stat_activity row; max_prepared_
     * transactions is 0.) */
    [STMT_HORIZON] = {"rly_horizon",
                      "SELECT pg_snapshot_xmax(pg_current_snapshot())::text, (SELECT "
                      "coalesce(array_agg(a.backend_xid), '{}')::text FROM pg_stat_activity a "
                      "WHERE a.datid = (SELECT oid FROM pg_database WHERE datname = "
                      "current_database()) AND a.backend_xid IS NOT NULL)",
                      0, DB_STMT_IDEMPOTENT},
    /* h: the horizon (above; $5 B, $6 L), taken once. held: whether a
     * shard's newest committed row is above it, waiting for an older
     * transaction (whose end may send no NOTIFY), so the relay looks again
     * soon; one backward index probe per shard. (It was an EXISTS over
     * txid >= horizon, which the planner, guessing that a third of the table
     * matches, ran as a scan of every row kept, at every read.) Then, per
     * shard, its rows after its position: one index range scan each
     * (outbox_relay_order). The LEFT JOIN keeps one row when none is read,
     * to carry held. No ORDER BY: the nested loop yields each shard's range
     * in turn, and rly_rows_decode checks (a sort here costs the backend
     * CPU for every row, for an order the rows already come in).
     * Results in binary (rows.h decodes them): no output function per
     * value. */
    [STMT_READ] = {"rly_read",
                   "WITH h AS MATERIALIZED (SELECT least(pg_snapshot_xmax(s.s), (SELECT min(x) "
                   "FROM pg_snapshot_xip(s.s) AS x WHERE x >= $5::xid8 OR xid(x) = "
                   "ANY($6::xid[]))) AS x FROM (SELECT pg_current_snapshot() AS s) s), "
                   "c AS MATERIALIZED (SELECT * FROM unnest($1::smallint[], $2::xid8[], "
                   "$3::bigint[]) AS c(shard, txid, seq)), "
                   "t AS (SELECT coalesce(bool_or(n.txid >= h.x), false) AS held FROM h, c, "
                   "LATERAL (SELECT txid FROM outbox WHERE shard = c.shard "
                   "ORDER BY txid DESC, seq DESC LIMIT 1) n) "
                   "SELECT t.held, r.shard, r.txid, r.seq, r.id, r.aggregate_id, "
                   "r.topic, r.ce_type, r.ce_source, r.payload_pb, r.request_id, r.created_at "
                   "FROM h CROSS JOIN t LEFT JOIN LATERAL ("
                   "SELECT o.* FROM c, LATERAL (SELECT shard, txid, seq, id, aggregate_id, "
                   "topic, ce_type, ce_source, payload_pb, request_id, created_at FROM outbox "
                   "WHERE shard = c.shard AND (txid, seq) > (c.txid, c.seq) AND txid < h.x "
                   "AND payload_pb IS NOT NULL ORDER BY txid, seq LIMIT $4) o) r ON true",
                   6, DB_STMT_IDEMPOTENT | DB_STMT_BINARY},
    [STMT_CURSORS] = {"rly_cursors",
                      "SELECT shard, txid::text, seq FROM outbox_cursor "
                      "WHERE shard = ANY($1::smallint[]) ORDER BY shard",
                      1, DB_STMT_IDEMPOTENT},
    [STMT_SHARDS] = {"rly_shards", "SELECT shard FROM outbox_cursor ORDER BY shard", 0,
                     DB_STMT_IDEMPOTENT},
    /* For /metrics: each shard's rows after its cursor, by index range (the
     * view outbox_pending joins the two tables, which the planner does with
     * a scan of every row kept); the count stops at $1 rows, so a refresh
     * costs the same with a backlog of a million. */
    [STMT_STATS] = {"rly_stats",
                    "SELECT (SELECT count(*) FROM (SELECT 1 FROM outbox_cursor c, LATERAL "
                    "(SELECT 1 FROM outbox o WHERE o.shard = c.shard AND (o.txid, o.seq) > "
                    "(c.txid, c.seq) AND o.payload_pb IS NOT NULL ORDER BY o.txid, o.seq "
                    "LIMIT $1) p LIMIT $1) b), "
                    "COALESCE((SELECT (extract(epoch FROM min(f.created_at)) * 1000)::bigint "
                    "FROM outbox_cursor c, LATERAL (SELECT created_at FROM outbox o WHERE "
                    "o.shard = c.shard AND (o.txid, o.seq) > (c.txid, c.seq) AND o.payload_pb "
                    "IS NOT NULL ORDER BY o.txid, o.seq LIMIT 1) f), 0)",
                    1, DB_STMT_IDEMPOTENT},
    [STMT_HELD] = {"rly_locks_held",
                   "SELECT CASE WHEN classid = " RLY_LOCK_MEMBER " THEN 'm' ELSE 's' END, "
                   "objid::int " MY_ADVISORY_LOCKS "AND pid = pg_backend_pid() "
                   "AND classid IN (" RLY_LOCK_SHARD ", " RLY_LOCK_MEMBER ")",
                   0, DB_STMT_IDEMPOTENT},
    [STMT_JOIN] = {"rly_join", "SELECT pg_try_advisory_lock_shared(" RLY_LOCK_MEMBER ", 0)", 0, 0},
    [STMT_MEMBERS] = {"rly_members",
                      "SELECT count(*) " MY_ADVISORY_LOCKS "AND classid = " RLY_LOCK_MEMBER
                      " AND objid = 0 AND database = "
                      "(SELECT oid FROM pg_database WHERE datname = current_database())",
                      0, DB_STMT_IDEMPOTENT},
    [STMT_LOCK] = {"rly_lock_shard", "SELECT pg_try_advisory_lock(" RLY_LOCK_SHARD ", $1::int)", 1,
                   0},
    [STMT_UNLOCK] = {"rly_unlock_shard", "SELECT pg_advisory_unlock(" RLY_LOCK_SHARD ", $1::int)",
                     1, 0},
    /* Retention: per shard, of the oldest $3 rows its cursor has passed,
     * those older than $2 s. Only the oldest $3 are looked at, so a prune
     * costs at most that many rows of an index range per shard even when
     * none is old enough (the rows behind them are younger, as txid order
     * is commit order, near enough). Rows after a cursor are never touched:
     * what is not published stays, however old. */
    [STMT_PRUNE] = {"rly_prune",
                    "WITH d AS (SELECT x.id FROM outbox_cursor k, LATERAL (SELECT id, created_at "
                    "FROM outbox WHERE shard = k.shard AND (txid, seq) <= (k.txid, k.seq) "
                    "ORDER BY txid, seq LIMIT $3) x WHERE k.shard = ANY($1::smallint[]) "
                    "AND x.created_at < now() - make_interval(secs => $2::double precision)) "
                    "DELETE FROM outbox o USING d WHERE o.id = d.id RETURNING 1",
                    3, DB_STMT_IDEMPOTENT},
    /* A row Kafka refuses for good, copied before its cursor passes it
     * (schema/0008). A repeat (a crash before the cursor moved) keeps the
     * first copy. */
    [STMT_BURY] = {"rly_bury",
                   "INSERT INTO outbox_dead_letters (id, shard, aggregate_id, event_type, topic, "
                   "ce_type, payload_pb, created_at, reason) SELECT id, shard, aggregate_id, "
                   "event_type, topic, ce_type, payload_pb, created_at, $2 FROM outbox "
                   "WHERE id = $1::uuid ON CONFLICT (id) DO NOTHING",
                   2, DB_STMT_IDEMPOTENT},
};

/* The cursor move, on a connection of its own (the mover, below).
 *
 * Forward only: a relay that lost its lease without knowing (its
 * session re-made) can only ever move a cursor over rows it had
 * published itself, never back over another's. The commit need not
 * wait for the WAL flush: a move lost in a Postgres crash (the last
 * ~0.6 s, 3 x wal_writer_delay) only publishes its rows again, with the
 * same ce_id, which the contract allows after any crash. */
static const db_stmt_t mover_stmts[] = {
    {"rly_advance",
     "UPDATE outbox_cursor k SET txid = n.txid, seq = n.seq, moved_at = now() "
     "FROM unnest($1::smallint[], $2::xid8[], $3::bigint[]) AS n(shard, txid, seq), "
     "(SELECT set_config('synchronous_commit', 'off', true)) AS async "
     "WHERE k.shard = n.shard AND (k.txid, k.seq) < (n.txid, n.seq)",
     3, DB_STMT_IDEMPOTENT},
};

/* The session's planner settings (pkg/db's server_options).
 *
 * Generic plans: the read's parameters are arrays, for which Postgres keeps
 * planning every execution anew (a custom plan) although the plan never
 * changes. A generic plan is made once, which saves that planning on
 * every read, and the relay reads once per NOTIFY.
 *
 * Index ranges only: every statement here reads a range of a shard after
 * (or, retention, before) its cursor, a few rows of a table that keeps
 * RELAY_RETENTION_S of them (a week: millions). The planner cannot see that:
 * a comparison with a cursor it does not know at plan time is guessed to
 * match a third of the rows, and a scan of the whole table, or a bitmap of a
 * third of it, then looks as cheap as the range (docs/bench/history.md,
 * "The relay's reads": a scan of the whole outbox per read). Without
 * sequential and bitmap scans it takes the index ranges these statements
 * were written for; tests/integration/relay checks that the relay scans the
 * outbox by index only. No JIT: each execution would compile again, for
 * statements that run in well under a millisecond. */
#define PLANNER_OPTIONS                                                                            \
    "-c plan_cache_mode=force_generic_plan -c enable_seqscan=off -c enable_bitmapscan=off "        \
    "-c jit=off"

/* The connection, and the read sent ahead (rly_store_read_ahead): its
 * parameters, and its result once another statement needed the connection.
 * The cursor moves have a connection of their own, the mover: on db they
 * waited behind the read sent ahead (it runs for milliseconds during a
 * backlog), which held up the finished batch and, behind it, the next one.
 * The move needs no lease held by the mover's own Postgres session (it is
 * forward only, above). */
struct rly_store {
    db_conn_t *db;
    db_conn_t *mover;
    char ahead[RLY_STORE_KEY_MAX]; /* "" when none; else shards|txids|seqs|limit */
    PGresult *early;               /* its result, received early; or NULL     */
    svc_err_t early_err;
    char early_reason[SVC_ERRBUF_LEN];
};

/* The lease session's liveness, on the server's side (pkg/db's
 * server_options, with the planner's). The shards' leases are advisory locks
 * held by that Postgres session (lease.h): a relay killed on a live host loses them at
 * once, as its kernel closes the connection. One that dies with its host, or
 * behind a network partition, closes nothing: Postgres keeps its backend,
 * and the locks, until TCP gives up on the peer, which with Linux's defaults
 * (tcp_keepalive_time 7200 s, then 9 probes 75 s apart) is over two hours of
 * unread shards. Probes after 5 s of silence, 3 of them a second apart, and
 * data unacknowledged for 8 s end such a session within about 8 s, and the
 * other relays take its shards on their next tick: the bound the consumer
 * groups' 6 s session gives theirs. A live relay's kernel answers probes
 * whatever the relay does; a network that is gone for longer than that costs
 * the relay its session, which pkg/db makes again (the leases with it, on the
 * next tick). Ignored on a Unix socket, where a peer cannot vanish. */
#define LEASE_LIVENESS_OPTIONS                                                                     \
    " -c tcp_keepalives_idle=5 -c tcp_keepalives_interval=1 -c tcp_keepalives_count=3 "            \
    "-c tcp_user_timeout=8000"

svc_err_t rly_store_new(const char *dsn, const char *name, int statement_timeout_ms,
                        rly_store_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    rly_store_t *st = calloc(1, sizeof *st);
    db_opts_t o;
    svc_err_t err;

    *out = NULL;
    if (st == NULL) {
        svc_errbuf_set(errbuf, "relay store: out of memory");
        return SVC_ENOMEM;
    }
    db_opts_fill(&o, dsn, stmts, SVC_COUNTOF(stmts), statement_timeout_ms, name);
    o.server_options = PLANNER_OPTIONS LEASE_LIVENESS_OPTIONS;
    err = db_conn_new(&o, &st->db, errbuf);
    if (err == SVC_OK) /* the move needs none of the read's planner settings */
        err = db_conn_open(dsn, mover_stmts, SVC_COUNTOF(mover_stmts), statement_timeout_ms, name,
                           &st->mover, errbuf);
    if (err != SVC_OK) {
        rly_store_free(st);
        return err;
    }
    *out = st;
    return SVC_OK;
}

static void forget_ahead(rly_store_t *st)
{
    PQclear(st->early);
    st->early = NULL;
    st->ahead[0] = '\0';
}

void rly_store_free(rly_store_t *st)
{
    if (st == NULL)
        return;
    forget_ahead(st);
    db_conn_free(st->db);
    db_conn_free(st->mover);
    free(st);
}

/* Before any statement: a read still on the wire is received and kept. */
static void settle(rly_store_t *st)
{
    if (db_sent(st->db))
        st->early_err = db_receive(st->db, SVC_DEADLINE_NONE, &st->early, st->early_reason);
}

static svc_err_t query(rly_store_t *st, size_t idx, const char *const *params, PGresult **rows,
                       char errbuf[static SVC_ERRBUF_LEN])
{
    *rows = NULL;
    settle(st);
    return db_exec(st->db, idx, params, SVC_DEADLINE_NONE, rows, errbuf);
}

static svc_err_t run(rly_store_t *st, size_t idx, const char *const *params, int *n,
                     char errbuf[static SVC_ERRBUF_LEN])
{
    settle(st);
    return db_run(st->db, idx, params, SVC_DEADLINE_NONE, n, errbuf);
}

/* A statement answering one value in one row: "t" or a number. */
static svc_err_t query_value(rly_store_t *st, size_t idx, const char *const *params, char *val,
                             size_t cap, char errbuf[static SVC_ERRBUF_LEN])
{
    PGresult *r;
    svc_err_t err = query(st, idx, params, &r, errbuf);

    if (err == SVC_OK)
        snprintf(val, cap, "%s", PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    return err;
}

/* The read's parameters as one string (what a read sent ahead is matched
 * by); false when they do not fit, and then nothing is read ahead. */
static bool read_key(const rly_positions_t *p, const char *limit, char *out)
{
    int n = snprintf(out, RLY_STORE_KEY_MAX, "%s|%s|%s|%s", p->shards, p->txids, p->seqs, limit);

    return n > 0 && n < RLY_STORE_KEY_MAX;
}

/* The horizon (rly_horizon, a statement of its own before the read's), then
 * the read: sent, or run when *rows is wanted. */
static svc_err_t read_rows(rly_store_t *st, const rly_positions_t *p, const char *lim,
                           PGresult **rows, char errbuf[static SVC_ERRBUF_LEN])
{
    PGresult *h;
    svc_err_t err = query(st, STMT_HORIZON, NULL, &h, errbuf);

    if (err == SVC_OK) {
        const char *params[] = {p->shards,           p->txids,           p->seqs, lim,
                                PQgetvalue(h, 0, 0), PQgetvalue(h, 0, 1)};

        err = rows != NULL ? db_exec(st->db, STMT_READ, params, SVC_DEADLINE_NONE, rows, errbuf)
                           : db_send(st->db, STMT_READ, params, errbuf);
    }
    PQclear(h);
    return err;
}

svc_err_t rly_store_read(rly_store_t *st, const rly_positions_t *p, int limit, PGresult **rows,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    char lim[16], key[RLY_STORE_KEY_MAX];

    *rows = NULL;
    snprintf(lim, sizeof lim, "%d", limit);
    settle(st);
    if (st->ahead[0] != '\0' && read_key(p, lim, key) && strcmp(key, st->ahead) == 0) {
        svc_err_t err = st->early_err;

        *rows = st->early;
        st->early = NULL;
        if (err != SVC_OK)
            svc_errbuf_set(errbuf, "%s", st->early_reason);
        forget_ahead(st);
        return err;
    }
    forget_ahead(st); /* read for other positions: the cursors moved back, the lease changed */
    return read_rows(st, p, lim, rows, errbuf);
}

void rly_store_read_ahead(rly_store_t *st, const rly_positions_t *p, int limit)
{
    char lim[16], errbuf[SVC_ERRBUF_LEN];

    settle(st);
    forget_ahead(st);
    snprintf(lim, sizeof lim, "%d", limit);
    if (read_key(p, lim, st->ahead) && read_rows(st, p, lim, NULL, errbuf) != SVC_OK)
        st->ahead[0] = '\0'; /* the read itself will meet the failure, and say it */
}

void rly_store_pump(rly_store_t *st)
{
    (void)db_pump(st->db);
}

svc_err_t rly_store_advance(rly_store_t *st, const rly_positions_t *p,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    const char *params[] = {p->shards, p->txids, p->seqs};

    return db_run(st->mover, 0, params, SVC_DEADLINE_NONE, NULL, errbuf);
}

svc_err_t rly_store_cursors(rly_store_t *st, const char *shards, PGresult **rows,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    const char *params[] = {shards};

    return query(st, STMT_CURSORS, params, rows, errbuf);
}

svc_err_t rly_store_shards(rly_store_t *st, PGresult **rows, char errbuf[static SVC_ERRBUF_LEN])
{
    return query(st, STMT_SHARDS, NULL, rows, errbuf);
}

svc_err_t rly_store_stats(rly_store_t *st, int64_t cap, int64_t *rows, int64_t *oldest_ms,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    char lim[24];
    const char *p[] = {lim};
    PGresult *r;
    svc_err_t err;

    snprintf(lim, sizeof lim, "%lld", (long long)cap);
    err = query(st, STMT_STATS, p, &r, errbuf);
    if (err == SVC_OK) {
        *rows = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        *oldest_ms = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
    }
    PQclear(r);
    return err;
}

svc_err_t rly_store_locks_held(rly_store_t *st, PGresult **rows, char errbuf[static SVC_ERRBUF_LEN])
{
    return query(st, STMT_HELD, NULL, rows, errbuf);
}

svc_err_t rly_store_join(rly_store_t *st, bool *got, char errbuf[static SVC_ERRBUF_LEN])
{
    char v[8];
    svc_err_t err = query_value(st, STMT_JOIN, NULL, v, sizeof v, errbuf);

    *got = err == SVC_OK && v[0] == 't';
    return err;
}

svc_err_t rly_store_members(rly_store_t *st, int *n, char errbuf[static SVC_ERRBUF_LEN])
{
    char v[24];
    svc_err_t err = query_value(st, STMT_MEMBERS, NULL, v, sizeof v, errbuf);

    *n = err == SVC_OK ? atoi(v) : 0;
    return err;
}

svc_err_t rly_store_lock_shard(rly_store_t *st, int shard, bool *got,
                               char errbuf[static SVC_ERRBUF_LEN])
{
    char s[16], v[8];
    const char *p[] = {s};
    svc_err_t err;

    snprintf(s, sizeof s, "%d", shard);
    err = query_value(st, STMT_LOCK, p, v, sizeof v, errbuf);
    *got = err == SVC_OK && v[0] == 't';
    return err;
}

svc_err_t rly_store_unlock_shard(rly_store_t *st, int shard, char errbuf[static SVC_ERRBUF_LEN])
{
    char s[16], v[8];
    const char *p[] = {s};

    snprintf(s, sizeof s, "%d", shard);
    return query_value(st, STMT_UNLOCK, p, v, sizeof v, errbuf);
}

svc_err_t rly_store_prune(rly_store_t *st, const char *shards, int64_t older_than_s, int limit,
                          int *deleted, char errbuf[static SVC_ERRBUF_LEN])
{
    char age[24], lim[16];
    const char *p[] = {shards, age, lim};

    snprintf(age, sizeof age, "%lld", (long long)older_than_s);
    snprintf(lim, sizeof lim, "%d", limit);
    *deleted = 0;
    return run(st, STMT_PRUNE, p, deleted, errbuf);
}

svc_err_t rly_store_bury(rly_store_t *st, const char *id, const char *reason,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    const char *p[] = {id, reason};

    return run(st, STMT_BURY, p, NULL, errbuf);
}
