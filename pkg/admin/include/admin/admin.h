/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admin.h - the admin HTTP port every ShopMicro service shares: GET /healthz,
 * /readyz and /metrics on a tiny blocking HTTP/1.1 listener of its own.
 *
 * Plain sockets and poll(2) on one thread of its own (no h2o), so that any
 * service can link it. Every response closes its connection. Resources are
 * bounded: at most max_conns connections (the next one gets 503 and is
 * closed), max_request_bytes of request head, read_timeout_ms from accept to
 * a complete request (then 408), max_response_bytes of body (then 500).
 *
 * Routes: GET /healthz -> 200 "ok\n"; GET /readyz -> the ready callback's
 * JSON, 200 when it returns true, 503 otherwise; GET /metrics -> the metrics
 * callback's Prometheus text (text/plain; version=0.0.4). Any other path 404,
 * another method 405, a head larger than max_request_bytes 431, a request
 * with a body 413, anything unparsable 400.
 *
 * One optional route family for test and operator knobs: with a debug
 * callback set, GET, POST and PUT of /debug and /debug/... go to it (other
 * methods 405). GET carries no body; POST and PUT may carry one of
 * Content-Length bytes (no chunked encoding), head and body together within
 * max_request_bytes (else 413). The callback answers with a status and a body,
 * JSON unless it sets another type (admin_buf_set_content_type). Without the
 * callback those paths are 404.
 *
 * Threads: the callbacks run on the admin thread, one at a time, concurrently
 * with the service's own threads, so whatever they read must be atomics or
 * lock-protected. They must not block for long: a scrape waits on them.
 */
#ifndef ADMIN_ADMIN_H
#define ADMIN_ADMIN_H

#include <stdbool.h>
#include <stddef.h>

#include "svc/core.h"

#define ADMIN_DEFAULT_LISTEN             "127.0.0.1:0"
#define ADMIN_DEFAULT_MAX_REQUEST_BYTES  8192
#define ADMIN_DEFAULT_MAX_CONNS          16
#define ADMIN_DEFAULT_READ_TIMEOUT_MS    5000
#define ADMIN_DEFAULT_MAX_RESPONSE_BYTES (1024 * 1024)

/* A response body under construction; capped at max_response_bytes. */
typedef struct admin_buf admin_buf_t;

/* Appends printf-style. Past the cap the body is marked overflowed and the
 * response becomes 500. */
void admin_buf_printf(admin_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal, quotes included. */
void admin_buf_json_str(admin_buf_t *b, const char *s);
/* A /debug answer that a page of any origin may read: it is sent with
 * Access-Control-Allow-Origin: * (for read-only JSON that a browser page on
 * another port polls, such as pkg/ops' /debug/resilience.json). */
void admin_buf_allow_any_origin(admin_buf_t *b);
/* The Content-Type of a /debug answer (static or valid until the callback
 * returns; default application/json), for a debug page that is not JSON
 * (the gateway's live resilience page, text/html). */
void admin_buf_set_content_type(admin_buf_t *b, const char *ctype);

/* One thing a service needs to do its job, as /readyz reports it. */
typedef struct admin_check {
    const char *name; /* "database", "saga_consumer", ...     */
    bool ok;
    char detail[SVC_ERRBUF_LEN]; /* what is wrong, or what it is          */
} admin_check_t;

/* A whole /readyz body, {"status":"ok"|"unavailable","checks":[{"name":..,
 * "ok":..,"detail":..},...]}; returns true when every check is ok (the
 * callback's answer). */
bool admin_ready_write(admin_buf_t *out, const admin_check_t *checks, size_t n);
/* admin_ready_write with one check. */
bool admin_ready_one(admin_buf_t *out, const char *name, bool ok, const char *detail);
/* A renderer with snprintf's contract (rs_metrics_render, rpc_server_
 * metrics_render behind a one-line adapter): the text into buf (cap bytes,
 * NUL-terminated), the full length into *len. */
typedef svc_err_t (*admin_render_fn)(const void *arg, char *buf, size_t cap, size_t *len);
/* Appends what fn renders (sized first, then rendered in place; a page that
 * grew in between is sized again). */
void admin_buf_render(admin_buf_t *b, admin_render_fn fn, const void *arg);

/* Writes the Prometheus text page into out. */
typedef void (*admin_metrics_fn)(void *ctx, admin_buf_t *out);
/* Writes the /readyz JSON body into out; true = ready (200), false = 503. */
typedef bool (*admin_ready_fn)(void *ctx, admin_buf_t *out);

/* A /debug request, as the debug callback sees it. Every string is
 * NUL-terminated and borrowed for the duration of the callback. */
typedef struct admin_request {
    const char *method; /* "GET", "POST" or "PUT"                          */
    const char *path;   /* "/debug" or "/debug/...", without the query      */
    const char *query;  /* after '?', "" when none (not percent-decoded)    */
    const char *body;   /* "" when none; may contain no NUL (else 400)      */
    size_t body_len;
} admin_request_t;

/* Answers a /debug request: writes a JSON body into out and returns the HTTP
 * status (200, 400, 404, ...; anything outside 200..599 becomes 500). */
typedef int (*admin_debug_fn)(void *ctx, const admin_request_t *req, admin_buf_t *out);

typedef struct admin_opts {
    const char *listen;        /* "host:port"; port 0 = the kernel picks;
                                  "none": no port (admin_server_new starts
                                  nothing)                                   */
    size_t max_request_bytes;  /* request line + headers                      */
    unsigned max_conns;        /* open connections at once                    */
    int read_timeout_ms;       /* accept -> complete request; also send limit */
    size_t max_response_bytes; /* body built by a callback                    */
    admin_metrics_fn metrics;  /* NULL: /metrics is an empty page             */
    admin_ready_fn ready;      /* NULL: /readyz is always 200 {"status":"ok"} */
    void *ctx;                 /* passed to metrics and ready                 */
    admin_debug_fn debug;      /* NULL: /debug paths are 404                  */
    void *debug_ctx;           /* passed to debug                             */
    const char *log_module;    /* of the start-up line; NULL: "admin"         */
} admin_opts_t;

/* Fills the ADMIN_DEFAULT_* values and NULL callbacks. */
void admin_opts_init(admin_opts_t *o);

typedef struct admin_server admin_server_t;

/* Binds, listens and starts the admin thread. On error (bad address, port
 * in use, bad option) nothing is left running and errbuf says why: SVC_EINVAL
 * or SVC_EUNAVAIL. o is copied (listen included). *out owned by caller;
 * with listen "none", SVC_OK and *out NULL (admin_server_free takes it). */
svc_err_t admin_server_new(const admin_opts_t *o, admin_server_t **out,
                           char errbuf[static SVC_ERRBUF_LEN]);
/* admin_server_new with the defaults and listen, metrics, ready and ctx:
 * what a service's start needs ("none": nothing started). */
svc_err_t admin_server_start(const char *listen, admin_metrics_fn metrics, admin_ready_fn ready,
                             void *ctx, admin_server_t **out, char errbuf[static SVC_ERRBUF_LEN]);

/* The bound port (useful with port 0). */
int admin_server_port(const admin_server_t *s);
/* Stops the thread (joined: no callback runs after this returns), closes
 * every connection and frees. NULL-safe. Not from a callback. */
void admin_server_free(admin_server_t *s);

#endif
