/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ops/ops.h - the operational surface of a gRPC service, one implementation
 * for all (catalog, order, and any service added later):
 *
 *   admin port  GET /healthz  the process lives (pkg/admin)
 *               GET /readyz   it can do its job: the database answers, not
 *                             every upstream's breaker is open, and the
 *                             service's own check (a saga consumer) holds;
 *                             JSON that names what is wrong
 *               GET /metrics  the server's RPC metrics (pkg/rpc), each
 *                             upstream's resilience metrics (pkg/resilience),
 *                             the database probe, and the service's own page
 *               GET /debug/resilience.json
 *                             the live resilience page's feed of this
 *                             process's upstreams (rs_snapshot_json), with
 *                             Access-Control-Allow-Origin: * so that the
 *                             gateway's page may poll it
 *               /debug/...    any other debug path: the service's own
 *                             callback (catalog's fault knobs), else 404
 *   gRPC        grpc.health.v1.Health: SERVING while the database answers
 *               (ops_health is the server's rpc_health_fn). Not the other
 *               checks: with an upstream's breaker open its calls already
 *               fail in microseconds with a clear status, and a stalled saga
 *               consumer stops no RPC; taking the instance out of rotation
 *               for either would also fail the calls that still work.
 *
 * Threads: the admin thread and pkg/rpc's built-in thread both ask; what
 * they read is thread-safe (atomics, the probe's mutex), and the service's
 * callbacks must be too (admin/admin.h says the same).
 */
#ifndef OPS_OPS_H
#define OPS_OPS_H

#include "admin/admin.h"
#include "db/db.h"
#include "rpc/rpc.h"
#include "rs/resilience.h"

/* The service's own readiness check: fills c (name, ok, detail). */
typedef void (*ops_check_fn)(void *ctx, admin_check_t *c);

typedef struct ops_opts {
    const char *service;             /* "catalog": log module, probe's application_name */
    const char *admin_listen;        /* "host:port", or "none"                        */
    const char *db_dsn;              /* probed by /readyz and gRPC health; NULL: none  */
    rs_upstream_t *const *upstreams; /* borrowed; metrics and readiness            */
    size_t n_upstreams;
    admin_metrics_fn metrics; /* the service's own page; NULL: none            */
    ops_check_fn check;       /* the service's own check; NULL: none           */
    void *ctx;                /* for metrics and check                         */
    admin_debug_fn debug;     /* /debug routes (admin.h) other than the feed;
                                 NULL: none                                    */
    void *debug_ctx;
} ops_opts_t;

/* The feed's path on the admin port (docs/resilience.md, "The live page"). */
#define OPS_RESILIENCE_FEED "/debug/resilience.json"

typedef struct ops ops_t;

/* Copies o (strings included); connects nothing yet. *out owned by caller. */
svc_err_t ops_new(const ops_opts_t *o, ops_t **out, char errbuf[static SVC_ERRBUF_LEN]);
/* Sets the rpc server's health callback to ops_health with ctx ops. */
void ops_rpc_opts(ops_t *ops, rpc_server_opts_t *ro);
/* The server whose metrics /metrics shows (after rpc_server_new). */
void ops_set_server(ops_t *ops, const rpc_server_t *srv);
/* Binds the admin port and starts its thread (a port in use is an error). */
svc_err_t ops_start(ops_t *ops, char errbuf[static SVC_ERRBUF_LEN]);
/* rpc_health_fn: the database answers (why says what is wrong). ctx is the
 * ops_t. */
bool ops_health(void *ctx, char *why, size_t cap);
/* Stops the admin port first (its callbacks read the rest), then frees.
 * NULL-safe. */
void ops_free(ops_t *ops);

#endif
