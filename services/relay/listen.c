/* SPDX-License-Identifier: Apache-2.0 */
/* listen.c - LISTEN outbox on a connection of its own (see listen.h). */
#include <libpq-fe.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "listen.h"

#define MOD "relay.listen"
/* A connect attempt must not hold up the slow poll for long. */
#define CONNECT_TIMEOUT_S "2"

struct rly_listener {
    PGconn *pg;
    char *dsn;
    char *name;
    bool lost; /* logged as lost; the next success logs that it is back */
};

svc_err_t rly_listener_new(const char *dsn, const char *name, rly_listener_t **out,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    rly_listener_t *l = calloc(1, sizeof *l);

    *out = NULL;
    if (l == NULL || (l->dsn = strdup(dsn)) == NULL || (l->name = strdup(name)) == NULL) {
        rly_listener_free(l);
        svc_errbuf_set(errbuf, "listener: out of memory");
        return SVC_ENOMEM;
    }
    *out = l;
    return SVC_OK;
}

void rly_listener_free(rly_listener_t *l)
{
    if (l == NULL)
        return;
    PQfinish(l->pg);
    free(l->dsn);
    free(l->name);
    free(l);
}

static void drop(rly_listener_t *l, const char *why)
{
    if (!l->lost)
        svc_log_warn(MOD, "LISTEN connection lost (%s); polling until it is back", why);
    l->lost = true;
    PQfinish(l->pg);
    l->pg = NULL;
}

/* Connects and LISTENs. A blocking connect, bounded by CONNECT_TIMEOUT_S. */
static bool connect_listen(rly_listener_t *l)
{
    const char *keys[] = {"dbname", "application_name", "connect_timeout", NULL};
    const char *vals[] = {l->dsn, l->name, CONNECT_TIMEOUT_S, NULL};
    PGresult *r;
    bool ok;

    l->pg = PQconnectdbParams(keys, vals, 1);
    if (PQstatus(l->pg) != CONNECTION_OK) {
        drop(l, PQerrorMessage(l->pg));
        return false;
    }
    r = PQexec(l->pg, "LISTEN outbox");
    ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok || PQsetnonblocking(l->pg, 1) != 0) {
        drop(l, PQerrorMessage(l->pg));
        return false;
    }
    if (l->lost)
        svc_log_info(MOD, "LISTEN connection back");
    l->lost = false;
    return true;
}

/* Consumes what arrived; true if it held a notification. */
static bool drain(rly_listener_t *l)
{
    PGnotify *n;
    bool any = false;

    if (!PQconsumeInput(l->pg)) {
        drop(l, PQerrorMessage(l->pg));
        return true; /* reconnecting may have missed one: look anyway */
    }
    while ((n = PQnotifies(l->pg)) != NULL) {
        any = true;
        PQfreemem(n);
    }
    return any;
}

static rly_wake_t wait_fds(int pg_fd, int extra_fd, int timeout_ms, bool *pg_ready)
{
    struct pollfd p[2] = {{.fd = pg_fd, .events = POLLIN}, {.fd = extra_fd, .events = POLLIN}};
    int rc = poll(p, 2, timeout_ms);

    *pg_ready = rc > 0 && pg_fd >= 0 && (p[0].revents & (POLLIN | POLLERR | POLLHUP));
    if (rc > 0 && extra_fd >= 0 && (p[1].revents & POLLIN))
        return RLY_WAKE_FD;
    return rc > 0 ? RLY_WAKE_NOTIFY : RLY_WAKE_TIMEOUT;
}

rly_wake_t rly_listener_wait(rly_listener_t *l, int extra_fd, int timeout_ms)
{
    uint64_t deadline = svc_now_ms() + (uint64_t)timeout_ms;
    bool ready;

    if (l->pg == NULL && connect_listen(l))
        return RLY_WAKE_NOTIFY; /* anything committed while we were away */
    if (l->pg != NULL && drain(l))
        return RLY_WAKE_NOTIFY;
    for (;;) {
        uint64_t now = svc_now_ms();
        int left = now >= deadline ? 0 : (int)(deadline - now);
        rly_wake_t w = wait_fds(l->pg != NULL ? PQsocket(l->pg) : -1, extra_fd, left, &ready);

        if (w == RLY_WAKE_FD)
            return w;
        if (ready && drain(l))
            return RLY_WAKE_NOTIFY;
        if (svc_now_ms() >= deadline)
            return RLY_WAKE_TIMEOUT;
    }
}
