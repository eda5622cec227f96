/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h - the gateway's own HTTP metrics, Prometheus text format:
 *
 *   gateway_http_requests_total{route,method,code}            counter
 *   gateway_http_request_duration_seconds{route,method}       histogram
 *   gateway_http_in_flight                                    gauge
 *   gateway_stale_answers_total{route}                        counter
 *   gateway_stale_misses_total{route}                         counter
 *   gateway_stale_cache_entries, gateway_stale_cache_bytes    gauges
 *   gateway_stale_cache_evictions_total                       counter
 *   gateway_stale_cache_expired_total                         counter
 *   gateway_stale_cache_max_age_seconds                       gauge
 *   gateway_connections, gateway_connections_max              gauges
 *   gateway_accept_pauses_total{reason}                       counter
 *
 * (docs/gateway.md, "Stale reads": an answer served from the stale cache
 * for an upstream that was unavailable; a miss is such a failure with no
 * usable answer stored, answered as the failure it was. The cache series
 * appear only with GATEWAY_STALE_READS on.)
 *
 * route is the matched template ("/v1/products/{id}") or "unmatched";
 * method one of GET POST PUT DELETE PATCH HEAD OPTIONS OTHER; code the HTTP
 * status (the ones the gateway sends, else "other"). Cardinality is fixed
 * by the route table, so memory is allocated once.
 *
 * Thread-safety: every function may be called from any thread at once
 * (relaxed atomic counters; a rendering is exact per counter, not a
 * snapshot of one instant).
 */
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stale_cache.h"
#include "svc/core.h"

typedef struct gw_metrics gw_metrics_t;

/* Route index meaning "no route matched" (404, 405, 400 bad path, 413 ...). */
#define GW_METRICS_UNMATCHED SIZE_MAX

/* labels: n_routes route labels (borrowed, must outlive the metrics).
 * *out owned by caller (gw_metrics_free). SVC_ENOMEM. */
svc_err_t gw_metrics_new(const char *const *labels, size_t n_routes, gw_metrics_t **out);
void gw_metrics_free(gw_metrics_t *m); /* NULL-safe */

/* A request started (in-flight + 1). */
void gw_metrics_begin(gw_metrics_t *m);
/* A request was answered (in-flight - 1): counts it and its duration. */
void gw_metrics_end(gw_metrics_t *m, size_t route, const char *method, size_t method_len,
                    int status, uint64_t duration_ns);

/* An availability failure of route was answered from the stale cache
 * (served) or found nothing usable there (!served). */
void gw_metrics_stale(gw_metrics_t *m, size_t route, bool served);

/* Why a loop stopped watching its listener for 100 ms (server.c). */
typedef enum gw_pause_reason {
    GW_PAUSE_CONNECTION_LIMIT, /* GATEWAY_MAX_CONNECTIONS open */
    GW_PAUSE_DESCRIPTORS,      /* accept() failed: EMFILE, ENFILE, ENOMEM */
    GW_PAUSE__COUNT
} gw_pause_reason_t;

/* A loop paused accepting for 100 ms. */
void gw_metrics_accept_paused(gw_metrics_t *m, gw_pause_reason_t why);

/* The client connections, as the server counts them. */
typedef struct gw_conn_stats {
    size_t open, max;
} gw_conn_stats_t;

/* Appends the text to *buf (a malloc'd buffer of *len bytes, NUL-terminated;
 * *buf may start NULL), growing it; with the stale cache's figures when
 * cache is not NULL, the connections' when conns is not NULL. SVC_ENOMEM
 * (the buffer is left valid). */
svc_err_t gw_metrics_render(const gw_metrics_t *m, const gw_cache_stats_t *cache,
                            const gw_conn_stats_t *conns, char **buf, size_t *len);

#endif
