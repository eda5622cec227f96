/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dispatch.c - the generic request path (see dispatch.h): match, bind,
 * call, answer, log. Route-specific knowledge lives only in the table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "access.h"
#include "admit.h"
#include "bind.h"
#include "cors.h"
#include "dispatch.h"
#include "errfilter.h"
#include "headers.h"
#include "http.h"
#include "message.h"
#include "pbj/pbjson.h"
#include "routes.h"

#define LOG_MOD "gateway"

/* A request waiting for its upstream. Heap-allocated because it can outlive
 * the request (a client that went away); the request's pool holds a guard
 * pointing here, which h2o's dispose clears and which we clear before
 * answering, so each side knows whether the other is still there. */
typedef struct gw_pending {
    gw_call_t call; /* first: the hand-off message leads back here */
    h2o_linklist_t link;
    gw_loop_t *loop;
    h2o_req_t *req; /* NULL once the client is gone */
    struct gw_pending **guard;
    const gw_route_t *route;
    uint64_t start_ns;
    bool drain_cancelled;
    char id[GW_REQUEST_ID_MAX + 1];
    char path[GW_ACCESS_PATH_MAX + 1];
    char sub[PR_SUBJECT_MAX + 1]; /* "": anonymous */
    size_t key_len; /* the stale cache's key (gw_cache_key); 0: not a stale-read route */
    char key[];
} gw_pending_t;

static uint64_t next_random(gw_loop_t *l)
{
    /* xorshift64*: request ids need to be unique, not unpredictable. */
    uint64_t x = l->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    l->rng = x;
    return x * UINT64_C(0x2545F4914F6CDD1D);
}

/* 32 lower-case hex digits of two random numbers, NUL-terminated; returns
 * 32. (What "%016llx%016llx" prints, without a printf per request.) */
static size_t random_id(gw_loop_t *l, char *out)
{
    static const char hex[] = "0123456789abcdef";

    for (int half = 0; half < 2; half++) {
        uint64_t x = next_random(l);
        for (int i = 15; i >= 0; i--, x >>= 4)
            out[half * 16 + i] = hex[x & 15];
    }
    out[32] = '\0';
    return 32;
}

const char *gw_request_id(gw_loop_t *l, h2o_req_t *req)
{
    char *id = h2o_mem_alloc_pool(&req->pool, GW_REQUEST_ID_MAX + 1);
    ssize_t i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-request-id"), -1);
    size_t n = i == -1 ? 0
                       : gw_request_id_sanitize(req->headers.entries[i].value.base,
                                                req->headers.entries[i].value.len, id);

    if (n == 0)
        n = random_id(l, id);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-request-id"), 0,
                          "X-Request-Id", id, n);
    return id;
}

/* Copies at most cap - 1 bytes of s[0..len) and a NUL into out. */
static void copy_cut(char *out, size_t cap, const char *s, size_t len)
{
    if (len > cap - 1)
        len = cap - 1;
    memcpy(out, s, len);
    out[len] = '\0';
}

static void answer(const gw_access_t *e, h2o_req_t *req, const gw_error_t *err)
{
    gw_access_t with_code = *e;

    with_code.grpc_code = err->code;
    gw_access_end(&with_code, err->status != 0 ? err->status : gw_http_status_from_grpc(err->code));
    gw_http_send_error(req, err);
}

/* An answer the gateway decides alone, for reason (status.h). */
static void answer_error(const gw_access_t *e, h2o_req_t *req, int status, int code,
                         const char *msg, const char *reason)
{
    answer(e, req, &(gw_error_t){.status = status, .code = code, .message = msg, .reason = reason});
}

/*
 * A non-idempotent call that was sent and then ended without the upstream's
 * verdict may have been carried out all the same: the upstream may have
 * committed just before the connection broke, the deadline ran out or the
 * drain cancelled it. A status the upstream sent itself after deciding
 * (a validation error, ALREADY_EXISTS, a failure of its own dependency,
 * which is not retryable) is a verdict, and so is a call never sent.
 */
static bool outcome_unknown(const gw_route_t *r, const rs_grpc_result_t *res, bool drain_cancelled)
{
    /* gRPC C core fails a call that found no connection to put it on with
     * this message (wait_for_ready off), before anything of it is sent. */
    static const char not_sent[] = "failed to connect to all addresses";

    if (r == NULL || r->rpc == NULL || r->idempotency != RS_NOT_IDEMPOTENT || res->attempts == 0 ||
        strncmp(res->message, not_sent, sizeof not_sent - 1) == 0)
        return false;
    return drain_cancelled || res->reason == RS_REASON_NOT_IDEMPOTENT ||
           res->reason == RS_REASON_DEADLINE;
}

/* The gRPC code a failed call is answered with. */
static int failure_code(const rs_grpc_result_t *res)
{
    if (res->err == SVC_ENOMEM)
        return 13; /* ours, not the upstream's RESOURCE_EXHAUSTED */
    if (res->reason == RS_REASON_BULKHEAD_FULL)
        return 14; /* the upstream is unavailable to this request: 503 */
    return svc_err_to_grpc(res->err);
}

/* A server-side failure's message is the gateway's own (message.h): the
 * dependency, the request id and the project's phrases of the failure's
 * texts (the upstream's message; the gateway's own decision when no attempt
 * was made, except a fail-fast answer, whose text is the refusal's; the
 * drain). The texts themselves go to the access line. */
static const char *client_message(const gw_access_t *e, const rs_grpc_result_t *res, int code,
                                  bool drain_cancelled, char *buf, size_t cap)
{
    bool own = res->attempts == 0 && res->reason != RS_REASON_PUSHBACK;
    const char *texts[2] = {drain_cancelled ? "the gateway is shutting down" : res->message,
                            own ? rs_reason_text(res->reason) : NULL};

    gw_client_message(code, gw_upstream_name(e->route->upstream), svc_log_request_id(), texts,
                      SVC_COUNTOF(texts), buf, cap);
    return buf;
}

/*
 * The ErrorInfo reason of a failed upstream call when the gateway decided
 * the answer (status.h): the drain, an outcome it cannot know, or the
 * resilience chain's own verdict (no attempt, or none with a status of the
 * upstream's: a deadline, a budget, a breaker before a retry). NULL: the
 * upstream's verdict, whose ErrorInfo the body carries.
 */
static const char *failure_reason(const rs_grpc_result_t *res, bool drain_cancelled, bool unknown)
{
    if (drain_cancelled)
        return "SHUTTING_DOWN";
    if (unknown)
        return "OUTCOME_UNKNOWN";
    if (res->details.len > 0 || res->reason == RS_REASON_NOT_RETRYABLE ||
        res->reason == RS_REASON_ATTEMPTS_EXHAUSTED || res->reason == RS_REASON_NOT_IDEMPOTENT)
        return NULL;
    return rs_reason_constant(res->reason);
}

/* An upstream call that failed, synchronously (breaker open, bulkhead
 * full, deadline too short) or after its attempts. */
static void answer_upstream_error(const gw_access_t *e, h2o_req_t *req, const rs_grpc_result_t *res,
                                  bool drain_cancelled)
{
    int code = failure_code(res), status;
    bool unknown = outcome_unknown(e->route, res, drain_cancelled);
    const char *msg = res->message[0] != '\0' ? res->message : svc_strerror(res->err);
    const char *unknown_note = gw_upstream_unknown_outcome(e->route->upstream);
    uint32_t retry_after_s = 0;
    char text[2 * SVC_ERRBUF_LEN], note[3 * SVC_ERRBUF_LEN];

    if (drain_cancelled)
        code = 14;
    if (gw_message_is_scrubbed(code))
        msg = client_message(e, res, code, drain_cancelled, text, sizeof text);
    /* The order service says it itself when its database left the outcome
     * unknown: once is enough. */
    if (unknown && strstr(msg, unknown_note) == NULL) {
        snprintf(note, sizeof note, "%s; %s", msg, unknown_note);
        msg = note;
    }
    status = gw_http_status_from_grpc(code);
    /* Retry-After only where waiting helps: the breaker's cooldown, a full
     * bulkhead, or the wait the upstream asked for when it refused (a shed
     * load's pushback, order's breaker for catalog); never for an upstream
     * that answered 503 without a hint. */
    if ((status == 503 || status == 429) && res->retry_after_ms > 0)
        retry_after_s = gw_retry_after_seconds(res->retry_after_ms);
    gw_add_response_metadata(req, &res->headers);
    answer(e, req,
           &(gw_error_t){.status = status,
                         .code = code,
                         .message = msg,
                         .reason = failure_reason(res, drain_cancelled, unknown),
                         .upstream = gw_upstream_name(e->route->upstream),
                         .retry_after_s = retry_after_s,
                         .details = &res->details});
}

/* ------------------------------------------------------------------------
 * Stale reads (docs/gateway.md, "Stale reads")
 * ------------------------------------------------------------------------ */

/* One warn line per stale answer, through the repeated-line limiter: the
 * first of each route and reason at once, then one a second with the count
 * of those left out (svc/core.h, "Repeated lines"). */
static void log_stale(const gw_access_t *e, const rs_grpc_result_t *res, int code, uint64_t age_ms)
{
    char key[96], kv[512], path[GW_ACCESS_PATH_MAX + 1];
    const char *upstream = gw_upstream_name(e->route->upstream);

    gw_access_path(e->path, e->path_len, path, sizeof path);
    snprintf(key, sizeof key, "stale %s %s %s", e->route->method, e->route->pattern,
             rs_reason_name(res->reason));
    snprintf(kv, sizeof kv,
             " path=\"%s\" route=\"%s\" upstream=%s reason=%s grpc_code=%s age_ms=%llu "
             "max_age_ms=%lld",
             path, e->route->pattern, upstream, rs_reason_name(res->reason),
             svc_err_name(svc_err_from_grpc(code)), (unsigned long long)age_ms,
             (long long)e->loop->app->cfg->stale_max_age_ms);
    svc_log_write_repeat(SVC_LOG_WARN, LOG_MOD, key, kv,
                         "served a stale answer (%llu ms old): %s unavailable (%s)",
                         (unsigned long long)age_ms, upstream,
                         res->message[0] != '\0' ? res->message : rs_reason_text(res->reason));
}

/*
 * The call failed because its upstream is unavailable: answer with the
 * last 200 of the same request if one at most GATEWAY_STALE_MAX_AGE_MS old
 * is stored. The body is exactly what was sent then (grpc-gateway's
 * message shape is kept); the headers say it is stale:
 *
 *   Age: <seconds since it was stored>                       RFC 9111 §5.1
 *   Cache-Status: shopmicro-gateway; fwd=stale; fwd-status=<503|504>;
 *                 detail=<rs reason>                         RFC 9211
 *   Warning: 110 - "Response is Stale"                       RFC 7234 §5.5.1
 *   X-Shopmicro-Stale: true                                  the documented field
 *
 * fwd=stale: a response was stored but stale (its freshness is always 0:
 * nothing is ever served from here while the upstream answers), so the
 * request went on; fwd-status is what the gateway would have answered
 * without the cache. false: nothing to serve, answer the failure.
 */
static bool answer_stale(const gw_access_t *e, h2o_req_t *req, const rs_grpc_result_t *res,
                         const char *key, size_t key_len)
{
    gw_app_t *app = e->loop->app;
    size_t route = (size_t)(e->route - gw_routes);
    gw_access_t with_stale = *e;
    gw_cache_hit_t hit;
    char v[128];
    int code, n;

    if (key_len == 0 || app->stale == NULL || !gw_upstream_unavailable(res))
        return false;
    if (!gw_cache_get(app->stale, key, key_len, &hit)) {
        gw_metrics_stale(app->metrics, route, false);
        return false;
    }
    code = failure_code(res);
    gw_http_add_header(req, "grpc-metadata-content-type", "Grpc-Metadata-Content-Type",
                       H2O_STRLIT("application/grpc"));
    n = snprintf(v, sizeof v, "%llu", (unsigned long long)(hit.age_ms / 1000));
    gw_http_add_header(req, "age", "Age", v, (size_t)n);
    n = snprintf(v, sizeof v, "shopmicro-gateway; fwd=stale; fwd-status=%d; detail=%s",
                 gw_http_status_from_grpc(code), rs_reason_name(res->reason));
    gw_http_add_header(req, "cache-status", "Cache-Status", v, (size_t)n);
    gw_http_add_header(req, "warning", "Warning", H2O_STRLIT("110 - \"Response is Stale\""));
    gw_http_add_header(req, "x-shopmicro-stale", "X-Shopmicro-Stale", H2O_STRLIT("true"));
    with_stale.res = res;
    with_stale.grpc_code = code; /* the access line says what the upstream did */
    with_stale.stale = true;
    with_stale.age_ms = hit.age_ms;
    gw_access_end(&with_stale, 200);
    gw_metrics_stale(app->metrics, route, true);
    log_stale(e, res, code, hit.age_ms);
    gw_http_send(req, 200, "application/json", hit.body, hit.len); /* copies the body */
    gw_cache_release(app->stale, &hit);
    return true;
}

static void answer_ok(const gw_access_t *e, h2o_req_t *req, const ProtobufCMessage *resp,
                      const char *key, size_t key_len)
{
    char errbuf[SVC_ERRBUF_LEN] = "", *json = NULL;
    size_t len = 0;
    svc_err_t err = pbj_encode(resp, NULL, &json, &len, errbuf);

    if (err != SVC_OK) {
        /* ForwardResponseMessage: a marshalling error goes through the
         * error handler as UNKNOWN. */
        svc_log_error(LOG_MOD, "cannot encode %s as JSON: %s", resp->descriptor->name, errbuf);
        answer_error(e, req, 0, 2, errbuf[0] != '\0' ? errbuf : svc_strerror(err),
                     "RESPONSE_NOT_ENCODABLE");
        return;
    }
    /* grpc-go reports the server's content-type as header metadata, which
     * grpc-gateway forwards; clients may look for it. */
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("grpc-metadata-content-type"),
                          0, "Grpc-Metadata-Content-Type", H2O_STRLIT("application/grpc"));
    gw_add_response_metadata(req, &e->res->headers);
    /* Kept for an outage: the body exactly as it is sent now. */
    if (key_len > 0 && e->loop->app->stale != NULL)
        (void)gw_cache_put(e->loop->app->stale, key, key_len, json, len);
    gw_access_end(e, 200);
    gw_http_send(req, 200, "application/json", json, len);
    pbj_free(NULL, json);
}

/* ------------------------------------------------------------------------
 * Upstream calls
 * ------------------------------------------------------------------------ */

static gw_access_t pending_entry(gw_pending_t *p)
{
    return (gw_access_t){.loop = p->loop,
                         .route = p->route,
                         .method = p->route->method,
                         .method_len = strlen(p->route->method),
                         .path = p->path,
                         .path_len = strlen(p->path),
                         .start_ns = p->start_ns,
                         .res = &p->call.res,
                         .grpc_code = -1,
                         .sub = p->sub[0] != '\0' ? p->sub : NULL};
}

/* The client is gone: cancel its upstream call; no answer can be sent. */
static void on_req_dispose(void *obj)
{
    gw_pending_t *p = *(gw_pending_t **)obj;
    gw_access_t e;

    if (p == NULL)
        return;
    p->req = NULL;
    if (p->call.handle != NULL) {
        rs_grpc_cancel(p->call.handle);
        p->call.handle = NULL;
    }
    e = pending_entry(p);
    e.res = NULL;
    e.grpc_code = 1;
    svc_log_set_request_id(p->id);
    gw_access_end(&e, 499);
    svc_log_set_request_id(NULL);
}

/* The peer closed the connection while its call runs (found by on_peek):
 * cancel the call and answer 499 (grpc-gateway: context canceled), which
 * h2o then fails to write and closes the connection. */
static void abandon(gw_pending_t *p)
{
    h2o_req_t *req = p->req;
    gw_access_t e = pending_entry(p);

    *p->guard = NULL;
    p->req = NULL;
    if (p->call.handle != NULL) {
        rs_grpc_cancel(p->call.handle);
        p->call.handle = NULL;
    }
    e.res = NULL;
    req->http1_is_persistent = 0;
    svc_log_set_request_id(p->id);
    answer_error(&e, req, 0, 1, "context canceled", "CLIENT_CANCELLED");
    svc_log_set_request_id(NULL);
}

static bool client_gone(h2o_req_t *req)
{
    h2o_socket_t *sock = gw_req_socket(req);
    char c;
    ssize_t n;

    if (sock == NULL)
        return false;
    n = recv(h2o_socket_get_fd(sock), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        return true; /* orderly close: Go's server cancels the request context too */
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

static void on_peek(h2o_timeout_entry_t *entry)
{
    gw_loop_t *l = H2O_STRUCT_FROM_MEMBER(gw_loop_t, peek, entry);

    for (h2o_linklist_t *n = l->pending.next; n != &l->pending; n = n->next) {
        gw_pending_t *p = H2O_STRUCT_FROM_MEMBER(gw_pending_t, link, n);
        if (p->req != NULL && client_gone(p->req))
            abandon(p);
    }
    if (!h2o_linklist_is_empty(&l->pending))
        h2o_timeout_link(l->ctx.loop, &l->ctx.hundred_ms_timeout, &l->peek);
}

static void complete(gw_loop_t *l, gw_pending_t *p)
{
    h2o_linklist_unlink(&p->link);
    l->n_pending--;
    if (p->call.handle != NULL) {
        rs_grpc_release(p->call.handle);
        p->call.handle = NULL;
    }
    if (p->req != NULL) {
        gw_access_t e = pending_entry(p);
        h2o_req_t *req = p->req;

        *p->guard = NULL;
        p->req = NULL;
        if (l->stopping)
            req->http1_is_persistent = 0;
        svc_log_set_request_id(p->id);
        if (p->call.res.err == SVC_OK && p->call.resp != NULL)
            answer_ok(&e, req, p->call.resp, p->key, p->key_len);
        else if (p->drain_cancelled || !answer_stale(&e, req, &p->call.res, p->key, p->key_len))
            answer_upstream_error(&e, req, &p->call.res, p->drain_cancelled);
        svc_log_set_request_id(NULL);
    }
    if (p->call.resp != NULL)
        protobuf_c_message_free_unpacked(p->call.resp, NULL);
    free(p);
}

static void on_done(h2o_multithread_receiver_t *rx, h2o_linklist_t *msgs)
{
    gw_loop_t *l = H2O_STRUCT_FROM_MEMBER(gw_loop_t, done_rx, rx);

    while (!h2o_linklist_is_empty(msgs)) {
        h2o_multithread_message_t *m =
            H2O_STRUCT_FROM_MEMBER(h2o_multithread_message_t, link, msgs->next);
        h2o_linklist_unlink(&m->link);
        complete(l, (gw_pending_t *)H2O_STRUCT_FROM_MEMBER(gw_call_t, msg, m));
    }
}

/* The call's overall deadline: Grpc-Timeout, else the configured default.
 * Returns 0, or the gRPC code of the answer that replaces the call. */
static int deadline_of(gw_loop_t *l, h2o_req_t *req, uint64_t start, uint64_t *deadline,
                       char errbuf[static SVC_ERRBUF_LEN])
{
    const h2o_header_t *h = gw_find_header(req, H2O_STRLIT("grpc-timeout"));

    return (int)gw_grpc_timeout_deadline(
        h != NULL ? h->value.base : NULL, h != NULL ? h->value.len : 0,
        l->app->cfg->default_timeout_ms, start, svc_now_ns(), deadline, errbuf);
}

static void forward(gw_loop_t *l, h2o_req_t *req, const gw_match_t *m, const gw_access_t *e,
                    const char *id, const gw_principal_t *who)
{
    const gw_route_t *r = m->route;
    char errbuf[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *msg = NULL;
    rs_grpc_call_opts_t o;
    rpc_md_t *md;
    gw_pending_t *p;
    const char *query = NULL;
    size_t query_len = 0, key_len = 0;
    svc_err_t err;
    int status, code;
    char key[GW_CACHE_KEY_MAX + 1];

    memset(&o, 0, sizeof o);
    o.lane = l->lane;
    code = deadline_of(l, req, e->start_ns, &o.deadline_ns, errbuf);
    if (code != 0) {
        answer_error(e, req, 0, code, errbuf, code == 4 ? "DEADLINE" : "INVALID_TIMEOUT");
        return;
    }
    if (req->entity.base != NULL && req->entity.len > (size_t)l->app->cfg->max_body_bytes) {
        /* h2o refuses these before reading them; this is the backstop. */
        snprintf(errbuf, sizeof errbuf, "request body exceeds %lld bytes",
                 (long long)l->app->cfg->max_body_bytes);
        answer_error(e, req, 413, 8, errbuf, "BODY_TOO_LARGE");
        return;
    }
    /* Headers before the body: they are cheaper to check, and a request
     * refused for its headers is never decoded. */
    md = h2o_mem_alloc_pool(&req->pool, GW_MAX_MD * sizeof *md);
    status = gw_build_metadata(req, l->app->cfg, id, who, md, &o.n_md, errbuf);
    if (status != 0) {
        answer_error(e, req, status, 3, errbuf,
                     status == 431 ? "HEADERS_TOO_LARGE" : "INVALID_HEADER");
        return;
    }
    o.md = md;
    if (req->input.query_at != SIZE_MAX) {
        query = req->input.path.base + req->input.query_at + 1;
        query_len = req->input.path.len - req->input.query_at - 1;
    }
    err = gw_bind_request(m, query, query_len, req->entity.base, req->entity.len, &msg, errbuf);
    if (err != SVC_OK) {
        if (err != SVC_EINVAL)
            svc_log_error(LOG_MOD, "%s %s: cannot build the request: %s", r->method, r->pattern,
                          errbuf);
        answer_error(e, req, 0, err == SVC_EINVAL ? 3 : 13,
                     err == SVC_EINVAL ? errbuf : svc_strerror(err),
                     err == SVC_EINVAL ? "INVALID_REQUEST" : "INTERNAL");
        return;
    }
    /* The key is made of the request as received, before the call: its
     * answer is stored under it, or looked up if the call fails. */
    if (r->stale == GW_STALE_OK && l->app->stale != NULL)
        key_len = gw_cache_key(r->method, strlen(r->method), e->path, e->path_len, query, query_len,
                               key, sizeof key);
    p = calloc(1, sizeof *p + key_len + 1);
    if (p == NULL) {
        pbj_message_free(msg, NULL);
        answer_error(e, req, 0, 13, "out of memory", "INTERNAL");
        return;
    }
    p->call.rx = &l->done_rx;
    p->loop = l;
    p->req = req;
    p->route = r;
    p->start_ns = e->start_ns;
    copy_cut(p->id, sizeof p->id, id, strlen(id));
    copy_cut(p->path, sizeof p->path, e->path, e->path_len);
    if (e->sub != NULL)
        copy_cut(p->sub, sizeof p->sub, e->sub, strlen(e->sub));
    p->key_len = key_len;
    memcpy(p->key, key, key_len);
    err = gw_upstream_call(l->app->ups, r, msg, &o, &p->call);
    pbj_message_free(msg, NULL);
    if (err != SVC_OK) {
        gw_access_t with_res = *e;
        with_res.res = &p->call.res;
        if (!answer_stale(&with_res, req, &p->call.res, p->key, p->key_len))
            answer_upstream_error(&with_res, req, &p->call.res, false);
        free(p);
        return;
    }
    /* The completion cannot be handled before we return: it is a message
     * to this very thread. */
    p->guard = h2o_mem_alloc_shared(&req->pool, sizeof *p->guard, on_req_dispose);
    *p->guard = p;
    h2o_linklist_insert(&l->pending, &p->link);
    l->n_pending++;
    if (!h2o_timeout_is_linked(&l->peek))
        h2o_timeout_link(l->ctx.loop, &l->ctx.hundred_ms_timeout, &l->peek);
}

/* Refuses a request whose length a proxy in front could read differently
 * (request smuggling) before anything else looks at it. The connection is
 * closed: what follows on it may be a smuggled request. */
static bool framing_ok(h2o_req_t *req, const gw_access_t *e)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    int code = gw_framing_verdict(req, errbuf);

    if (code == 0)
        return true;
    req->http1_is_persistent = 0;
    answer_error(e, req, 0, code, errbuf, "MALFORMED_REQUEST");
    return false;
}

static void local(gw_loop_t *l, h2o_req_t *req, const gw_route_t *r, const gw_access_t *e)
{
    gw_reply_t rep = {500, "application/json", "", 0};

    r->local(l->app, &req->pool, &rep);
    gw_access_end(e, rep.status);
    gw_http_send(req, rep.status, rep.content_type, rep.body, rep.len);
}

/* grpc-gateway answers a known path under another method 501 with code 12
 * (UNIMPLEMENTED, from its 405 routing error); 501 says the server cannot
 * do it at all and counts as a server error. 405 with Allow (RFC 9110
 * §15.5.6) says what the client did wrong and what it may do; the body
 * keeps grpc-gateway's code 12. */
static void answer_wrong_method(const gw_access_t *e, h2o_req_t *req, unsigned allow)
{
    char v[64];
    size_t n = gw_route_allow_text(allow, v, sizeof v);

    gw_http_add_header(req, "allow", "Allow", v, n < sizeof v ? n : sizeof v - 1);
    answer_error(e, req, 405, 12, "Method Not Allowed", "METHOD_NOT_ALLOWED");
}

static void route(gw_loop_t *l, h2o_req_t *req, gw_access_t *e, const char *id)
{
    gw_principal_t who;
    bool authenticated;
    gw_match_t m;

    switch (gw_route_match(gw_routes, gw_n_routes, e->method, e->method_len, e->path, e->path_len,
                           &m)) {
    case GW_MATCH_OK:
        e->route = m.route;
        if (!gw_admit(l, req, e, &who, &authenticated))
            break;
        if (m.route->local != NULL)
            local(l, req, m.route, e);
        else
            forward(l, req, &m, e, id,
                    authenticated && gw_upstream_reads_caller(m.route->upstream) ? &who : NULL);
        break;
    case GW_MATCH_NOT_FOUND:
        answer_error(e, req, 0, 5, "Not Found", "ROUTE_NOT_FOUND");
        break;
    case GW_MATCH_WRONG_METHOD:
        answer_wrong_method(e, req, m.allow);
        break;
    case GW_MATCH_BAD_PATH:
        answer_error(e, req, 0, 3, "Bad Request", "INVALID_PATH");
        break;
    }
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    gw_loop_t *l = gw_loop_of(req);
    gw_access_t e = gw_access_begin(l, req, -1);
    const char *id;

    (void)self;
    gw_metrics_begin(l->app->metrics);
    id = gw_request_id(l, req);
    svc_log_set_request_id(id);
    if (l->stopping)
        req->http1_is_persistent = 0;
    if (framing_ok(req, &e) && !gw_cors_handle(req, &e, l->app->cfg->cors_origins))
        route(l, req, &e, id);
    svc_log_set_request_id(NULL);
    return 0;
}

/* The handler needs no state of its own: a request reaches the app
 * through its loop (req->conn->ctx). */
static void add_handler(h2o_pathconf_t *pc)
{
    h2o_create_handler(pc, sizeof(h2o_handler_t))->on_req = on_req;
}

void gw_dispatch_register(h2o_hostconf_t *host, gw_app_t *app)
{
    /* One handler for every path: the route table, not h2o's prefix
     * matching, decides between 404, 501 and a route. The fallback path
     * gets it too, for request targets h2o does not map to "/". */
    add_handler(h2o_config_register_path(host, "/", 0));
    add_handler(&host->fallback_path);
    gw_errfilter_register(&host->fallback_path, app);
}

void gw_loop_dispatch_init(gw_loop_t *l, gw_app_t *app)
{
    uint64_t seed = 0;

    l->app = app;
    h2o_linklist_init_anchor(&l->pending);
    l->n_pending = 0;
    l->peek = (h2o_timeout_entry_t){0, on_peek, {NULL, NULL}};
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed)
        seed = svc_now_ns() ^ (uint64_t)(uintptr_t)l;
    l->rng = seed != 0 ? seed : UINT64_C(0x9E3779B97F4A7C15);
    h2o_multithread_register_receiver(l->ctx.queue, &l->done_rx, on_done);
}

void gw_loop_dispatch_dispose(gw_loop_t *l)
{
    h2o_timeout_unlink(&l->peek);
    h2o_multithread_unregister_receiver(l->ctx.queue, &l->done_rx);
}

size_t gw_loop_cancel_pending(gw_loop_t *l)
{
    size_t n = 0;

    for (h2o_linklist_t *node = l->pending.next; node != &l->pending; node = node->next) {
        gw_pending_t *p = H2O_STRUCT_FROM_MEMBER(gw_pending_t, link, node);
        if (p->call.handle != NULL) {
            p->drain_cancelled = true;
            rs_grpc_cancel(p->call.handle);
            p->call.handle = NULL;
            n++;
        }
    }
    return n;
}