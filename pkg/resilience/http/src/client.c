/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c - the HTTP binding's caller side: options, the destinations
 * (one rs_upstream_t per scheme+host+port), submission, the blocking wait
 * and metrics. The client thread is loop.c; the contract is rs/http.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define NAME_MAX_LEN    20u
#define MAX_HOSTS_LIMIT 256u

/* The engine's method rows: which HTTP requests are safe to repeat. The
 * paths are what the binding passes to rs_call_begin(); see outcome.c. */
static const rs_method_t http_methods[] = {
    {.path = "/GET", .idempotency = RS_IDEMPOTENT},
    {.path = "/HEAD", .idempotency = RS_IDEMPOTENT},
    {.path = "/PUT", .idempotency = RS_IDEMPOTENT},
    {.path = "/DELETE", .idempotency = RS_IDEMPOTENT},
    {.path = "/OPTIONS", .idempotency = RS_IDEMPOTENT},
    {.path = "/POST", .idempotency = RS_NOT_IDEMPOTENT},
    {.path = "/PATCH", .idempotency = RS_NOT_IDEMPOTENT},
    {.path = "/POST-keyed", .idempotency = RS_IDEMPOTENT},
    {.path = "/PATCH-keyed", .idempotency = RS_IDEMPOTENT},
};

void rs_http_opts_init(rs_http_opts_t *o)
{
    *o = (rs_http_opts_t){0};
    rs_upstream_opts_init(&o->upstream);
    o->upstream.policy.retry_on = RS_RETRY_ALL;
    o->max_in_flight = RS_HTTP_DEFAULT_MAX_IN_FLIGHT;
    o->max_hosts = RS_HTTP_DEFAULT_MAX_HOSTS;
    o->max_response_bytes = RS_HTTP_DEFAULT_MAX_RESPONSE_BYTES;
    o->default_deadline_ms = RS_HTTP_DEFAULT_DEADLINE_MS;
}

void rs_http_result_dispose(rs_http_result_t *res)
{
    if (res == NULL)
        return;
    free(res->body);
    res->body = NULL;
    res->body_len = 0;
}

/* ---- lifecycle ------------------------------------------------------------------ */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

/* curl_global_init is not thread-safe in every build: once, for good. */
static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static svc_err_t check_opts(const rs_http_opts_t *o, char errbuf[static SVC_ERRBUF_LEN])
{
    if (o->name == NULL || strlen(o->name) > NAME_MAX_LEN) {
        svc_errbuf_set(errbuf, "rs_http: name must be 1..%u characters", NAME_MAX_LEN);
        return SVC_EINVAL;
    }
    if (o->max_in_flight == 0 || o->max_hosts == 0 || o->max_response_bytes == 0 ||
        o->default_deadline_ms == 0) {
        svc_errbuf_set(errbuf, "rs_http: max_in_flight, max_hosts, max_response_bytes and "
                               "default_deadline_ms must be > 0");
        return SVC_EINVAL;
    }
    if (o->max_hosts > MAX_HOSTS_LIMIT) {
        svc_errbuf_set(errbuf, "rs_http: max_hosts %u > %u", o->max_hosts, MAX_HOSTS_LIMIT);
        return SVC_EINVAL;
    }
    return SVC_OK;
}

/* Builds and drops one upstream from the template, so that a bad policy is
 * refused by rs_http_client_new(), not by the first request. */
static svc_err_t check_template(rs_http_client_t *cl, char errbuf[static SVC_ERRBUF_LEN])
{
    rs_upstream_opts_t t = cl->up_opts;
    rs_upstream_t *probe = NULL;
    svc_err_t err;

    t.name = cl->name;
    err = rs_upstream_new(&t, &probe, errbuf);
    rs_upstream_free(probe);
    return err;
}

svc_err_t rs_http_client_new(const rs_http_opts_t *o, rs_http_client_t **out,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    rs_http_client_t *cl;
    svc_err_t err = check_opts(o, errbuf);

    if (err != SVC_OK)
        return err;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        svc_errbuf_set(errbuf, "rs_http: curl_global_init: %s", curl_easy_strerror(curl_init_rc));
        return SVC_EINTERNAL;
    }
    cl = calloc(1, sizeof *cl);
    if (cl == NULL)
        return SVC_ENOMEM;
    cl->o = *o;
    snprintf(cl->name, sizeof cl->name, "%s", o->name);
    snprintf(cl->user_agent, sizeof cl->user_agent, "%s",
             o->user_agent != NULL ? o->user_agent : "shopmicro-rs-http");
    cl->o.name = cl->name;
    cl->o.user_agent = cl->user_agent;
    cl->up_opts = o->upstream;
    cl->up_opts.methods = http_methods;
    cl->up_opts.n_methods = SVC_COUNTOF(http_methods);
    pthread_mutex_init(&cl->lock, NULL);
    err = check_template(cl, errbuf);
    if (err == SVC_OK) {
        cl->hosts = calloc(o->max_hosts, sizeof *cl->hosts);
        cl->active = calloc(o->max_in_flight, sizeof *cl->active);
        cl->multi = curl_multi_init();
        if (cl->hosts == NULL || cl->active == NULL || cl->multi == NULL)
            err = SVC_ENOMEM;
    }
    if (err == SVC_OK && pthread_create(&cl->thread, NULL, rs_http__loop, cl) != 0) {
        svc_errbuf_set(errbuf, "rs_http: pthread_create: %s", strerror(errno));
        err = SVC_EINTERNAL;
    }
    if (err != SVC_OK) {
        rs_http_client_free(cl);
        return err;
    }
    cl->thread_started = true;
    *out = cl;
    return SVC_OK;
}

void rs_http_client_free(rs_http_client_t *cl)
{
    if (cl == NULL)
        return;
    if (cl->thread_started) {
        pthread_mutex_lock(&cl->lock);
        cl->stop = true;
        pthread_mutex_unlock(&cl->lock);
        curl_multi_wakeup(cl->multi);
        pthread_join(cl->thread, NULL); /* it answers what it holds first */
    }
    if (cl->multi != NULL)
        curl_multi_cleanup(cl->multi);
    for (size_t i = 0; i < cl->n_hosts; i++)
        rs_upstream_free(cl->hosts[i].up);
    free(cl->hosts);
    free(cl->active);
    pthread_mutex_destroy(&cl->lock);
    free(cl);
}

/* ---- destinations --------------------------------------------------------------- */

/* "scheme://host:port" of url, with the scheme's default port. */
static svc_err_t dest_key(const char *url, char key[RS_HTTP__KEY_MAX],
                          char errbuf[static SVC_ERRBUF_LEN])
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL;
    char shown[256];
    svc_err_t err = SVC_EINVAL;

    if (u == NULL)
        return SVC_ENOMEM;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
        /* The text ends up in a log line: no password in it. */
        svc_redact_credentials(url, shown, sizeof shown);
        svc_errbuf_set(errbuf, "rs_http: not a URL: %.200s", shown);
    } else if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
        svc_errbuf_set(errbuf, "rs_http: scheme %.20s: only http and https", scheme);
    } else if ((size_t)snprintf(key, RS_HTTP__KEY_MAX, "%s://%s:%s", scheme, host, port) >=
               RS_HTTP__KEY_MAX) {
        svc_errbuf_set(errbuf, "rs_http: host name too long");
    } else {
        err = SVC_OK;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return err;
}

/* The upstream's name: "<name>-<scheme>-<host>-<port>", cut at RS_NAME_MAX,
 * every character a metric label may not hold written '_'. */
static void dest_name(const char *client, const char *key, char out[RS_NAME_MAX + 1])
{
    size_t n = (size_t)snprintf(out, RS_NAME_MAX + 1, "%s-", client);

    for (const char *k = key; *k != '\0' && n < RS_NAME_MAX; k++) {
        if (*k == ':' && k[1] == '/' && k[2] == '/') {
            out[n++] = '-';
            k += 2;
        } else if (*k == ':') {
            out[n++] = '-';
        } else {
            out[n++] = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
                              *k) != NULL
                           ? *k
                           : '_';
        }
    }
    out[n] = '\0';
}

/* Under cl->lock: the destination's upstream, made on first use. */
static svc_err_t dest_get(rs_http_client_t *cl, const char *key, bool create, rs_upstream_t **out,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    rs_upstream_opts_t t = cl->up_opts;
    char name[RS_NAME_MAX + 1];
    svc_err_t err;

    for (size_t i = 0; i < cl->n_hosts; i++) {
        if (strcmp(cl->hosts[i].key, key) == 0) {
            *out = cl->hosts[i].up;
            return SVC_OK;
        }
    }
    if (!create)
        return SVC_ENOTFOUND;
    if (cl->n_hosts == cl->o.max_hosts) {
        svc_errbuf_set(errbuf, "rs_http: %u destinations already (max_hosts)", cl->o.max_hosts);
        return SVC_EEXHAUSTED;
    }
    dest_name(cl->name, key, name);
    t.name = name;
    err = rs_upstream_new(&t, out, errbuf);
    if (err != SVC_OK)
        return err;
    snprintf(cl->hosts[cl->n_hosts].key, RS_HTTP__KEY_MAX, "%s", key);
    cl->hosts[cl->n_hosts++].up = *out;
    return SVC_OK;
}

rs_breaker_state_t rs_http_client_breaker_state(rs_http_client_t *cl, const char *url)
{
    char key[RS_HTTP__KEY_MAX];
    rs_upstream_t *up = NULL;
    rs_breaker_state_t st = RS_BREAKER_CLOSED;

    if (dest_key(url, key, SVC_ERRBUF_SCRATCH) != SVC_OK)
        return st;
    pthread_mutex_lock(&cl->lock);
    if (dest_get(cl, key, false, &up, SVC_ERRBUF_SCRATCH) == SVC_OK)
        st = rs_upstream_breaker_state(up);
    pthread_mutex_unlock(&cl->lock);
    return st;
}

svc_err_t rs_http_client_metrics(rs_http_client_t *cl, char *buf, size_t cap, size_t *len)
{
    rs_upstream_t *ups[MAX_HOSTS_LIMIT];
    size_t n = 0;

    /* Upstreams live until the client is freed, so rendering needs the
     * lock only to read the list. */
    pthread_mutex_lock(&cl->lock);
    for (; n < cl->n_hosts && n < SVC_COUNTOF(ups); n++)
        ups[n] = cl->hosts[n].up;
    pthread_mutex_unlock(&cl->lock);
    return rs_metrics_render(ups, n, buf, cap, len);
}

/* ---- submission ---------------------------------------------------------------- */

static void result_fail(rs_http_result_t *res, svc_err_t err, rs_reason_t reason,
                        const char *errbuf)
{
    *res = (rs_http_result_t){.err = err, .reason = reason};
    snprintf(res->message, sizeof res->message, "%s", errbuf);
}

/* Copies the request into a new job; SVC_EINVAL / SVC_ENOMEM. */
static svc_err_t job_new(rs_http_client_t *cl, const rs_http_request_t *req, rs_http__job_t **out,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    const char *method = req->method != NULL ? req->method : req->body != NULL ? "POST" : "GET";
    rs_http__job_t *j;
    uint64_t now = svc_now_ns();

    if (strlen(method) >= sizeof j->method ||
        strspn(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != strlen(method) || method[0] == '\0') {
        svc_errbuf_set(errbuf, "rs_http: bad method");
        return SVC_EINVAL;
    }
    if (req->n_headers > RS_HTTP_MAX_HEADERS) {
        svc_errbuf_set(errbuf, "rs_http: more than %u headers", RS_HTTP_MAX_HEADERS);
        return SVC_EINVAL;
    }
    j = calloc(1, sizeof *j);
    if (j == NULL)
        return SVC_ENOMEM;
    *out = j;
    j->cl = cl;
    snprintf(j->method, sizeof j->method, "%s", method);
    rs_http__rs_path(method, rs_http__has_idempotency_key(req->headers, req->n_headers),
                     j->rs_path);
    j->want_body = req->want_body;
    j->pushback_ms = RS_PUSHBACK_NONE;
    j->deadline_ns = req->deadline_ns != SVC_DEADLINE_NONE
                         ? req->deadline_ns
                         : now + (uint64_t)cl->o.default_deadline_ms * SVC_NS_PER_MS;
    j->url = strdup(req->url);
    j->body_len = req->body_len;
    j->body = malloc(req->body_len + 1);
    if (j->url == NULL || j->body == NULL)
        return SVC_ENOMEM;
    if (req->body_len > 0)
        memcpy(j->body, req->body, req->body_len);
    for (size_t i = 0; i < req->n_headers; i++) {
        struct curl_slist *l;
        if (strchr(req->headers[i], '\r') != NULL || strchr(req->headers[i], '\n') != NULL) {
            svc_errbuf_set(errbuf, "rs_http: header %zu has a line break", i);
            return SVC_EINVAL;
        }
        l = curl_slist_append(j->headers, req->headers[i]);
        if (l == NULL)
            return SVC_ENOMEM;
        j->headers = l;
    }
    /* No "Expect: 100-continue" round trip: it would cost an extra wait
     * inside every attempt's timeout for nothing. */
    j->headers = curl_slist_append(j->headers, "Expect:");
    return j->headers != NULL ? SVC_OK : SVC_ENOMEM;
}

svc_err_t rs_http_submit(rs_http_client_t *cl, const rs_http_request_t *req, rs_http_done_fn done,
                         void *arg, rs_http_result_t *res)
{
    char errbuf[SVC_ERRBUF_LEN] = "", key[RS_HTTP__KEY_MAX];
    rs_http__job_t *j = NULL;
    svc_err_t err = req->url != NULL ? dest_key(req->url, key, errbuf) : SVC_EINVAL;

    if (err == SVC_OK)
        err = job_new(cl, req, &j, errbuf);
    if (err == SVC_OK) {
        pthread_mutex_lock(&cl->lock);
        if (cl->stop) {
            svc_errbuf_set(errbuf, "rs_http: client stopping");
            err = SVC_ECANCELLED;
        } else if (cl->in_flight == cl->o.max_in_flight) {
            svc_errbuf_set(errbuf, "rs_http: %u requests in flight (max_in_flight)", cl->in_flight);
            err = SVC_EEXHAUSTED;
        } else {
            err = dest_get(cl, key, true, &j->up, errbuf);
        }
        if (err == SVC_OK) {
            j->done = done;
            j->arg = arg;
            if (cl->queue_tail != NULL)
                cl->queue_tail->next = j;
            else
                cl->queue_head = j;
            cl->queue_tail = j;
            cl->in_flight++;
        }
        pthread_mutex_unlock(&cl->lock);
    }
    if (err != SVC_OK) {
        rs_http__job_free(j);
        result_fail(res, err,
                    err == SVC_EEXHAUSTED ? RS_REASON_BULKHEAD_FULL : RS_REASON_NOT_RETRYABLE,
                    errbuf);
        return err;
    }
    curl_multi_wakeup(cl->multi);
    return SVC_OK;
}

/* ---- the blocking call ------------------------------------------------------------ */

/* Shared by the caller and the client thread: whoever lets go last frees
 * it, so a caller that stopped waiting (a stuck client) leaves nothing
 * dangling. */
typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs;
    bool done;
    rs_http_result_t res;
} waiter_t;

static void waiter_unref(waiter_t *w)
{
    bool last;

    pthread_mutex_lock(&w->lock);
    last = --w->refs == 0;
    pthread_mutex_unlock(&w->lock);
    if (!last)
        return;
    rs_http_result_dispose(&w->res);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

static void waiter_done(void *arg, rs_http_result_t *res)
{
    waiter_t *w = arg;

    pthread_mutex_lock(&w->lock);
    w->res = *res; /* the body moves to the waiter */
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    waiter_unref(w);
}

static struct timespec wait_until(uint64_t deadline_ns)
{
    uint64_t left = deadline_ns > svc_now_ns() ? deadline_ns - svc_now_ns() : 0;
    struct timespec ts;

    /* The condition variable waits on CLOCK_MONOTONIC (set below). */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    left += (uint64_t)ts.tv_nsec + (uint64_t)RS_HTTP_WAIT_GRACE_MS * SVC_NS_PER_MS;
    ts.tv_sec += (time_t)(left / 1000000000ull);
    ts.tv_nsec = (long)(left % 1000000000ull);
    return ts;
}

svc_err_t rs_http_do(rs_http_client_t *cl, const rs_http_request_t *req, rs_http_result_t *res)
{
    waiter_t *w = calloc(1, sizeof *w);
    pthread_condattr_t ca;
    struct timespec until;
    svc_err_t err;

    if (w == NULL) {
        result_fail(res, SVC_ENOMEM, RS_REASON_NOT_RETRYABLE, "rs_http: out of memory");
        return SVC_ENOMEM;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    w->refs = 2;
    until = wait_until(req->deadline_ns != SVC_DEADLINE_NONE
                           ? req->deadline_ns
                           : svc_now_ns() + (uint64_t)cl->o.default_deadline_ms * SVC_NS_PER_MS);
    err = rs_http_submit(cl, req, waiter_done, w, res);
    if (err != SVC_OK) {
        w->refs = 1;
        waiter_unref(w);
        return err;
    }
    pthread_mutex_lock(&w->lock);
    while (!w->done && pthread_cond_timedwait(&w->cond, &w->lock, &until) != ETIMEDOUT)
        ;
    if (w->done) {
        *res = w->res;
        w->res.body = NULL; /* moved to the caller */
    } else {
        result_fail(res, SVC_ETIMEDOUT, RS_REASON_DEADLINE,
                    "rs_http: the client thread did not answer in time");
    }
    pthread_mutex_unlock(&w->lock);
    waiter_unref(w);
    return res->err;
}
