/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pgtest.c - per-test databases and query helpers (see pgtest.h).
 *
 * Plain blocking libpq: a test waits on Postgres the way a person would, and
 * the connect timeout bounds the one wait that could otherwise hang.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "support/pgtest.h"

#define PREFIX_MAX 32

struct pgtest_conn {
    PGconn *pg;
};

int pgtest_port(void)
{
    const char *s = getenv("SHOPMICRO_PG_PORT");
    char *end;
    long v;

    if (s == NULL || s[0] == '\0')
        return PGTEST_DEFAULT_PORT;
    v = strtol(s, &end, 10);
    return (*end != '\0' || v < 1 || v > 65535) ? PGTEST_DEFAULT_PORT : (int)v;
}

void pgtest_dsn(const char *dbname, char *buf, size_t len)
{
    snprintf(buf, len, "host=127.0.0.1 port=%d dbname=%s user=postgres", pgtest_port(), dbname);
}

static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message; /* NOTICEs ("database does not exist, skipping") are noise */
}

static PGconn *connect_to(const char *dsn, char errbuf[static SVC_ERRBUF_LEN])
{
    char timeout[16];
    const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
    const char *vals[] = {dsn, timeout, "pgtest", NULL};
    PGconn *pg;

    snprintf(timeout, sizeof timeout, "%d", PGTEST_CONNECT_TIMEOUT_S);
    pg = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(pg) != CONNECTION_OK) {
        svc_errbuf_set(errbuf, "cannot connect to %s: %s", dsn,
                       pg != NULL ? PQerrorMessage(pg) : "out of memory");
        PQfinish(pg);
        return NULL;
    }
    PQsetNoticeProcessor(pg, quiet, NULL);
    return pg;
}

static svc_err_t exec_on(PGconn *pg, const char *sql, PGresult **keep,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    PGresult *r = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(r);
    svc_err_t err = SVC_OK;

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        err = PQstatus(pg) == CONNECTION_OK ? SVC_EINTERNAL : SVC_EUNAVAIL;
        svc_errbuf_set(errbuf, "%s: %s", sql,
                       r != NULL ? PQresultErrorMessage(r) : PQerrorMessage(pg));
    }
    if (keep != NULL && err == SVC_OK)
        *keep = r;
    else
        PQclear(r);
    return err;
}

svc_err_t pgtest_exec(const char *dsn, const char *sql, char errbuf[static SVC_ERRBUF_LEN])
{
    PGconn *pg = connect_to(dsn, errbuf);
    svc_err_t err;

    if (pg == NULL)
        return SVC_EUNAVAIL;
    err = exec_on(pg, sql, NULL, errbuf);
    PQfinish(pg);
    return err;
}

svc_err_t pgtest_scalar(const char *dsn, const char *sql, char *out, size_t len,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    PGconn *pg = connect_to(dsn, errbuf);
    PGresult *r = NULL;
    svc_err_t err;

    if (pg == NULL)
        return SVC_EUNAVAIL;
    err = exec_on(pg, sql, &r, errbuf);
    if (err != SVC_OK)
        goto out;
    if (PQntuples(r) < 1 || PQnfields(r) < 1) {
        svc_errbuf_set(errbuf, "%s: no rows", sql);
        err = SVC_ENOTFOUND;
        goto out;
    }
    snprintf(out, len, "%s", PQgetvalue(r, 0, 0));
out:
    PQclear(r);
    PQfinish(pg);
    return err;
}

svc_err_t pgtest_scalar_int(const char *dsn, const char *sql, int64_t *out,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    char buf[32], *end;
    svc_err_t err = pgtest_scalar(dsn, sql, buf, sizeof buf, errbuf);

    if (err != SVC_OK)
        return err;
    errno = 0;
    *out = strtoll(buf, &end, 10);
    if (errno != 0 || end == buf || *end != '\0') {
        svc_errbuf_set(errbuf, "%s: '%s' is not an integer", sql, buf);
        return SVC_EINVAL;
    }
    return SVC_OK;
}

svc_err_t pgtest_wait_int_at_least(const char *dsn, const char *sql, int64_t want, int timeout_ms,
                                   int64_t *last, char errbuf[static SVC_ERRBUF_LEN])
{
    uint64_t until = svc_now_ms() + (uint64_t)timeout_ms;
    struct timespec pause = {0, 5 * 1000 * 1000};
    int64_t v = INT64_MIN;

    for (;;) {
        svc_err_t err = pgtest_scalar_int(dsn, sql, &v, errbuf);
        if (last != NULL)
            *last = v;
        if (err != SVC_OK)
            return err;
        if (v >= want)
            return SVC_OK;
        if (svc_now_ms() >= until) {
            svc_errbuf_set(errbuf, "%s: %lld after %d ms, wanted at least %lld", sql, (long long)v,
                           timeout_ms, (long long)want);
            return SVC_ETIMEDOUT;
        }
        nanosleep(&pause, NULL);
    }
}

static bool prefix_ok(const char *p)
{
    size_t n = strlen(p);

    if (n == 0 || n > PREFIX_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '_'))
            return false;
    return true;
}

static svc_err_t drop_by_name(PGconn *pg, const char *name, char errbuf[static SVC_ERRBUF_LEN])
{
    char sql[PGTEST_NAME_MAX + 64];

    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)", name);
    return exec_on(pg, sql, NULL, errbuf);
}

/* A test process that was killed (timeout, crash) cannot drop its database:
 * the next run of any test with the same prefix does, once that pid is gone. */
static void drop_orphans(PGconn *pg, const char *prefix)
{
    char sql[PREFIX_MAX + 96];
    PGresult *r = NULL;
    size_t plen = strlen(prefix);

    snprintf(sql, sizeof sql, "SELECT datname FROM pg_database WHERE starts_with(datname, '%s_')",
             prefix);
    if (exec_on(pg, sql, &r, SVC_ERRBUF_SCRATCH) != SVC_OK)
        return;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *name = PQgetvalue(r, i, 0);
        char *end;
        long pid = strtol(name + plen + 1, &end, 10);
        if (end == name + plen + 1 || *end != '_' || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
            drop_by_name(pg, name, SVC_ERRBUF_SCRATCH);
    }
    PQclear(r);
}

svc_err_t pgtest_db_create(pgtest_db_t *db, const char *prefix, char errbuf[static SVC_ERRBUF_LEN])
{
    static atomic_uint counter;
    char admin[PGTEST_DSN_MAX], sql[PGTEST_NAME_MAX + 32];
    PGconn *pg = NULL;
    svc_err_t err;

    db->name[0] = db->dsn[0] = '\0';
    if (!prefix_ok(prefix)) {
        svc_errbuf_set(errbuf, "pgtest_db_create: bad prefix '%s'", prefix);
        return SVC_EINVAL;
    }
    pgtest_dsn("postgres", admin, sizeof admin);
    pg = connect_to(admin, errbuf);
    if (pg == NULL)
        return SVC_EUNAVAIL;
    drop_orphans(pg, prefix);
    snprintf(db->name, sizeof db->name, "%s_%d_%u", prefix, (int)getpid(),
             atomic_fetch_add(&counter, 1) + 1);
    /* A leftover of this very name (a reused pid) would make CREATE fail. */
    err = drop_by_name(pg, db->name, errbuf);
    if (err == SVC_OK) {
        snprintf(sql, sizeof sql, "CREATE DATABASE \"%s\"", db->name);
        err = exec_on(pg, sql, NULL, errbuf);
    }
    if (err == SVC_OK)
        pgtest_dsn(db->name, db->dsn, sizeof db->dsn);
    else
        db->name[0] = '\0';
    PQfinish(pg);
    return err;
}

svc_err_t pgtest_db_drop(pgtest_db_t *db, char errbuf[static SVC_ERRBUF_LEN])
{
    char admin[PGTEST_DSN_MAX];
    PGconn *pg;
    svc_err_t err;

    if (db->name[0] == '\0')
        return SVC_OK;
    pgtest_dsn("postgres", admin, sizeof admin);
    pg = connect_to(admin, errbuf);
    if (pg == NULL)
        return SVC_EUNAVAIL;
    err = drop_by_name(pg, db->name, errbuf);
    if (err == SVC_OK)
        db->name[0] = db->dsn[0] = '\0';
    PQfinish(pg);
    return err;
}

svc_err_t pgtest_conn_open(const char *dsn, pgtest_conn_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    pgtest_conn_t *c = calloc(1, sizeof *c);

    if (c == NULL)
        return SVC_ENOMEM;
    c->pg = connect_to(dsn, errbuf);
    if (c->pg == NULL) {
        free(c);
        return SVC_EUNAVAIL;
    }
    *out = c;
    return SVC_OK;
}

svc_err_t pgtest_conn_exec(pgtest_conn_t *c, const char *sql, char errbuf[static SVC_ERRBUF_LEN])
{
    return exec_on(c->pg, sql, NULL, errbuf);
}

int pgtest_conn_backend_pid(const pgtest_conn_t *c)
{
    return PQbackendPID(c->pg);
}

void pgtest_conn_close(pgtest_conn_t *c)
{
    if (c == NULL)
        return;
    PQfinish(c->pg);
    free(c);
}
