/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health.c - grpc.health.v1 statuses from the server's health callback
 * (see builtin.h). Used only by the built-in services' thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "grpc/health/v1/health.pb-c.h"

#define ST_SERVING         GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
#define ST_NOT_SERVING     GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING
#define ST_SERVICE_UNKNOWN GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN

struct rpc__health {
    rpc_health_fn fn;
    void *ctx;
    const char *const *names;
    size_t n_names;
    const char *mod;
    int status;        /* the last answer; 0 (UNKNOWN) before the first */
    uint64_t asked_ns; /* when it was given                              */
};

rpc__health_t *rpc__health_new(rpc_health_fn fn, void *ctx, const char *const *names,
                               size_t n_names, const char *mod)
{
    rpc__health_t *h = calloc(1, sizeof *h);

    if (h == NULL)
        return NULL;
    h->fn = fn;
    h->ctx = ctx;
    h->names = names;
    h->n_names = n_names;
    h->mod = mod;
    return h;
}

void rpc__health_free(rpc__health_t *h)
{
    free(h);
}

static const char *status_name(int st)
{
    return st == ST_SERVING ? "SERVING" : st == ST_NOT_SERVING ? "NOT_SERVING" : "UNKNOWN";
}

/* Asks the callback and logs a change, with the callback's reason. */
static void refresh(rpc__health_t *h, bool stopping)
{
    char why[SVC_ERRBUF_LEN] = "", kv[80];
    svc_log_level_t lvl;
    int st = ST_SERVING;

    if (stopping) {
        st = ST_NOT_SERVING;
        snprintf(why, sizeof why, "shutting down");
    } else if (h->fn != NULL && !h->fn(h->ctx, why, sizeof why)) {
        st = ST_NOT_SERVING;
    }
    h->asked_ns = svc_now_ns();
    if (st == h->status)
        return;
    snprintf(kv, sizeof kv, " health_from=%s health_to=%s", status_name(h->status),
             status_name(st));
    lvl = st == ST_SERVING ? SVC_LOG_INFO : SVC_LOG_WARN;
    if (svc_log_enabled(lvl))
        svc_log_write(lvl, h->mod, kv, "health: %s -> %s%s%s", status_name(h->status),
                      status_name(st), why[0] ? ": " : "", why);
    h->status = st;
}

static bool served(const rpc__health_t *h, const char *service)
{
    if (service[0] == '\0')
        return true;
    for (size_t i = 0; i < h->n_names; i++)
        if (strcmp(h->names[i], service) == 0)
            return true;
    return false;
}

int rpc__health_status(rpc__health_t *h, const char *service, bool stopping, uint64_t max_age_ns)
{
    if (!served(h, service))
        return ST_SERVICE_UNKNOWN;
    if (stopping ? h->status != ST_NOT_SERVING
                 : h->status == 0 || svc_now_ns() - h->asked_ns >= max_age_ns)
        refresh(h, stopping);
    return h->status;
}
