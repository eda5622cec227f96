/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h - the HTTP binding's pieces: the client and its destinations
 * (client.c, any thread), the client thread (loop.c), and what an attempt's
 * end means (outcome.c, pure).
 */
#ifndef RS_HTTP_INTERNAL_H
#define RS_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <curl/curl.h>

#include "rs/http.h"

#define RS_HTTP__KEY_MAX    300 /* "scheme://host:port" */
#define RS_HTTP__DETAIL_MAX 240

typedef struct rs_http__host {
    char key[RS_HTTP__KEY_MAX];
    rs_upstream_t *up;
} rs_http__host_t;

/* One request, from submission to its done callback. Owned by the client
 * thread once queued (the queue link and nothing else is touched under the
 * client's lock by submitters). */
typedef struct rs_http__job {
    struct rs_http__job *next; /* the submission queue */
    rs_http_client_t *cl;
    rs_upstream_t *up;
    char method[16];
    char rs_path[20]; /* "/POST-keyed": the engine's method row */
    char *url;
    struct curl_slist *headers;
    char *body;
    size_t body_len;
    bool want_body, started;
    uint64_t deadline_ns;
    rs_call_t call;
    CURL *easy;          /* the attempt on the wire, or NULL */
    uint64_t wake_ns;    /* a backoff ends then; 0: none */
    int64_t pushback_ms; /* of the last attempt */
    char *resp;          /* the last response's body (want_body) */
    size_t resp_len;
    bool resp_overflow;
    char curl_err[CURL_ERROR_SIZE];
    char detail[RS_HTTP__DETAIL_MAX];
    rs_http_result_t res;
    rs_http_done_fn done;
    void *arg;
} rs_http__job_t;

struct rs_http_client {
    rs_http_opts_t o;
    char name[32];
    char user_agent[64];
    rs_upstream_opts_t up_opts; /* the template, methods set */
    CURLM *multi;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock; /* hosts, queue, in_flight, stop */
    rs_http__host_t *hosts;
    size_t n_hosts;
    rs_http__job_t *queue_head, *queue_tail;
    uint32_t in_flight;
    bool stop;
    rs_http__job_t **active; /* client thread only: jobs it holds */
    size_t n_active;
};

/* ---- loop.c: the client thread ---------------------------------------------- */
void *rs_http__loop(void *arg);
void rs_http__job_free(rs_http__job_t *j);

/* ---- outcome.c: pure ----------------------------------------------------------- */
/* What an HTTP status means for the engine (2xx: SVC_OK). */
svc_err_t rs_http__status_err(long status);
/* What a curl result other than CURLE_OK means (connection errors:
 * SVC_EUNAVAIL, our timeout: SVC_ETIMEDOUT, ...). */
svc_err_t rs_http__curl_err(CURLcode rc);
/* The engine's method row for an HTTP method: "/GET", "/POST-keyed", ...
 * (an unknown method gets "/<METHOD>", which no row has: not idempotent). */
void rs_http__rs_path(const char *method, bool has_idempotency_key, char out[20]);
/* True when one of the header lines is a non-empty Idempotency-Key. */
bool rs_http__has_idempotency_key(const char *const *headers, size_t n);

#endif
