/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.h - the server's per-method call counters and latency histograms,
 * behind rpc_server_metrics_render.
 *
 * One shard per thread that serves calls (each worker, and the built-in
 * services' thread): a thread bumps only its own shard with relaxed atomic
 * adds, so counting costs no lock and no shared cache line; the renderer
 * sums the shards. Methods are the table's, then the built-in ones, then
 * one "unknown" row for paths in neither (bounded cardinality).
 */
#ifndef RPC_STATS_H
#define RPC_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "svc/core.h"

typedef struct rpc__stats rpc__stats_t;

typedef struct rpc__stats_method {
    const char *path; /* "/pkg.Service/Method", borrowed */
    const char *type; /* "unary", "server_stream" or "bidi_stream" */
} rpc__stats_method_t;

/* n methods (borrowed) plus the unknown row, for n_shards threads. NULL
 * when out of memory. */
rpc__stats_t *rpc__stats_new(const rpc__stats_method_t *methods, size_t n, size_t n_shards);
void rpc__stats_free(rpc__stats_t *st);
/* The row of paths in none of the methods. */
size_t rpc__stats_unknown(const rpc__stats_t *st);
void rpc__stats_started(rpc__stats_t *st, size_t shard, size_t method);
void rpc__stats_handled(rpc__stats_t *st, size_t shard, size_t method, int grpc_code, uint64_t ns);
/* The page (rpc_server_metrics_render's contract). */
void rpc__stats_render(const rpc__stats_t *st, long in_flight, svc_text_t *out);

#endif
