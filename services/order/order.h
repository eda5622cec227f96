/* SPDX-License-Identifier: Apache-2.0 */
/*
 * order.h - what the order service's files share: the method tables, the
 * application and worker state, and the runner.
 */
#ifndef ORD_ORDER_H
#define ORD_ORDER_H

#include "config.h"
#include "rpc/rpc.h"
#include "rs/grpc.h"

struct db_conn; /* ord_store_t, see store.h */

/* Shared by every call (rpc_ctx_app). Borrowed; outlives the server. */
typedef struct ord_app {
    const ord_config_t *cfg;
    rs_grpc_client_t *catalog; /* one client for all workers: it is thread-safe */
} ord_app_t;

/* One per worker thread (rpc_ctx_worker); only that thread touches it. */
typedef struct ord_worker {
    struct db_conn *store; /* the worker's database connection */
    uint64_t creates;      /* CreateOrder calls served: paces key expiry */
} ord_worker_t;

/* rpc.c: the OrderService methods. Needs an ord_app_t and ord_worker_t. */
extern const rpc_method_t ord_methods[];
extern const size_t ord_methods_count;

/* rpc.c: OrderService's rows for a client's pkg/resilience method table
 * (the gateway's): CreateOrder RS_NOT_IDEMPOTENT (never retried by the
 * system; clients retry safely with an idempotency key), GetOrder
 * RS_IDEMPOTENT. */
extern const rs_method_t ord_client_methods[];
extern const size_t ord_client_methods_count;

/* rpc.c: deletes expired idempotency keys, up to max_batches batches of
 * 1000, and logs what it did. Failures are logged, not returned: expiry is
 * housekeeping and must never fail a call. */
void ord_keys_expire(struct db_conn *st, const ord_config_t *cfg, uint64_t deadline_ns,
                     int max_batches);

/* server.c: migrates, serves until SIGTERM/SIGINT, drains. `catalog` is
 * borrowed. Returns the process exit status. */
int ord_server_run(const ord_config_t *cfg, rs_grpc_client_t *catalog);

#endif
