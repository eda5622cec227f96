/* SPDX-License-Identifier: Apache-2.0 */
/* stats.c - per-method counters and their Prometheus text (see stats.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

#define N_CODES  17                  /* gRPC status codes 0..16 */
#define N_BOUNDS SVC_LATENCY_BUCKETS /* svc/core.h: the same as every other histogram */

static const char *const code_names[N_CODES] = {
    "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
    "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
    "DataLoss", "Unauthenticated"};

typedef struct cell {
    _Atomic uint64_t started;
    _Atomic uint64_t handled[N_CODES];
    _Atomic uint64_t bucket[N_BOUNDS + 1]; /* not cumulative; the last is +Inf */
    _Atomic uint64_t sum_ns;
} cell_t;

struct rpc__stats {
    const rpc__stats_method_t *methods;
    size_t n_rows, n_shards; /* rows = methods + unknown */
    cell_t cells[];          /* [shard][row] */
};

rpc__stats_t *rpc__stats_new(const rpc__stats_method_t *methods, size_t n, size_t n_shards)
{
    rpc__stats_t *st = calloc(1, sizeof *st + (n + 1) * n_shards * sizeof(cell_t));

    if (st == NULL)
        return NULL;
    st->methods = methods;
    st->n_rows = n + 1;
    st->n_shards = n_shards;
    return st;
}

void rpc__stats_free(rpc__stats_t *st)
{
    free(st);
}

size_t rpc__stats_unknown(const rpc__stats_t *st)
{
    return st->n_rows - 1;
}

static cell_t *cell(rpc__stats_t *st, size_t shard, size_t row)
{
    return &st->cells[shard * st->n_rows + row];
}

void rpc__stats_started(rpc__stats_t *st, size_t shard, size_t method)
{
    atomic_fetch_add_explicit(&cell(st, shard, method)->started, 1, memory_order_relaxed);
}

void rpc__stats_handled(rpc__stats_t *st, size_t shard, size_t method, int grpc_code, uint64_t ns)
{
    cell_t *c = cell(st, shard, method);

    if (grpc_code < 0 || grpc_code >= N_CODES)
        grpc_code = 2; /* UNKNOWN */
    atomic_fetch_add_explicit(&c->handled[grpc_code], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->bucket[svc_latency_bucket(ns)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->sum_ns, ns, memory_order_relaxed);
}

/* ---- rendering ----------------------------------------------------------- */

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* One row summed over the shards. */
static void sum_row(const rpc__stats_t *st, size_t row, cell_t *out)
{
    memset(out, 0, sizeof *out);
    for (size_t sh = 0; sh < st->n_shards; sh++) {
        const cell_t *c = &st->cells[sh * st->n_rows + row];
        out->started += LOAD(c->started);
        out->sum_ns += LOAD(c->sum_ns);
        for (int k = 0; k < N_CODES; k++)
            out->handled[k] += LOAD(c->handled[k]);
        for (int b = 0; b <= N_BOUNDS; b++)
            out->bucket[b] += LOAD(c->bucket[b]);
    }
}

/* grpc_type, grpc_service and grpc_method of a row, as label text. */
static void row_labels(const rpc__stats_t *st, size_t row, char *buf, size_t cap)
{
    const char *path = row + 1 < st->n_rows ? st->methods[row].path : "/unknown/unknown";
    const char *type = row + 1 < st->n_rows ? st->methods[row].type : "unary";
    const char *slash = strrchr(path, '/');
    int svc_len = slash != NULL && slash > path ? (int)(slash - path - 1) : 0;

    snprintf(buf, cap, "grpc_type=\"%s\",grpc_service=\"%.*s\",grpc_method=\"%s\"", type, svc_len,
             path + 1, slash != NULL ? slash + 1 : path);
}

static void family(svc_text_t *o, const char *name, const char *type, const char *help)
{
    svc_text_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A row of the unknown method is shown once something arrived there; the
 * others always, so rate() works from the first scrape. */
static bool row_shown(const rpc__stats_t *st, size_t row, const cell_t *c)
{
    return row + 1 < st->n_rows || c->started > 0;
}

static void put_counts(const rpc__stats_t *st, svc_text_t *o, bool handled)
{
    char labels[320];
    cell_t c;

    for (size_t r = 0; r < st->n_rows; r++) {
        sum_row(st, r, &c);
        if (!row_shown(st, r, &c))
            continue;
        row_labels(st, r, labels, sizeof labels);
        if (!handled) {
            svc_text_printf(o, "grpc_server_started_total{%s} %llu\n", labels,
                            (unsigned long long)c.started);
            continue;
        }
        for (int k = 0; k < N_CODES; k++)
            if (k == 0 || c.handled[k] > 0) /* OK always; other codes once seen */
                svc_text_printf(o, "grpc_server_handled_total{%s,grpc_code=\"%s\"} %llu\n", labels,
                                code_names[k], (unsigned long long)c.handled[k]);
    }
}

static void put_histograms(const rpc__stats_t *st, svc_text_t *o)
{
    char labels[320];
    cell_t c;

    for (size_t r = 0; r < st->n_rows; r++) {
        uint64_t cum = 0;

        sum_row(st, r, &c);
        if (!row_shown(st, r, &c))
            continue;
        row_labels(st, r, labels, sizeof labels);
        for (int b = 0; b <= N_BOUNDS; b++) {
            cum += c.bucket[b];
            svc_text_printf(o, "grpc_server_handling_seconds_bucket{%s,le=\"%s\"} %llu\n", labels,
                            b < N_BOUNDS ? svc_latency_le[b] : "+Inf", (unsigned long long)cum);
        }
        svc_text_printf(o, "grpc_server_handling_seconds_sum{%s} %.6f\n", labels,
                        (double)c.sum_ns / 1e9);
        svc_text_printf(o, "grpc_server_handling_seconds_count{%s} %llu\n", labels,
                        (unsigned long long)cum);
    }
}

void rpc__stats_render(const rpc__stats_t *st, long in_flight, svc_text_t *o)
{
    family(o, "grpc_server_started_total", "counter", "RPCs that arrived, by method.");
    put_counts(st, o, false);
    family(o, "grpc_server_handled_total", "counter",
           "RPCs completed, by method and gRPC status code.");
    put_counts(st, o, true);
    family(o, "grpc_server_handling_seconds", "histogram",
           "From arrival to the last byte of the reply (a stream: to its end).");
    put_histograms(st, o);
    family(o, "shopmicro_rpc_server_in_flight", "gauge",
           "Calls on the workers now (built-in streams not counted).");
    svc_text_printf(o, "shopmicro_rpc_server_in_flight %ld\n", in_flight);
}
