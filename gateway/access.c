/* SPDX-License-Identifier: Apache-2.0 */
/* access.c - the counters and the access-log line of each answer (see access.h). */
#include <stdio.h>
#include <string.h>

#include "access.h"
#include "message.h"
#include "upstream.h"

#define ACCESS_MOD "gateway.access"

gw_access_t gw_access_begin(gw_loop_t *l, h2o_req_t *req, int grpc_code)
{
    size_t path_len = req->input.query_at != SIZE_MAX ? req->input.query_at : req->input.path.len;

    return (gw_access_t){.loop = l,
                         .method = req->input.method.base,
                         .method_len = req->input.method.len,
                         .path = req->input.path.base,
                         .path_len = path_len,
                         .start_ns = svc_now_ns(),
                         .grpc_code = grpc_code};
}

void gw_access_path(const char *p, size_t len, char *out, size_t cap)
{
    size_t n = 0;

    for (size_t i = 0; i < len && n + 4 < cap; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c > 0x20 && c < 0x7f && c != '"' && c != '\\') {
            out[n++] = (char)c;
        } else {
            snprintf(out + n, 4, "%%%02X", c);
            n += 3;
        }
    }
    out[n] = '\0';
}

/*
 * A 5xx line is written for the first request of its kind and then at most
 * once a second with the count of those left out (svc/core.h, "Repeated
 * lines"): in an outage every request fails the same way, and a line each
 * would bury the breaker's transitions. The kind is the route, the status
 * and why; the metrics count every request.
 */
static bool admit_5xx(const gw_access_t *e, int status, uint64_t *left_out)
{
    char key[160];
    const char *why = e->route != NULL && e->route->rpc != NULL && e->res != NULL
                          ? rs_reason_name(e->res->reason)
                      : e->grpc_code >= 0 ? svc_err_name(svc_err_from_grpc(e->grpc_code))
                                          : "-";

    snprintf(key, sizeof key, "%.*s %s %d %s", (int)(e->method_len > 16 ? 16 : e->method_len),
             e->method, e->route != NULL ? e->route->pattern : "unmatched", status, why);
    return svc_log_repeats_admit(svc_log_repeats_default(), SVC_LOG_WARN, ACCESS_MOD, key,
                                 left_out);
}

void gw_access_end(const gw_access_t *e, int status)
{
    uint64_t dur = svc_now_ns() - e->start_ns, repeated = 0;
    size_t route = e->route != NULL ? (size_t)(e->route - gw_routes) : GW_METRICS_UNMATCHED;
    svc_log_level_t lvl = status >= 500 ? SVC_LOG_WARN : SVC_LOG_INFO;
    char path[GW_ACCESS_PATH_MAX + 1], kv[1024];
    int n;

    gw_metrics_end(e->loop->app->metrics, route, e->method, e->method_len, status, dur);
    if (!svc_log_enabled(lvl) || (status >= 500 && !admit_5xx(e, status, &repeated)))
        return;
    gw_access_path(e->path, e->path_len, path, sizeof path);
    n = snprintf(kv, sizeof kv, " method=%.*s path=\"%s\" status=%d duration_ms=%.3f route=\"%s\"",
                 (int)e->method_len, e->method, path, status, (double)dur / 1e6,
                 e->route != NULL ? e->route->pattern : "unmatched");
    if (n > 0 && (size_t)n < sizeof kv && e->grpc_code >= 0)
        n += snprintf(kv + n, sizeof kv - (size_t)n, " grpc_code=%s",
                      svc_err_name(svc_err_from_grpc(e->grpc_code)));
    if (n > 0 && (size_t)n < sizeof kv && e->route != NULL && e->route->rpc != NULL &&
        e->res != NULL)
        n += snprintf(kv + n, sizeof kv - (size_t)n, " upstream=%s reason=%s attempts=%u",
                      gw_upstream_name(e->route->upstream), rs_reason_name(e->res->reason),
                      e->res->attempts);
    /* What the client was not told (message.h): the failure's own text. */
    if (n > 0 && (size_t)n < sizeof kv && e->res != NULL && status >= 500 &&
        e->res->message[0] != '\0') {
        char detail[SVC_ERRBUF_LEN];
        gw_log_text(e->res->message, detail, sizeof detail);
        n += snprintf(kv + n, sizeof kv - (size_t)n, " detail=\"%s\"", detail);
    }
    if (n > 0 && (size_t)n < sizeof kv && e->stale)
        n += snprintf(kv + n, sizeof kv - (size_t)n, " stale=true age_ms=%llu",
                      (unsigned long long)e->age_ms);
    if (n > 0 && (size_t)n < sizeof kv && e->sub != NULL)
        n += snprintf(kv + n, sizeof kv - (size_t)n, " sub=\"%s\"", e->sub); /* pr_subject_valid */
    if (n > 0 && (size_t)n < sizeof kv && e->auth_error != NULL)
        n += snprintf(kv + n, sizeof kv - (size_t)n, " auth_error=\"%s\"", e->auth_error);
    if (n > 0 && (size_t)n < sizeof kv && repeated > 0)
        snprintf(kv + n, sizeof kv - (size_t)n, " repeated=%llu", (unsigned long long)repeated);
    svc_log_write(lvl, ACCESS_MOD, kv, "%.*s %s %d %.3fms", (int)e->method_len, e->method, path,
                  status, (double)dur / 1e6);
}
