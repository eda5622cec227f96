/* SPDX-License-Identifier: Apache-2.0 */
/* metrics.c - fixed-cardinality request counters and latency histograms. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

static const char *const methods[] = {"GET",   "POST", "PUT",     "DELETE",
                                      "PATCH", "HEAD", "OPTIONS", "OTHER"};
#define N_METHODS SVC_COUNTOF(methods)

/* Every status the gateway itself produces; anything else counts as "other". */
static const int codes[] = {200, 204, 400, 401, 403, 404, 405, 409, 413,
                            417, 429, 431, 499, 500, 501, 503, 504};
#define N_CODES (SVC_COUNTOF(codes) + 1)

/* Upper bounds in seconds (Prometheus client defaults plus 1 ms and 2.5 ms). */
static const double bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                0.25,  0.5,    1.0,   2.5,  5.0,   10.0};
#define N_BUCKETS (SVC_COUNTOF(bounds) + 1) /* + Inf */

typedef struct hist {
    _Atomic uint64_t bucket[N_BUCKETS]; /* not cumulative; summed when rendered */
    _Atomic uint64_t sum_ns, count;
} hist_t;

struct gw_metrics {
    const char *const *labels;
    size_t n_routes;            /* + 1 for "unmatched" */
    _Atomic uint64_t *requests; /* [route][method][code] */
    hist_t *hist;               /* [route][method] */
    _Atomic uint64_t *stale;    /* [route][served, missed] */
    _Atomic int64_t in_flight;
    _Atomic uint64_t pauses[GW_PAUSE__COUNT];
};

svc_err_t gw_metrics_new(const char *const *labels, size_t n_routes, gw_metrics_t **out)
{
    gw_metrics_t *m = calloc(1, sizeof *m);
    size_t rows = n_routes + 1;

    if (m == NULL)
        return SVC_ENOMEM;
    m->labels = labels;
    m->n_routes = n_routes;
    m->requests = calloc(rows * N_METHODS * N_CODES, sizeof *m->requests);
    m->hist = calloc(rows * N_METHODS, sizeof *m->hist);
    m->stale = calloc(rows * 2, sizeof *m->stale);
    if (m->requests == NULL || m->hist == NULL || m->stale == NULL) {
        gw_metrics_free(m);
        return SVC_ENOMEM;
    }
    *out = m;
    return SVC_OK;
}

void gw_metrics_free(gw_metrics_t *m)
{
    if (m == NULL)
        return;
    free(m->requests);
    free(m->hist);
    free(m->stale);
    free(m);
}

void gw_metrics_begin(gw_metrics_t *m)
{
    atomic_fetch_add_explicit(&m->in_flight, 1, memory_order_relaxed);
}

static size_t method_index(const char *method, size_t len)
{
    for (size_t i = 0; i + 1 < N_METHODS; i++)
        if (strlen(methods[i]) == len && memcmp(methods[i], method, len) == 0)
            return i;
    return N_METHODS - 1;
}

static size_t code_index(int status)
{
    for (size_t i = 0; i < SVC_COUNTOF(codes); i++)
        if (codes[i] == status)
            return i;
    return N_CODES - 1;
}

void gw_metrics_end(gw_metrics_t *m, size_t route, const char *method, size_t method_len,
                    int status, uint64_t duration_ns)
{
    size_t r = route < m->n_routes ? route : m->n_routes;
    size_t mi = method_index(method, method_len), b = 0;
    double s = (double)duration_ns / 1e9;
    hist_t *h = &m->hist[r * N_METHODS + mi];

    atomic_fetch_sub_explicit(&m->in_flight, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->requests[(r * N_METHODS + mi) * N_CODES + code_index(status)], 1,
                              memory_order_relaxed);
    while (b < SVC_COUNTOF(bounds) && s > bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, duration_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

void gw_metrics_stale(gw_metrics_t *m, size_t route, bool served)
{
    size_t r = route < m->n_routes ? route : m->n_routes;

    atomic_fetch_add_explicit(&m->stale[r * 2 + (served ? 0 : 1)], 1, memory_order_relaxed);
}

void gw_metrics_accept_paused(gw_metrics_t *m, gw_pause_reason_t why)
{
    atomic_fetch_add_explicit(&m->pauses[why], 1, memory_order_relaxed);
}

/* A growable text buffer; `err` sticks once an allocation failed. */
typedef struct out {
    char **buf;
    size_t *len, cap;
    svc_err_t err;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(out_t *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (o->err != SVC_OK)
        return;
    for (;;) {
        size_t room = o->cap - *o->len;
        va_start(ap, fmt);
        n = vsnprintf(*o->buf + *o->len, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->err = SVC_EINTERNAL;
            return;
        }
        if ((size_t)n < room) {
            *o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap * 2 + (size_t)n + 1;
        char *p = realloc(*o->buf, cap);
        if (p == NULL) {
            o->err = SVC_ENOMEM;
            return;
        }
        *o->buf = p;
        o->cap = cap;
    }
}

static const char *route_label(const gw_metrics_t *m, size_t r)
{
    return r < m->n_routes ? m->labels[r] : "unmatched";
}

static void render_stale(const gw_metrics_t *m, const gw_cache_stats_t *cache, out_t *o)
{
    static const char *const name[2] = {"gateway_stale_answers_total",
                                        "gateway_stale_misses_total"};
    static const char *const help[2] = {
        "Answers served from the stale cache because the upstream was unavailable, by route.",
        "Availability failures of a stale-read route with no usable answer in the cache "
        "(answered as failures), by route."};
    size_t rows = m->n_routes + 1;

    for (int k = 0; k < 2; k++) {
        put(o, "# HELP %s %s\n# TYPE %s counter\n", name[k], help[k], name[k]);
        for (size_t r = 0; r < rows; r++) {
            uint64_t v = atomic_load_explicit(&m->stale[r * 2 + (size_t)k], memory_order_relaxed);
            if (v > 0)
                put(o, "%s{route=\"%s\"} %llu\n", name[k], route_label(m, r),
                    (unsigned long long)v);
        }
    }
    if (cache == NULL)
        return;
    put(o,
        "# HELP gateway_stale_cache_entries Answers kept for stale reads.\n"
        "# TYPE gateway_stale_cache_entries gauge\ngateway_stale_cache_entries %llu\n"
        "# HELP gateway_stale_cache_bytes Memory those answers take (keys, bodies, overhead).\n"
        "# TYPE gateway_stale_cache_bytes gauge\ngateway_stale_cache_bytes %llu\n"
        "# HELP gateway_stale_cache_evictions_total Answers dropped to make room "
        "(GATEWAY_STALE_MAX_ENTRIES, GATEWAY_STALE_MAX_BYTES).\n"
        "# TYPE gateway_stale_cache_evictions_total counter\n"
        "gateway_stale_cache_evictions_total %llu\n"
        "# HELP gateway_stale_cache_expired_total Answers dropped because they passed "
        "GATEWAY_STALE_MAX_AGE_MS.\n"
        "# TYPE gateway_stale_cache_expired_total counter\n"
        "gateway_stale_cache_expired_total %llu\n"
        "# HELP gateway_stale_cache_max_age_seconds The oldest answer served stale.\n"
        "# TYPE gateway_stale_cache_max_age_seconds gauge\n"
        "gateway_stale_cache_max_age_seconds %.3f\n",
        (unsigned long long)cache->entries, (unsigned long long)cache->bytes,
        (unsigned long long)cache->evictions, (unsigned long long)cache->expired,
        (double)cache->max_age_ms / 1000.0);
}

static void render_conns(const gw_metrics_t *m, const gw_conn_stats_t *conns, out_t *o)
{
    static const char *const reason[GW_PAUSE__COUNT] = {
        [GW_PAUSE_CONNECTION_LIMIT] = "connection_limit",
        [GW_PAUSE_DESCRIPTORS] = "descriptors",
    };

    if (conns != NULL)
        put(o,
            "# HELP gateway_connections Client connections open.\n"
            "# TYPE gateway_connections gauge\ngateway_connections %zu\n"
            "# HELP gateway_connections_max GATEWAY_MAX_CONNECTIONS.\n"
            "# TYPE gateway_connections_max gauge\ngateway_connections_max %zu\n",
            conns->open, conns->max);
    put(o, "# HELP gateway_accept_pauses_total Times a loop stopped accepting for 100 ms: at "
           "the connection limit, or out of descriptors.\n"
           "# TYPE gateway_accept_pauses_total counter\n");
    for (int r = 0; r < GW_PAUSE__COUNT; r++)
        put(o, "gateway_accept_pauses_total{reason=\"%s\"} %llu\n", reason[r],
            (unsigned long long)atomic_load_explicit(&m->pauses[r], memory_order_relaxed));
}

svc_err_t gw_metrics_render(const gw_metrics_t *m, const gw_cache_stats_t *cache,
                            const gw_conn_stats_t *conns, char **buf, size_t *len)
{
    out_t o = {buf, len, 0, SVC_OK};
    size_t rows = m->n_routes + 1;

    o.cap = *len + 1; /* what we know is there; put() grows it as needed */
    if (*buf == NULL) {
        *buf = malloc(4096);
        if (*buf == NULL)
            return SVC_ENOMEM;
        *len = 0;
        (*buf)[0] = '\0';
        o.cap = 4096;
    }
    put(&o, "# HELP gateway_http_requests_total HTTP requests answered, by route template, "
            "method and status code.\n# TYPE gateway_http_requests_total counter\n");
    for (size_t r = 0; r < rows; r++)
        for (size_t mi = 0; mi < N_METHODS; mi++)
            for (size_t c = 0; c < N_CODES; c++) {
                uint64_t v = atomic_load_explicit(&m->requests[(r * N_METHODS + mi) * N_CODES + c],
                                                  memory_order_relaxed);
                char code[8];
                if (v == 0)
                    continue;
                if (c < SVC_COUNTOF(codes))
                    snprintf(code, sizeof code, "%d", codes[c]);
                else
                    snprintf(code, sizeof code, "other");
                put(&o,
                    "gateway_http_requests_total{route=\"%s\",method=\"%s\",code=\"%s\"} %llu\n",
                    route_label(m, r), methods[mi], code, (unsigned long long)v);
            }
    put(&o, "# HELP gateway_http_request_duration_seconds Time from the request's arrival to its "
            "answer.\n# TYPE gateway_http_request_duration_seconds histogram\n");
    for (size_t r = 0; r < rows; r++)
        for (size_t mi = 0; mi < N_METHODS; mi++) {
            const hist_t *h = &m->hist[r * N_METHODS + mi];
            uint64_t count = atomic_load_explicit(&h->count, memory_order_relaxed), cum = 0;
            if (count == 0)
                continue;
            for (size_t b = 0; b < N_BUCKETS; b++) {
                char le[16];
                cum += atomic_load_explicit(&h->bucket[b], memory_order_relaxed);
                if (b < SVC_COUNTOF(bounds))
                    snprintf(le, sizeof le, "%g", bounds[b]);
                else
                    snprintf(le, sizeof le, "+Inf");
                put(&o,
                    "gateway_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\","
                    "le=\"%s\"} %llu\n",
                    route_label(m, r), methods[mi], le, (unsigned long long)cum);
            }
            put(&o,
                "gateway_http_request_duration_seconds_sum{route=\"%s\",method=\"%s\"} %.9f\n"
                "gateway_http_request_duration_seconds_count{route=\"%s\",method=\"%s\"} %llu\n",
                route_label(m, r), methods[mi],
                (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9,
                route_label(m, r), methods[mi], (unsigned long long)cum);
        }
    put(&o,
        "# HELP gateway_http_in_flight Requests received and not yet answered.\n"
        "# TYPE gateway_http_in_flight gauge\ngateway_http_in_flight %lld\n",
        (long long)atomic_load_explicit(&m->in_flight, memory_order_relaxed));
    render_stale(m, cache, &o);
    render_conns(m, conns, &o);
    return o.err;
}
