/* SPDX-License-Identifier: Apache-2.0 */
/* probe.c - the database readiness probe (see db_probe_* in db/db.h). */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"

static const db_stmt_t probe_stmts[] = {{"probe", "SELECT 1", 0, DB_STMT_IDEMPOTENT}};

struct db_probe {
    pthread_mutex_t mu;
    db_conn_t *conn;
    bool ok;
    char detail[SVC_ERRBUF_LEN];
    uint64_t asked_ns; /* 0: never */
};

svc_err_t db_probe_new(const char *dsn, const char *application_name, db_probe_t **out,
                       char errbuf[static SVC_ERRBUF_LEN])
{
    db_probe_t *p = calloc(1, sizeof *p);
    db_opts_t o;
    svc_err_t err;

    *out = NULL;
    if (p == NULL)
        return SVC_ENOMEM;
    db_opts_fill(&o, dsn, probe_stmts, SVC_COUNTOF(probe_stmts), DB_PROBE_TIMEOUT_MS,
                 application_name);
    o.connect_timeout_ms = DB_PROBE_TIMEOUT_MS;
    err = db_conn_new(&o, &p->conn, errbuf);
    if (err != SVC_OK) {
        free(p);
        return err;
    }
    pthread_mutex_init(&p->mu, NULL);
    *out = p;
    return SVC_OK;
}

void db_probe_free(db_probe_t *p)
{
    if (p == NULL)
        return;
    db_conn_free(p->conn);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

bool db_probe_check(db_probe_t *p, char *detail, size_t cap)
{
    uint64_t now = svc_now_ns();
    char errbuf[SVC_ERRBUF_LEN] = "";
    bool ok;

    pthread_mutex_lock(&p->mu);
    if (p->asked_ns == 0 || now - p->asked_ns >= (uint64_t)DB_PROBE_CACHE_MS * SVC_NS_PER_MS) {
        svc_err_t err = db_run(p->conn, 0, NULL,
                               now + (uint64_t)DB_PROBE_TIMEOUT_MS * SVC_NS_PER_MS, NULL, errbuf);
        p->ok = err == SVC_OK;
        if (p->ok)
            snprintf(p->detail, sizeof p->detail, "reachable");
        else
            snprintf(p->detail, sizeof p->detail, "%s: %.200s", svc_err_name(err), errbuf);
        /* libpq ends its messages with a newline; a JSON detail should not */
        for (size_t n = strlen(p->detail); n > 0 && isspace((unsigned char)p->detail[n - 1]);)
            p->detail[--n] = '\0';
        p->asked_ns = svc_now_ns();
    }
    ok = p->ok;
    if (detail != NULL && cap > 0)
        snprintf(detail, cap, "%s", p->detail);
    pthread_mutex_unlock(&p->mu);
    return ok;
}
