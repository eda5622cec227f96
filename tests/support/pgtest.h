/* SPDX-License-Identifier: Apache-2.0 */
/*
 * support/pgtest.h - the project's Postgres (deploy/local/stack.sh pg-up) as
 * seen by integration tests: one fresh, uniquely named database per test,
 * dropped afterwards, plus small query helpers for assertions and a
 * long-lived session for holding locks.
 *
 * Server: 127.0.0.1, port $SHOPMICRO_PG_PORT (default 25432), user
 * postgres, trust authentication. Every connection made here gives up after
 * PGTEST_CONNECT_TIMEOUT_S, so a missing server fails a test quickly.
 */
#ifndef SUPPORT_PGTEST_H
#define SUPPORT_PGTEST_H

#include <stddef.h>
#include <stdint.h>

#include "svc/core.h"

#define PGTEST_DEFAULT_PORT      25432
#define PGTEST_CONNECT_TIMEOUT_S 5
#define PGTEST_NAME_MAX          64
#define PGTEST_DSN_MAX           256

/* One test database. Caller-allocated; pgtest_db_create fills it. */
typedef struct pgtest_db {
    char name[PGTEST_NAME_MAX]; /* "<prefix>_<pid>_<n>"; "" when none     */
    char dsn[PGTEST_DSN_MAX];   /* libpq conninfo of it, for the service   */
} pgtest_db_t;

/* $SHOPMICRO_PG_PORT, or PGTEST_DEFAULT_PORT when unset or not a port. */
int pgtest_port(void);

/* Writes "host=127.0.0.1 port=<pgtest_port()> dbname=<dbname> user=postgres". */
void pgtest_dsn(const char *dbname, char *buf, size_t len);

/*
 * Creates an empty database named "<prefix>_<pid>_<n>" (prefix: lower-case
 * letters, digits and '_', at most 32 characters) and fills db. Databases
 * with the same prefix left behind by test processes that no longer exist
 * are dropped first. SVC_EUNAVAIL when Postgres cannot be reached,
 * SVC_EINVAL for a bad prefix; the reason is in errbuf (optional).
 */
svc_err_t pgtest_db_create(pgtest_db_t *db, const char *prefix, char errbuf[static SVC_ERRBUF_LEN]);

/* Drops the database WITH (FORCE) (disconnecting its sessions) and clears
 * db->name. A no-op for a db whose name is "". */
svc_err_t pgtest_db_drop(pgtest_db_t *db, char errbuf[static SVC_ERRBUF_LEN]);

/* Runs sql (any number of statements, no result wanted) on a connection of
 * its own. */
svc_err_t pgtest_exec(const char *dsn, const char *sql, char errbuf[static SVC_ERRBUF_LEN]);

/* Runs a query returning one row with one column (NULL gives "") and copies
 * the value into out (truncated to len). SVC_ENOTFOUND when no row. */
svc_err_t pgtest_scalar(const char *dsn, const char *sql, char *out, size_t len,
                        char errbuf[static SVC_ERRBUF_LEN]);

/* pgtest_scalar for an integer result, e.g. "SELECT count(*) FROM products". */
svc_err_t pgtest_scalar_int(const char *dsn, const char *sql, int64_t *out,
                            char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Polls an integer query (every few ms, each on a fresh connection) until
 * it returns at least `want`, for up to timeout_ms. SVC_OK when it did;
 * SVC_ETIMEDOUT otherwise. *last (optional) gets the last value seen.
 */
svc_err_t pgtest_wait_int_at_least(const char *dsn, const char *sql, int64_t want, int timeout_ms,
                                   int64_t *last, char errbuf[static SVC_ERRBUF_LEN]);

/* A session that stays open between statements, e.g. to hold a lock:
 *   BEGIN; LOCK TABLE products IN ACCESS EXCLUSIVE MODE;  ...  ROLLBACK
 * Not thread-safe: one thread per session. */
typedef struct pgtest_conn pgtest_conn_t;

/* On SVC_OK *out is owned by caller (pgtest_conn_close). */
svc_err_t pgtest_conn_open(const char *dsn, pgtest_conn_t **out,
                           char errbuf[static SVC_ERRBUF_LEN]);
svc_err_t pgtest_conn_exec(pgtest_conn_t *c, const char *sql, char errbuf[static SVC_ERRBUF_LEN]);
/* The server process id of the session (pg_backend_pid()). */
int pgtest_conn_backend_pid(const pgtest_conn_t *c);
/* Closes the session; an open transaction is rolled back. NULL-safe. */
void pgtest_conn_close(pgtest_conn_t *c);

#endif /* SUPPORT_PGTEST_H */
