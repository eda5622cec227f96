/* SPDX-License-Identifier: Apache-2.0 */
/*
 * db/db.h - PostgreSQL through libpq, the way a service needs it:
 *
 *  - one connection per worker thread (a libpq connection is not
 *    thread-safe; one per worker needs no locks and no pool);
 *  - connected lazily and re-established on the next call after it broke,
 *    with every prepared statement prepared again, so "database down" is an
 *    UNAVAILABLE answer, never a crash, and "database back" heals by itself;
 *  - every statement bounded by the incoming call's deadline: expired work
 *    is skipped, and a statement still running at the deadline is abandoned;
 *  - schema migrations applied in order, once, at start-up.
 *
 * Only parameterised, prepared SQL: values never become SQL text.
 */
#ifndef DB_DB_H
#define DB_DB_H

#include <libpq-fe.h>

#include "svc/core.h"

/* db_stmt_t.flags */
#define DB_STMT_IDEMPOTENT                                                                         \
    1u /* safe to run twice: retried once on a connection
          found dead (e.g. after a Postgres restart)    */
#define DB_STMT_BINARY                                                                             \
    2u /* results in binary format (parameters stay
          text): no output function per value in the
          server, for wide reads; the caller decodes
          each column's binary form itself           */

/* A statement the connection prepares on every (re)connect. */
typedef struct db_stmt {
    const char *name; /* prepared statement name                           */
    const char *sql;  /* with $1..$n placeholders                          */
    int nparams;
    unsigned flags; /* DB_STMT_*; 0: not retried, results in text (each
                       value a NUL-terminated string)                    */
} db_stmt_t;

/* One schema migration; see svc_embed_migrations() in pkg/cmake. */
typedef struct db_migration {
    int version; /* applied in increasing order, each exactly once    */
    const char *name;
    const char *sql;
} db_migration_t;

#define DB_DEFAULT_CONNECT_TIMEOUT_MS   2000
#define DB_DEFAULT_STATEMENT_TIMEOUT_MS 5000

typedef struct db_opts {
    const char *dsn;        /* libpq conninfo; copied                  */
    const db_stmt_t *stmts; /* borrowed; must outlive the connection   */
    size_t n_stmts;
    int connect_timeout_ms; /* DB_DEFAULT_CONNECT_TIMEOUT_MS           */
    /* Server-side backstop for calls without a deadline, and for abandoned
     * statements: Postgres cancels anything running longer. */
    int statement_timeout_ms;     /* DB_DEFAULT_STATEMENT_TIMEOUT_MS         */
    const char *application_name; /* shown in pg_stat_activity; copied       */
    /* More server settings for the session, "-c name=value ..." (the
     * relay's planner settings); copied; NULL: none. The session gets, in
     * this order, the environment's PGOPTIONS (which libpq would apply
     * only without an explicit options keyword, which this connection
     * needs for statement_timeout), these, then statement_timeout. */
    const char *server_options;
} db_opts_t;

typedef struct db_conn db_conn_t;

void db_opts_init(db_opts_t *o);
/* db_opts_init, then what every caller sets: dsn, the statement table
 * stmts[0..n), statement_timeout_ms and application_name. */
void db_opts_fill(db_opts_t *o, const char *dsn, const db_stmt_t *stmts, size_t n,
                  int statement_timeout_ms, const char *application_name);

/* Creates a connection handle. Does not connect: the first db_exec does,
 * so a service can start while Postgres is down. *out is owned by caller. */
svc_err_t db_conn_new(const db_opts_t *o, db_conn_t **out, char errbuf[static SVC_ERRBUF_LEN]);
/* Closes the connection. NULL-safe. */
void db_conn_free(db_conn_t *c);

/*
 * Runs prepared statement number `idx` (index into opts.stmts) with text
 * parameters (NULL = SQL NULL), finishing by deadline_ns (monotonic;
 * SVC_DEADLINE_NONE: statement_timeout only).
 *
 * SVC_OK only when the server answered every result OK and then said
 * ReadyForQuery with the transaction where the statement leaves it: idle
 * after a statement outside a transaction (its implicit transaction
 * committed) or after COMMIT/ROLLBACK, open after BEGIN or inside one.
 * Rows that arrived before a connection was lost are not a success.
 *
 * On SVC_OK, *res is the result (PGRES_TUPLES_OK or PGRES_COMMAND_OK),
 * owned by caller: PQclear() it. Errors:
 *   SVC_EUNAVAIL   connection down or lost (re-established on the next call)
 *   SVC_ETIMEDOUT  deadline reached (the connection is dropped and re-made)
 *   SVC_EEXIST     unique violation      SVC_EINVAL  bad value / check failed
 *   SVC_EABORTED   serialization failure or deadlock
 *   SVC_EINTERNAL  anything else
 * with libpq's message in errbuf. Not thread-safe: one thread per conn.
 */
svc_err_t db_exec(db_conn_t *c, size_t idx, const char *const *params, uint64_t deadline_ns,
                  PGresult **res, char errbuf[static SVC_ERRBUF_LEN]);

/*
 * After a failed call: true when its statement may have been carried out
 * all the same. It was sent and the server never said how it ended: the
 * connection was lost or the deadline passed before ReadyForQuery (or a
 * COMMIT's send broke). A write is then neither done nor undone as far as
 * the caller knows; only the database can tell (an idempotency key, an
 * event id). False after a success and after the server's own verdict (an
 * error followed by ReadyForQuery: nothing of the statement was kept).
 * Counted in shopmicro_db_outcome_unknown_total.
 */
bool db_outcome_unknown(const db_conn_t *c);

/* A statement in two halves, so that the caller works while Postgres does
 * (the relay reads its next batch while it produces this one). db_send
 * sends statement idx and returns without waiting; db_receive collects its
 * result by deadline_ns, as db_exec would. Between the two, no other call
 * may use c (db_exec and db_send fail with SVC_EINTERNAL); db_sent says
 * whether a result is still to be received. A send is never retried: a
 * connection found dead fails it with SVC_EUNAVAIL (the next call makes a
 * new one). */
svc_err_t db_send(db_conn_t *c, size_t idx, const char *const *params,
                  char errbuf[static SVC_ERRBUF_LEN]);
svc_err_t db_receive(db_conn_t *c, uint64_t deadline_ns, PGresult **res,
                     char errbuf[static SVC_ERRBUF_LEN]);
bool db_sent(const db_conn_t *c);
/* Between the two: takes in what has arrived of the result, without
 * waiting (libpq parses each row as it comes), so that a large result is
 * parsed while the caller would otherwise idle rather than all at once in
 * db_receive. true when db_receive will not wait (also after a failure,
 * which db_receive reports). */
bool db_pump(db_conn_t *c);

/* What every service's store does to open its connection: db_conn_new with
 * db_opts_fill's options (the others their defaults). */
svc_err_t db_conn_open(const char *dsn, const db_stmt_t *stmts, size_t n, int statement_timeout_ms,
                       const char *application_name, db_conn_t **out,
                       char errbuf[static SVC_ERRBUF_LEN]);

/* db_exec for a statement whose rows are not needed; *n_rows (optional)
 * gets how many it returned. */
svc_err_t db_run(db_conn_t *c, size_t idx, const char *const *params, uint64_t deadline_ns,
                 int *n_rows, char errbuf[static SVC_ERRBUF_LEN]);

/* Runs statement idx (the store's COMMIT). A COMMIT of a transaction that
 * an earlier statement aborted succeeds as a statement but answers
 * "ROLLBACK": that is SVC_EABORTED here, never SVC_OK, so nobody
 * acknowledges effects the database threw away. */
svc_err_t db_commit(db_conn_t *c, size_t idx, uint64_t deadline_ns,
                    char errbuf[static SVC_ERRBUF_LEN]);

/* A ROLLBACK after a failure gets a deadline of its own: the caller's may
 * be the very thing that ran out, and a connection left inside a
 * transaction would fail every later call on it. */
#define DB_ROLLBACK_MS 1000

/* Runs statement idx (the store's ROLLBACK) within DB_ROLLBACK_MS. */
svc_err_t db_rollback(db_conn_t *c, size_t idx, char errbuf[static SVC_ERRBUF_LEN]);

/* True when the connection is established and idle (for readiness checks). */
bool db_conn_ok(const db_conn_t *c);

/*
 * Applies the migrations not yet recorded in table schema_migrations, in
 * version order, each in its own transaction, under an advisory lock so
 * that two instances starting together do not race. Uses a connection of
 * its own. Logs one line per applied migration under `module`.
 */
svc_err_t db_migrate(const char *dsn, const db_migration_t *m, size_t n, const char *module,
                     char errbuf[static SVC_ERRBUF_LEN]);

/* db_migrate at a service's start: the database may still be starting
 * (compose, a reboot), so while it is unavailable (SVC_EUNAVAIL) this tries
 * again every 250 ms for up to wait_ms, logging one warn line under module
 * when it begins to wait. Returns the last attempt's result. */
svc_err_t db_migrate_wait(const char *dsn, const db_migration_t *m, size_t n, const char *module,
                          int64_t wait_ms, char errbuf[static SVC_ERRBUF_LEN]);

/*
 * A readiness probe: "can this service reach its database now?", asked by
 * the threads that report health (the admin port's /readyz, pkg/rpc's
 * grpc.health.v1). One connection of its own behind a mutex, SELECT 1 with
 * a DB_PROBE_TIMEOUT_MS deadline; an answer is reused for DB_PROBE_CACHE_MS
 * so that a probe flood does not load the database. Thread-safe.
 */
#define DB_PROBE_TIMEOUT_MS 1000
#define DB_PROBE_CACHE_MS   500
typedef struct db_probe db_probe_t;
/* Connects lazily (the first check). *out owned by caller. */
svc_err_t db_probe_new(const char *dsn, const char *application_name, db_probe_t **out,
                       char errbuf[static SVC_ERRBUF_LEN]);
void db_probe_free(db_probe_t *p); /* NULL-safe */
/* True when reachable; detail (cap bytes) says what is wrong, or "reachable". */
bool db_probe_check(db_probe_t *p, char *detail, size_t cap);

/*
 * The process's database metrics in Prometheus text (docs/operations.md):
 * shopmicro_db_queries_total{statement,outcome}, shopmicro_db_query_seconds
 * {statement} (histogram), shopmicro_db_connects_total{result} and
 * shopmicro_db_connections_open, over every connection of the process.
 * Contract of rs_metrics_render (*len the full length, SVC_ERANGE when cut).
 * Thread-safe.
 */
svc_err_t db_metrics_render(char *buf, size_t cap, size_t *len);

/* Maps a failed result to an svc_err_t by SQLSTATE (exposed for tests). */
svc_err_t db_err_from_sqlstate(const char *sqlstate);

#endif /* DB_DB_H */
