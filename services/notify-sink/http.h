/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.h - the notify-sink's HTTP/1.1 server: one thread, poll(2), plain
 * sockets, keep-alive, Content-Length bodies (no chunked requests: 501).
 *
 * Why not h2o like the gateway: the sink must misbehave on purpose at the
 * socket level - keep a request unanswered for as long as the client waits
 * (hang), and close its listener and every connection for a while (go away)
 * - which is a few lines here and a fight with h2o's connection ownership
 * there; and it must be cheap to run inside a unit test's thread. It is a
 * test double and a demo, not an edge server: bounded, not fast. The
 * request head is read by pkg/http1, the parser pkg/admin's port shares.
 *
 * Bounds: max_conns connections (one more is accepted and closed at once),
 * NSK_HTTP_MAX_HEAD bytes of request head (431), max_body bytes of body
 * (413), NSK_HTTP_MAX_HEADERS headers (431), idle_timeout_ms without a byte
 * in either direction (closed; a hung request too).
 *
 * Threads: everything, the handler included, runs on the thread that calls
 * nsk_http_run(); the handler must not block.
 */
#ifndef NSK_HTTP_H
#define NSK_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http1/http1.h"
#include "svc/core.h"

#define NSK_HTTP_MAX_HEAD    16384
#define NSK_HTTP_MAX_HEADERS H1_MAX_HEADERS

typedef struct nsk_http nsk_http_t;

/* One parsed request; every string but the body is NUL-terminated; all
 * borrowed for the handler's call only. */
typedef struct nsk_req {
    const char *method;
    const char *path;    /* without the query */
    const char *query;   /* after '?', "" when none */
    const char *version; /* "HTTP/1.1" */
    const char *body;    /* body_len bytes, not NUL-terminated */
    size_t body_len;
    size_t n_headers;
    const char *names[NSK_HTTP_MAX_HEADERS];
    const char *values[NSK_HTTP_MAX_HEADERS];
} nsk_req_t;

/* The value of the first header called name (case-insensitive), or NULL. */
const char *nsk_req_header(const nsk_req_t *r, const char *name);

/* What the handler answers. */
typedef struct nsk_resp {
    int status;        /* 0: hang - never answer this connection */
    const char *ctype; /* NULL: text/plain */
    char extra[128];   /* extra header line(s) without CRLF, e.g. "Retry-After: 1"; "" none */
    char *body;        /* owned by the handler's ctx until the next call; copied */
    size_t body_len;
} nsk_resp_t;

typedef void (*nsk_handler_fn)(void *ctx, const nsk_req_t *req, nsk_resp_t *resp);

typedef struct nsk_http_opts {
    const char *listen; /* "host:port"; port 0: the kernel picks */
    unsigned max_conns;
    size_t max_body;
    int idle_timeout_ms;
    nsk_handler_fn handler;
    void *ctx;
} nsk_http_opts_t;

/* Binds and listens (nothing runs yet). SVC_EINVAL (bad address) or
 * SVC_EUNAVAIL (bind/listen failed), errbuf says why. *out owned by caller. */
svc_err_t nsk_http_new(const nsk_http_opts_t *o, nsk_http_t **out,
                       char errbuf[static SVC_ERRBUF_LEN]);
/* Closes everything. NULL-safe. Not while nsk_http_run() runs. */
void nsk_http_free(nsk_http_t *h);
/* The bound port. */
int nsk_http_port(const nsk_http_t *h);

/* Serves until stop_fd becomes readable (a signalfd, a pipe); returns 0, or
 * 1 after a fatal poll error. */
int nsk_http_run(nsk_http_t *h, int stop_fd);

/* From the handler: once the current response is written, close the
 * listener and every connection, and listen again after ms. */
void nsk_http_go_away(nsk_http_t *h, uint32_t ms);

#endif /* NSK_HTTP_H */
