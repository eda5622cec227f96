/* SPDX-License-Identifier: Apache-2.0 */
/* errfilter.c - h2o's own error answers as JSON error bodies (errfilter.h). */
#include <stdio.h>

#include "access.h"
#include "errfilter.h"
#include "http.h"
#include "metrics.h"

typedef struct gw_errfilter {
    h2o_filter_t super;
    gw_app_t *app;
} gw_errfilter_t;

typedef struct gw_errostream {
    h2o_ostream_t super;
    int code;
    const char *msg;    /* NULL: h2o's own text is the message */
    const char *reason; /* ErrorInfo.reason (status.h) */
} gw_errostream_t;

/* h2o's text body is replaced by ours. h2o's text says what was wrong
 * ("broken content-length header", "unknown transfer-encoding"), so it
 * becomes the message; a HEAD answer has no body, and gets the reason. The
 * headers are not out yet, so the Content-Length can still be set. */
static void errostream_send(h2o_ostream_t *self_, h2o_req_t *req, h2o_iovec_t *bufs, size_t bufcnt,
                            h2o_send_state_t state)
{
    gw_errostream_t *self = (gw_errostream_t *)self_;
    char msg[SVC_ERRBUF_LEN];
    gw_error_t err = {.code = self->code, .reason = self->reason};
    h2o_iovec_t body;
    size_t need;

    if (self->msg != NULL)
        snprintf(msg, sizeof msg, "%s", self->msg);
    else if (bufcnt > 0 && bufs[0].len > 0)
        snprintf(msg, sizeof msg, "%.*s", (int)bufs[0].len, bufs[0].base);
    else
        snprintf(msg, sizeof msg, "%s", req->res.reason != NULL ? req->res.reason : "error");
    err.message = msg;
    need = gw_error_body(NULL, 0, &err);
    body.base = h2o_mem_alloc_pool(&req->pool, need + 1);
    body.len = gw_error_body(body.base, need + 1, &err);
    req->res.content_length = body.len;
    if (bufcnt > 0 && state == H2O_SEND_STATE_FINAL)
        h2o_ostream_send_next(&self->super, req, &body, 1, state);
    else
        h2o_ostream_send_next(&self->super, req, NULL, 0, state);
}

/*
 * h2o answers some requests before any handler runs: a Content-Length over
 * max_request_entity_size (413, without reading the body), a chunked body
 * growing past it (413), a broken chunked encoding or Content-Length (400),
 * an unknown Transfer-Encoding (400), an unknown Expect (417). Those answers
 * are text/plain and go through the fallback path's filters only; this one
 * rewrites them into the same JSON error body as every other error, and
 * counts and logs them. (A head h2o cannot parse at all gets a fixed text
 * 400 written straight to the socket, which no filter sees: docs/gateway.md.)
 */
static void errfilter_setup(h2o_filter_t *self_, h2o_req_t *req, h2o_ostream_t **slot)
{
    gw_errfilter_t *self = (gw_errfilter_t *)self_;
    ssize_t ct = h2o_find_header(&req->res.headers, H2O_TOKEN_CONTENT_TYPE, -1);
    gw_loop_t *l = gw_loop_of(req);
    gw_errostream_t *os;
    gw_access_t e = gw_access_begin(l, req, req->res.status < 500 ? 3 : 13);

    if (req->res.status < 400 || (ct != -1 && h2o_memis(req->res.headers.entries[ct].value.base,
                                                        req->res.headers.entries[ct].value.len,
                                                        H2O_STRLIT("application/json")))) {
        h2o_setup_next_ostream(req, slot);
        return;
    }
    os = (gw_errostream_t *)h2o_add_ostream(req, sizeof *os, slot);
    os->super.do_send = errostream_send;
    os->msg = NULL;
    os->reason = req->res.status < 500 ? "MALFORMED_REQUEST" : "INTERNAL";
    if (req->res.status == 413) {
        os->reason = "BODY_TOO_LARGE";
        char *msg = h2o_mem_alloc_pool(&req->pool, 64);
        e.grpc_code = 8; /* RESOURCE_EXHAUSTED, as gRPC itself says of an oversized message */
        snprintf(msg, 64, "request body exceeds %lld bytes",
                 (long long)self->app->cfg->max_body_bytes);
        os->msg = msg;
    }
    os->code = e.grpc_code;
    gw_metrics_begin(self->app->metrics);
    svc_log_set_request_id(gw_request_id(l, req));
    gw_access_end(&e, req->res.status);
    svc_log_set_request_id(NULL);
    if (ct != -1)
        h2o_delete_header(&req->res.headers, ct);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, "Content-Type",
                   H2O_STRLIT("application/json"));
    h2o_setup_next_ostream(req, &os->super.next);
}

void gw_errfilter_register(h2o_pathconf_t *pc, gw_app_t *app)
{
    gw_errfilter_t *f = (gw_errfilter_t *)h2o_create_filter(pc, sizeof *f);

    f->super.on_setup_ostream = errfilter_setup;
    f->app = app;
}
