/* SPDX-License-Identifier: Apache-2.0 */
/*
 * db.c - a self-healing libpq connection with deadlines.
 *
 * All waiting is done with poll(2) on the connection's socket against the
 * caller's deadline, using libpq's asynchronous API, so no call can block
 * past its deadline. When the deadline passes mid-statement the connection
 * is dropped rather than cancelled: PQcancel() opens a new connection and
 * waits for the server, which would block without bound if Postgres were
 * frozen; the server-side statement_timeout stops the orphaned statement.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "stats.h"

struct db_conn {
    PGconn *pg;
    db_opts_t o;
    char *dsn;
    char *app_name;
    char *options; /* PGOPTIONS, o.server_options, statement_timeout */
    size_t *rows;  /* each statement's stats row */
    bool counted;  /* pg is open and counted in db__stats_open */
    size_t sent;   /* the statement db_send sent, until db_receive; n_stmts: none */
    uint64_t sent_ns;
    /* The transaction status when the statement in flight was sent: what
     * the server must say after it (expected_tx). */
    PGTransactionStatusType sent_tx;
    bool unknown; /* the last call's failure: see db_outcome_unknown */
};

void db_opts_init(db_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->connect_timeout_ms = DB_DEFAULT_CONNECT_TIMEOUT_MS;
    o->statement_timeout_ms = DB_DEFAULT_STATEMENT_TIMEOUT_MS;
    o->application_name = "shopmicro";
}

/* The session's "options": PGOPTIONS, o->server_options, statement_timeout
 * (db.h); malloc'd, NULL when out of memory. */
static char *session_options(const db_opts_t *o)
{
    const char *env = getenv("PGOPTIONS"), *more = o->server_options;
    size_t cap = (env ? strlen(env) : 0) + (more ? strlen(more) : 0) + 48;
    char *s = malloc(cap);

    if (s != NULL)
        snprintf(s, cap, "%s%s%s%s-c statement_timeout=%d", env ? env : "", env && *env ? " " : "",
                 more ? more : "", more && *more ? " " : "", o->statement_timeout_ms);
    return s;
}

svc_err_t db_conn_new(const db_opts_t *o, db_conn_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    db_conn_t *c = calloc(1, sizeof *c);

    *out = NULL;
    if (c == NULL)
        return SVC_ENOMEM;
    c->o = *o;
    c->dsn = strdup(o->dsn != NULL ? o->dsn : "");
    c->app_name = strdup(o->application_name != NULL ? o->application_name : "shopmicro");
    c->rows = calloc(o->n_stmts + 1, sizeof *c->rows);
    if (c->dsn == NULL || c->app_name == NULL || c->rows == NULL) {
        db_conn_free(c);
        return SVC_ENOMEM;
    }
    for (size_t i = 0; i < o->n_stmts; i++)
        c->rows[i] = db__stats_intern(o->stmts[i].name);
    c->sent = o->n_stmts;
    if ((c->options = session_options(o)) == NULL) {
        db_conn_free(c);
        return SVC_ENOMEM;
    }
    *out = c;
    return SVC_OK;
}

static void drop(db_conn_t *c)
{
    if (c->counted)
        db__stats_open(-1);
    c->counted = false;
    PQfinish(c->pg);
    c->pg = NULL;
}

void db_conn_free(db_conn_t *c)
{
    if (c == NULL)
        return;
    drop(c);
    free(c->dsn);
    free(c->options);
    free(c->app_name);
    free(c->rows);
    free(c);
}

bool db_conn_ok(const db_conn_t *c)
{
    return c->pg != NULL && PQstatus(c->pg) == CONNECTION_OK;
}

/* Milliseconds poll() may wait before `deadline_ns`; -1 = forever. */
static int poll_ms(uint64_t deadline_ns)
{
    uint64_t now = svc_now_ns();

    if (deadline_ns == SVC_DEADLINE_NONE)
        return -1;
    if (now >= deadline_ns)
        return 0;
    return (int)((deadline_ns - now + SVC_NS_PER_MS - 1) / SVC_NS_PER_MS);
}

/* Waits until the socket is readable/writable. 0 ok, -1 deadline, -2 error. */
static int wait_socket(PGconn *pg, short events, uint64_t deadline_ns)
{
    struct pollfd p = {.fd = PQsocket(pg), .events = events};
    int rc;

    if (p.fd < 0)
        return -2;
    do
        rc = poll(&p, 1, poll_ms(deadline_ns));
    while (rc < 0 && errno == EINTR);
    return rc > 0 ? 0 : rc == 0 ? -1 : -2;
}

static svc_err_t connect_by(db_conn_t *c, uint64_t deadline_ns, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *keys[] = {"dbname", "options", "application_name", NULL};
    const char *vals[] = {c->dsn, c->options, c->app_name, NULL};
    uint64_t limit = svc_now_ns() + (uint64_t)c->o.connect_timeout_ms * SVC_NS_PER_MS;
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;

    if (deadline_ns < limit)
        limit = deadline_ns;
    /* Keywords after "dbname" override what the DSN says (expand_dbname=1). */
    c->pg = PQconnectStartParams(keys, vals, 1);
    if (c->pg == NULL)
        return SVC_ENOMEM;
    while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
        int w = wait_socket(c->pg, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, limit);
        if (w == -1) {
            svc_errbuf_set(errbuf, "database unavailable: connect timed out");
            drop(c);
            db__stats_connect(false);
            return limit == deadline_ns ? SVC_ETIMEDOUT : SVC_EUNAVAIL;
        }
        st = PQconnectPoll(c->pg);
    }
    if (st == PGRES_POLLING_FAILED) {
        svc_errbuf_set(errbuf, "database unavailable: %s", PQerrorMessage(c->pg));
        drop(c);
        db__stats_connect(false);
        return SVC_EUNAVAIL;
    }
    db__stats_connect(true);
    db__stats_open(1);
    c->counted = true;
    return SVC_OK;
}

svc_err_t db_err_from_sqlstate(const char *s)
{
    if (s == NULL || strlen(s) != 5)
        return SVC_EUNAVAIL; /* no SQLSTATE: the connection itself failed */
    if (strcmp(s, "23505") == 0)
        return SVC_EEXIST;
    if (strncmp(s, "22", 2) == 0 || strcmp(s, "23514") == 0 || strcmp(s, "23502") == 0)
        return SVC_EINVAL;
    if (strcmp(s, "40001") == 0 || strcmp(s, "40P01") == 0)
        return SVC_EABORTED;
    if (strcmp(s, "57014") == 0)
        return SVC_ETIMEDOUT; /* statement_timeout */
    if (strncmp(s, "08", 2) == 0 || strncmp(s, "57P", 3) == 0 || strcmp(s, "53300") == 0)
        return SVC_EUNAVAIL; /* connection, shutdown, too many connections */
    return SVC_EINTERNAL;
}

/* Waits, by the deadline, until libpq can hand over the next result (or
 * tell that there is none) without blocking: PQgetResult itself would wait
 * without bound. 0 ready, -1 deadline, -2 the connection failed. */
static int wait_result(PGconn *pg, uint64_t deadline_ns)
{
    while (PQisBusy(pg)) {
        int w = wait_socket(pg, POLLIN, deadline_ns);
        if (w != 0)
            return w;
        if (!PQconsumeInput(pg))
            return -2;
    }
    return 0;
}

static bool result_ok(const PGresult *r)
{
    return PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK;
}

/* The transaction status a statement that succeeded leaves behind: BEGIN
 * opens one, COMMIT and ROLLBACK close one, anything else leaves it as it
 * was. For a statement sent outside a transaction, IDLE after it is the
 * server's word that its implicit transaction committed. */
static PGTransactionStatusType expected_tx(PGTransactionStatusType before, const char *cmd)
{
    if (strcmp(cmd, "BEGIN") == 0)
        return PQTRANS_INTRANS;
    if (strcmp(cmd, "COMMIT") == 0 || strcmp(cmd, "ROLLBACK") == 0)
        return PQTRANS_IDLE;
    return before;
}

/* The statement was sent and the server never said how it ended: its
 * effects may have been committed or not (see db_outcome_unknown). */
static svc_err_t outcome_lost(db_conn_t *c, svc_err_t err, const PGresult *failed,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    const char *why = failed != NULL ? PQresultErrorMessage(failed) : PQerrorMessage(c->pg);

    if (err == SVC_ETIMEDOUT)
        svc_errbuf_set(errbuf, "database call abandoned at its deadline (outcome unknown)");
    else
        svc_errbuf_set(errbuf,
                       "database unavailable: connection lost before the server confirmed "
                       "the statement (outcome unknown): %s",
                       why);
    c->unknown = true;
    drop(c);
    return err;
}

/* A failed result the server answered and then said ReadyForQuery: a
 * verdict (the statement's implicit transaction, if any, was rolled back). */
static svc_err_t refused(db_conn_t *c, const PGresult *failed, char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = db_err_from_sqlstate(PQresultErrorField(failed, PG_DIAG_SQLSTATE));

    svc_errbuf_set(errbuf, "%s%s", err == SVC_EUNAVAIL ? "database unavailable: " : "",
                   PQresultErrorMessage(failed));
    return err;
}

/*
 * Collects every result of the statement sent last, by the deadline, up to
 * the server's ReadyForQuery. The statement has succeeded only when every
 * result was OK, ReadyForQuery came, and the transaction status it carried
 * is the one the statement should leave (expected_tx). Postgres sends a
 * statement's rows and CommandComplete before it commits the statement's
 * implicit transaction (at Sync), so rows alone prove nothing: a backend
 * ended between the two (a fast shutdown, pg_terminate_backend) rolls them
 * back. *out gets the first result; a connection lost or abandoned on the
 * way is dropped (the next call makes a new one).
 */
static svc_err_t await_result(db_conn_t *c, uint64_t deadline_ns, PGresult **out,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    PGresult *r, *first = NULL, *failed = NULL;
    svc_err_t err = SVC_OK;
    int w;

    while ((w = wait_result(c->pg, deadline_ns)) == 0 && (r = PQgetResult(c->pg)) != NULL) {
        if (failed == NULL && !result_ok(r))
            failed = r;
        if (first == NULL)
            first = r;
        else if (r != failed)
            PQclear(r);
    }
    if (w != 0 || PQstatus(c->pg) != CONNECTION_OK)
        err = outcome_lost(c, w == -1 ? SVC_ETIMEDOUT : SVC_EUNAVAIL, failed, errbuf);
    else if (failed != NULL)
        err = refused(c, failed, errbuf);
    else if (first == NULL) {
        svc_errbuf_set(errbuf, "database: the statement returned no result");
        err = SVC_EINTERNAL;
    } else if (PQtransactionStatus(c->pg) != expected_tx(c->sent_tx, PQcmdStatus(first))) {
        svc_errbuf_set(errbuf, "database: transaction status %d after \"%s\", expected %d",
                       (int)PQtransactionStatus(c->pg), PQcmdStatus(first),
                       (int)expected_tx(c->sent_tx, PQcmdStatus(first)));
        drop(c); /* whatever it left open is rolled back with it */
        err = SVC_EINTERNAL;
    }
    if (failed != first)
        PQclear(failed);
    if (err != SVC_OK) {
        PQclear(first);
        first = NULL;
    }
    *out = first;
    return err;
}

static svc_err_t prepare_all(db_conn_t *c, uint64_t deadline_ns, char errbuf[static SVC_ERRBUF_LEN])
{
    for (size_t i = 0; i < c->o.n_stmts; i++) {
        const db_stmt_t *s = &c->o.stmts[i];
        PGresult *r = NULL;
        svc_err_t err;

        if (!PQsendPrepare(c->pg, s->name, s->sql, s->nparams, NULL)) {
            svc_errbuf_set(errbuf, "database unavailable: %s", PQerrorMessage(c->pg));
            drop(c);
            return SVC_EUNAVAIL;
        }
        c->sent_tx = PQTRANS_IDLE;
        err = await_result(c, deadline_ns, &r, errbuf);
        PQclear(r);
        if (err != SVC_OK) {
            if (c->pg != NULL && PQstatus(c->pg) == CONNECTION_OK && err != SVC_EUNAVAIL)
                err = SVC_EINTERNAL; /* bad SQL in a statement table: a bug */
            drop(c);
            return err;
        }
    }
    return SVC_OK;
}

/* An idle connection the server has closed (Postgres restarted, backend
 * terminated) has already received the server's goodbye: the socket is
 * readable. Noticing that before sending lets even a non-idempotent
 * statement go out on a fresh connection instead of failing. An idle
 * connection has nothing to say otherwise (the services use no LISTEN), so
 * any readable byte is taken as a reason to reconnect. One poll(2), no wait. */
static bool idle_but_dead(db_conn_t *c)
{
    struct pollfd p = {.fd = PQsocket(c->pg), .events = POLLIN};

    return PQtransactionStatus(c->pg) == PQTRANS_IDLE && poll(&p, 1, 0) > 0;
}

static svc_err_t ensure_connected(db_conn_t *c, uint64_t deadline_ns,
                                  char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err;

    if (c->pg != NULL && PQstatus(c->pg) == CONNECTION_OK && !idle_but_dead(c))
        return SVC_OK;
    drop(c);
    err = connect_by(c, deadline_ns, errbuf);
    if (err == SVC_OK)
        err = prepare_all(c, deadline_ns, errbuf);
    c->unknown = false; /* a PREPARE lost on the way changes no data */
    return err;
}

/* Sends statement idx on a live connection, without waiting for it. */
static svc_err_t send_prepared(db_conn_t *c, size_t idx, const char *const *params,
                               uint64_t deadline_ns, char errbuf[static SVC_ERRBUF_LEN])
{
    const db_stmt_t *s = &c->o.stmts[idx];
    svc_err_t err = ensure_connected(c, deadline_ns, errbuf);

    if (err != SVC_OK)
        return err;
    c->sent_tx = PQtransactionStatus(c->pg);
    if (!PQsendQueryPrepared(c->pg, s->name, s->nparams, params, NULL, NULL,
                             (s->flags & DB_STMT_BINARY) ? 1 : 0)) {
        svc_errbuf_set(errbuf, "database unavailable: %s", PQerrorMessage(c->pg));
        /* A statement outside a transaction commits only at the Sync that
         * ends the message, so a send that broke did nothing. Inside one,
         * a COMMIT commits when it executes, before Sync: unknown. */
        c->unknown = c->sent_tx == PQTRANS_INTRANS;
        drop(c);
        return SVC_EUNAVAIL;
    }
    return SVC_OK;
}

static svc_err_t exec_once(db_conn_t *c, size_t idx, const char *const *params,
                           uint64_t deadline_ns, PGresult **res, char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = send_prepared(c, idx, params, deadline_ns, errbuf);

    return err != SVC_OK ? err : await_result(c, deadline_ns, res, errbuf);
}

/* Never wait without bound: with no caller deadline, give the server's
 * statement_timeout a moment to fire first. */
static uint64_t bounded(const db_conn_t *c, uint64_t deadline_ns)
{
    uint64_t backstop = svc_now_ns() + ((uint64_t)c->o.statement_timeout_ms + 1000) * SVC_NS_PER_MS;

    return deadline_ns > backstop ? backstop : deadline_ns;
}

/* What every call checks first; SVC_OK to go on. */
static svc_err_t check_call(db_conn_t *c, size_t idx, uint64_t deadline_ns,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    c->unknown = false;
    if (idx >= c->o.n_stmts) {
        svc_errbuf_set(errbuf, "db: no statement %zu", idx);
        return SVC_EINTERNAL;
    }
    if (c->sent != c->o.n_stmts) {
        svc_errbuf_set(errbuf, "db: statement %s sent and not received", c->o.stmts[c->sent].name);
        return SVC_EINTERNAL;
    }
    if (deadline_ns != SVC_DEADLINE_NONE && svc_now_ns() >= deadline_ns) {
        svc_errbuf_set(errbuf, "deadline expired before the database call");
        return SVC_ETIMEDOUT;
    }
    return SVC_OK;
}

static svc_err_t exec_checked(db_conn_t *c, size_t idx, const char *const *params,
                              uint64_t deadline_ns, PGresult **res,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    bool was_idle;
    svc_err_t err;

    *res = NULL;
    if ((err = check_call(c, idx, deadline_ns, errbuf)) != SVC_OK)
        return err;
    deadline_ns = bounded(c, deadline_ns);
    was_idle = c->pg != NULL && PQtransactionStatus(c->pg) == PQTRANS_IDLE;
    err = exec_once(c, idx, params, deadline_ns, res, errbuf);
    /* After a Postgres restart every idle connection is dead but does not
     * know it until used. An idempotent statement outside a transaction can
     * safely run again on a fresh connection, so the caller never sees it. */
    if (err == SVC_EUNAVAIL && was_idle && (c->o.stmts[idx].flags & DB_STMT_IDEMPOTENT) &&
        (c->pg == NULL || PQstatus(c->pg) == CONNECTION_BAD)) {
        c->unknown = false; /* whatever the first run did, running it again is harmless */
        err = exec_once(c, idx, params, deadline_ns, res, errbuf);
    }
    return err;
}

svc_err_t db_exec(db_conn_t *c, size_t idx, const char *const *params, uint64_t deadline_ns,
                  PGresult **res, char errbuf[static SVC_ERRBUF_LEN])
{
    uint64_t t0 = svc_now_ns();
    svc_err_t err = exec_checked(c, idx, params, deadline_ns, res, errbuf);

    if (idx < c->o.n_stmts)
        db__stats_query(c->rows[idx], err, c->unknown, svc_now_ns() - t0);
    return err;
}

svc_err_t db_send(db_conn_t *c, size_t idx, const char *const *params,
                  char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = check_call(c, idx, SVC_DEADLINE_NONE, errbuf);

    if (err == SVC_OK)
        err = send_prepared(c, idx, params, bounded(c, SVC_DEADLINE_NONE), errbuf);
    if (err != SVC_OK)
        return err;
    c->sent = idx;
    c->sent_ns = svc_now_ns();
    return SVC_OK;
}

svc_err_t db_receive(db_conn_t *c, uint64_t deadline_ns, PGresult **res,
                     char errbuf[static SVC_ERRBUF_LEN])
{
    size_t idx = c->sent;
    svc_err_t err;

    *res = NULL;
    if (!db_sent(c)) {
        svc_errbuf_set(errbuf, "db_receive: nothing was sent");
        return SVC_EINTERNAL;
    }
    c->sent = c->o.n_stmts;
    err = await_result(c, bounded(c, deadline_ns), res, errbuf);
    db__stats_query(c->rows[idx], err, c->unknown, svc_now_ns() - c->sent_ns);
    return err;
}

bool db_outcome_unknown(const db_conn_t *c)
{
    return c->unknown;
}

bool db_sent(const db_conn_t *c)
{
    return c->sent != c->o.n_stmts;
}

bool db_pump(db_conn_t *c)
{
    if (!db_sent(c) || c->pg == NULL)
        return true;
    /* The socket is non-blocking (libpq's own), so neither call waits. */
    return !PQconsumeInput(c->pg) || !PQisBusy(c->pg);
}

void db_opts_fill(db_opts_t *o, const char *dsn, const db_stmt_t *stmts, size_t n,
                  int statement_timeout_ms, const char *application_name)
{
    db_opts_init(o);
    o->dsn = dsn;
    o->stmts = stmts;
    o->n_stmts = n;
    o->statement_timeout_ms = statement_timeout_ms;
    o->application_name = application_name;
}

svc_err_t db_conn_open(const char *dsn, const db_stmt_t *stmts, size_t n, int statement_timeout_ms,
                       const char *application_name, db_conn_t **out,
                       char errbuf[static SVC_ERRBUF_LEN])
{
    db_opts_t o;

    db_opts_fill(&o, dsn, stmts, n, statement_timeout_ms, application_name);
    return db_conn_new(&o, out, errbuf);
}

svc_err_t db_run(db_conn_t *c, size_t idx, const char *const *params, uint64_t deadline_ns,
                 int *n_rows, char errbuf[static SVC_ERRBUF_LEN])
{
    PGresult *r = NULL;
    svc_err_t err = db_exec(c, idx, params, deadline_ns, &r, errbuf);

    if (err == SVC_OK && n_rows != NULL)
        *n_rows = PQntuples(r);
    PQclear(r);
    return err;
}

svc_err_t db_commit(db_conn_t *c, size_t idx, uint64_t deadline_ns,
                    char errbuf[static SVC_ERRBUF_LEN])
{
    PGresult *r = NULL;
    svc_err_t err = db_exec(c, idx, NULL, deadline_ns, &r, errbuf);

    if (err == SVC_OK && strcmp(PQcmdStatus(r), "COMMIT") != 0) {
        svc_errbuf_set(errbuf,
                       "COMMIT answered %s: an earlier statement of the transaction "
                       "failed, nothing of it was kept",
                       PQcmdStatus(r));
        err = SVC_EABORTED;
    }
    PQclear(r);
    return err;
}

svc_err_t db_rollback(db_conn_t *c, size_t idx, char errbuf[static SVC_ERRBUF_LEN])
{
    return db_run(c, idx, NULL, svc_now_ns() + (uint64_t)DB_ROLLBACK_MS * SVC_NS_PER_MS, NULL,
                  errbuf);
}
