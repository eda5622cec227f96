/* SPDX-License-Identifier: Apache-2.0 */
/*
 * builtin.h - the built-in services of every server (health, reflection; see
 * "Built-in services" in rpc/rpc.h), served on a thread of their own.
 *
 * Their methods are registered with gRPC (grpc_server_register_method), so
 * their calls arrive only on this thread's queue: the workers, which ask for
 * unregistered calls, never see them, and a stream that lasts minutes holds
 * no worker. The thread owns every call object; nothing else touches them.
 */
#ifndef RPC_BUILTIN_H
#define RPC_BUILTIN_H

#include <stdatomic.h>

#include "internal.h"
#include "stats.h"

typedef struct rpc__builtin rpc__builtin_t;

/* The method rows the built-ins add to the stats table, in this order. */
enum { RPC__BUILTIN_CHECK, RPC__BUILTIN_WATCH, RPC__BUILTIN_REFLECT, RPC__BUILTIN_COUNT };
extern const rpc__stats_method_t rpc__builtin_methods[RPC__BUILTIN_COUNT];

typedef struct rpc__builtin_opts {
    grpc_server *server;         /* not started yet                                */
    const rpc_server_opts_t *o;  /* health, descriptor_set                        */
    const rpc_method_t *methods; /* the table: its services are the health names */
    size_t n_methods;
    rpc__stats_t *stats; /* rows: RPC__BUILTIN_* at first_row               */
    size_t shard, first_row;
    const atomic_bool *stopping; /* the server's: set when shutdown begins        */
    const char *mod;             /* log module                                      */
} rpc__builtin_opts_t;

/* Registers the methods and the thread's queue on the server (before
 * grpc_server_start). Nothing runs yet. */
svc_err_t rpc__builtin_new(const rpc__builtin_opts_t *bo, rpc__builtin_t **out,
                           char errbuf[static SVC_ERRBUF_LEN]);
/* After grpc_server_start: asks for the first calls and starts the thread. */
svc_err_t rpc__builtin_start(rpc__builtin_t *b, char errbuf[static SVC_ERRBUF_LEN]);
/* After grpc_server_shutdown_and_notify (stopping set): the thread ends its
 * streams (watchers see NOT_SERVING first), then exits; this joins it. */
void rpc__builtin_join(rpc__builtin_t *b);
/* NULL-safe; joined or never started. */
void rpc__builtin_free(rpc__builtin_t *b);

/* ---- health (health.c): the status a name has now ---------------------- */

typedef struct rpc__health rpc__health_t;
/* names: the services that answer (borrowed). */
rpc__health_t *rpc__health_new(rpc_health_fn fn, void *ctx, const char *const *names,
                               size_t n_names, const char *mod);
void rpc__health_free(rpc__health_t *h);
/* HealthCheckResponse.ServingStatus of service now (SERVICE_UNKNOWN for a
 * name not served). Asks the callback when its answer is older than
 * max_age_ns (0: always); logs each change of the server's status once. */
int rpc__health_status(rpc__health_t *h, const char *service, bool stopping, uint64_t max_age_ns);

#endif
