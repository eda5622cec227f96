/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rs/http.h - the HTTP binding of pkg/resilience, on libcurl's multi
 * interface. Every HTTP request a ShopMicro service makes (the notification
 * worker's webhooks) goes through one of these clients, so each gets
 *
 *     bulkhead -> breaker -> retry -> per-attempt timeout -> libcurl
 *
 * with the engine, reasons, log lines and metrics of rs/resilience.h.
 *
 * Destinations. One rs_upstream_t (breaker, retry budget, bulkhead,
 * metrics) per destination, scheme + host + port ("http://127.0.0.1:8090"),
 * made on first use from opts.upstream, at most max_hosts of them: one
 * customer's dead endpoint opens its own breaker and nobody else's. Its
 * name (the metric label "upstream") is "<name>-<scheme>-<host>-<port>",
 * characters outside [A-Za-z0-9_.-] written '_'.
 *
 * What is retried (docs/resilience.md §12 has the table): connection
 * failures, the per-attempt timeout, 429, 500, 502, 503 and 504 - only for a
 * request that is safe to repeat: GET, HEAD, PUT, DELETE, OPTIONS, and POST
 * or PATCH carrying an Idempotency-Key header. Any other 4xx never. A 429 or
 * 503 with Retry-After (delta-seconds or an HTTP-date) makes the next
 * attempt wait at least that long; when that wait does not fit in the
 * deadline the request fails at once (reason deadline, and the message says
 * so), and beyond max_pushback_ms with reason pushback.
 *
 * Threads. Each client runs ONE thread of its own, which owns the curl
 * multi handle, every easy handle, every request from its submission to its
 * done callback, and every rs_call_t. Callers (any number of threads)
 * submit; a submission copies the request and wakes the thread with
 * curl_multi_wakeup(). Nothing a caller holds is touched by the client
 * thread after rs_http_submit() returns, except through `done`.
 *
 * Bounds. At most max_in_flight requests accepted and not yet answered
 * (more: SVC_EEXHAUSTED, reason bulkhead-full, at once); max_response_bytes
 * of body per response (more: SVC_ERANGE, not retried); every request has a
 * deadline (the caller's, else default_deadline_ms), which the thread
 * enforces (curl's timeout is each attempt's deadline, and no backoff ends
 * past it), and rs_http_do() waits at most until it plus RS_HTTP_WAIT_GRACE_MS.
 */
#ifndef RS_HTTP_H
#define RS_HTTP_H

#include "rs/resilience.h"

#define RS_HTTP_DEFAULT_MAX_IN_FLIGHT      64u
#define RS_HTTP_DEFAULT_MAX_HOSTS          32u /* at most 256 */
#define RS_HTTP_DEFAULT_MAX_RESPONSE_BYTES (1024u * 1024u)
#define RS_HTTP_DEFAULT_DEADLINE_MS        30000u /* a request without one */
#define RS_HTTP_WAIT_GRACE_MS              1000u  /* rs_http_do() past the deadline */
#define RS_HTTP_MAX_HEADERS                32u    /* caller headers per request */

typedef struct rs_http_opts {
    const char *name;             /* required, [A-Za-z0-9_.-]{1,20}: "webhook" */
    rs_upstream_opts_t upstream;  /* every destination's policy, breaker, budget,
                                     bulkhead (name and methods: set by the binding) */
    uint32_t max_in_flight;       /* RS_HTTP_DEFAULT_MAX_IN_FLIGHT */
    uint32_t max_hosts;           /* RS_HTTP_DEFAULT_MAX_HOSTS */
    size_t max_response_bytes;    /* RS_HTTP_DEFAULT_MAX_RESPONSE_BYTES */
    uint32_t default_deadline_ms; /* RS_HTTP_DEFAULT_DEADLINE_MS */
    const char *user_agent;       /* NULL: "shopmicro-rs-http" */
} rs_http_opts_t;

/* rs_upstream_opts_init() plus retry_on = RS_RETRY_ALL (HTTP 5xx included)
 * and the RS_HTTP_DEFAULT_* values; name must still be set. */
void rs_http_opts_init(rs_http_opts_t *o);

typedef struct rs_http_client rs_http_client_t;

/* Validates (SVC_EINVAL naming the option in errbuf), makes the multi handle
 * and starts the client thread. *out owned by caller. o is copied. */
svc_err_t rs_http_client_new(const rs_http_opts_t *o, rs_http_client_t **out,
                             char errbuf[static SVC_ERRBUF_LEN]);

/* Stops the thread: requests still in flight are answered SVC_ECANCELLED
 * (reason cancelled; their done callbacks run on the client thread before
 * this returns). No rs_http_submit() may run concurrently or later.
 * NULL-safe. Not from a done callback. */
void rs_http_client_free(rs_http_client_t *cl);

typedef struct rs_http_request {
    const char *method;         /* "GET", "POST", ...; NULL: GET, or POST with a body */
    const char *url;            /* http:// or https:// */
    const char *const *headers; /* "Name: value" lines, at most RS_HTTP_MAX_HEADERS */
    size_t n_headers;
    const void *body; /* body_len bytes, may be NULL */
    size_t body_len;
    uint64_t deadline_ns; /* absolute monotonic, all attempts; SVC_DEADLINE_NONE:
                             now + default_deadline_ms */
    bool want_body;       /* keep the final response's body in the result */
} rs_http_request_t;

typedef struct rs_http_result {
    svc_err_t err;                /* SVC_OK for a 2xx; else the error to act on */
    int status;                   /* the last HTTP status; 0: none came (connection
                                     error, timeout, rejected at admission) */
    rs_reason_t reason;           /* why the request ended (rs_reason_name()) */
    uint32_t attempts;            /* attempts started; 0: rejected at admission */
    uint32_t retry_after_ms;      /* breaker-open: the rest of its cooldown; else the
                                     last Retry-After the server sent (0: none) */
    char message[SVC_ERRBUF_LEN]; /* "HTTP 503", curl's error, "circuit open",
                                     "Retry-After 5000ms does not fit in the deadline ..." */
    char *body;                   /* want_body and a response came: owned by the
                                     receiver of the result (free()); else NULL */
    size_t body_len;
} rs_http_result_t;

/* Frees res->body. NULL-safe. */
void rs_http_result_dispose(rs_http_result_t *res);

/*
 * Called once per accepted request, on the client thread, when it is over.
 * res is borrowed except res->body, whose ownership passes to the callee.
 * It must not block, nor call rs_http_client_free(); it may submit.
 */
typedef void (*rs_http_done_fn)(void *arg, rs_http_result_t *res);

/*
 * Submits a request; returns at once. The request and everything it points
 * to are copied (borrowed only during the call). SVC_OK: done will run
 * exactly once. Any other return - SVC_EINVAL (bad URL, method, headers),
 * SVC_EEXHAUSTED (max_in_flight or max_hosts reached), SVC_ENOMEM - means
 * done will NOT run, and *res says why. Thread-safe.
 */
svc_err_t rs_http_submit(rs_http_client_t *cl, const rs_http_request_t *req, rs_http_done_fn done,
                         void *arg, rs_http_result_t *res);

/*
 * Blocking: submits and waits for the result (bounded: see above). Returns
 * res->err. res->body as for done. Thread-safe; not from a done callback.
 */
svc_err_t rs_http_do(rs_http_client_t *cl, const rs_http_request_t *req, rs_http_result_t *res);

/* The breaker state of the destination of url; RS_BREAKER_CLOSED for one
 * never used. Thread-safe. */
rs_breaker_state_t rs_http_client_breaker_state(rs_http_client_t *cl, const char *url);

/* rs_metrics_render() of every destination so far. Thread-safe. */
svc_err_t rs_http_client_metrics(rs_http_client_t *cl, char *buf, size_t cap, size_t *len);

#endif /* RS_HTTP_H */
