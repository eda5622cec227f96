/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migrate.c - schema migrations at start-up.
 *
 * Runs on its own short-lived blocking connection: start-up is the one time
 * a service may wait on the database without a caller waiting on it.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "db/db.h"

/* Any fixed number: instances of all services share one lock space, so
 * two starting at once apply migrations one after the other. */
#define MIGRATION_LOCK_KEY 0x73686f70 /* "shop" */

static svc_err_t run(PGconn *pg, const char *sql, char errbuf[static SVC_ERRBUF_LEN])
{
    PGresult *r = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(r);
    svc_err_t err = SVC_OK;

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        err = db_err_from_sqlstate(PQresultErrorField(r, PG_DIAG_SQLSTATE));
        svc_errbuf_set(errbuf, "%s", PQresultErrorMessage(r));
    }
    PQclear(r);
    return err;
}

static bool applied(PGconn *pg, int version, svc_err_t *err, char errbuf[static SVC_ERRBUF_LEN])
{
    char v[16];
    const char *params[1] = {v};
    PGresult *r;
    bool found = false;

    snprintf(v, sizeof v, "%d", version);
    r = PQexecParams(pg, "SELECT 1 FROM schema_migrations WHERE version = $1", 1, NULL, params,
                     NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        *err = SVC_EINTERNAL;
        svc_errbuf_set(errbuf, "%s", PQresultErrorMessage(r));
    } else {
        found = PQntuples(r) > 0;
    }
    PQclear(r);
    return found;
}

static svc_err_t apply_one(PGconn *pg, const db_migration_t *m, char errbuf[static SVC_ERRBUF_LEN])
{
    char v[16];
    const char *params[2] = {v, m->name};
    PGresult *r;
    svc_err_t err = run(pg, "BEGIN", errbuf);

    if (err != SVC_OK)
        return err;
    err = run(pg, m->sql, errbuf);
    if (err == SVC_OK) {
        snprintf(v, sizeof v, "%d", m->version);
        r = PQexecParams(pg, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", 2,
                         NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            err = SVC_EINTERNAL;
            svc_errbuf_set(errbuf, "%s", PQresultErrorMessage(r));
        }
        PQclear(r);
    }
    if (err == SVC_OK)
        return run(pg, "COMMIT", errbuf);
    run(pg, "ROLLBACK", SVC_ERRBUF_SCRATCH);
    return err;
}

static svc_err_t migrate_on(PGconn *pg, const db_migration_t *m, size_t n, const char *module,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    char lock[96];
    svc_err_t err;

    snprintf(lock, sizeof lock, "SELECT pg_advisory_lock(%d)", MIGRATION_LOCK_KEY);
    err = run(pg, lock, errbuf);
    if (err == SVC_OK)
        err = run(pg,
                  "CREATE TABLE IF NOT EXISTS schema_migrations ("
                  " version integer PRIMARY KEY, name text NOT NULL,"
                  " applied_at timestamptz NOT NULL DEFAULT now())",
                  errbuf);
    for (size_t i = 0; i < n && err == SVC_OK; i++) {
        if (i > 0 && m[i].version <= m[i - 1].version) {
            svc_errbuf_set(errbuf, "migration %s: versions must increase", m[i].name);
            err = SVC_EINTERNAL;
        } else if (!applied(pg, m[i].version, &err, errbuf) && err == SVC_OK) {
            char sub[SVC_ERRBUF_LEN] = "";
            err = apply_one(pg, &m[i], sub);
            if (err == SVC_OK)
                svc_log_info(module, "applied migration %s", m[i].name);
            else
                svc_errbuf_set(errbuf, "migration %s failed: %s", m[i].name, sub);
        }
    }
    return err;
}

/* Postgres NOTICEs ("relation already exists, skipping") are expected
 * chatter of idempotent DDL, not events worth a log line. */
static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

svc_err_t db_migrate(const char *dsn, const db_migration_t *m, size_t n, const char *module,
                     char errbuf[static SVC_ERRBUF_LEN])
{
    PGconn *pg = PQconnectdb(dsn);
    svc_err_t err;

    PQsetNoticeProcessor(pg, quiet, NULL);
    if (PQstatus(pg) != CONNECTION_OK) {
        svc_errbuf_set(errbuf, "database unavailable: %s", PQerrorMessage(pg));
        PQfinish(pg);
        return SVC_EUNAVAIL;
    }
    err = migrate_on(pg, m, n, module, errbuf);
    PQfinish(pg); /* also releases the advisory lock */
    return err;
}

svc_err_t db_migrate_wait(const char *dsn, const db_migration_t *m, size_t n, const char *module,
                          int64_t wait_ms, char errbuf[static SVC_ERRBUF_LEN])
{
    uint64_t until = svc_now_ms() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
    bool told = false;
    svc_err_t err;

    while ((err = db_migrate(dsn, m, n, module, errbuf)) == SVC_EUNAVAIL && svc_now_ms() < until) {
        if (!told)
            svc_log_warn(module, "waiting up to %lld ms for the database: %s", (long long)wait_ms,
                         errbuf);
        told = true;
        nanosleep(&(struct timespec){0, 250 * 1000 * 1000}, NULL);
    }
    return err;
}
