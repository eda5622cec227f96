/* SPDX-License-Identifier: Apache-2.0 */
/* async.h - what the binding's files share (not installed). */
#ifndef RS_GRPC_ASYNC_H
#define RS_GRPC_ASYNC_H

#include <pthread.h>
#include <stdatomic.h>

#include "rs/grpc.h"

#define RS_GRPC_BULKHEAD_RETRY_AFTER_MS 1000 /* "come back soon" for a full bulkhead */
#define RS__GRPC_LOG_MODULE             "resilience"

/* The driver's completion-queue tags: an async call (rs_grpc_async_t *) for
 * an attempt, or a lane's address with this bit set for its watch. The
 * kind is in the pointer, not behind it: nothing is read before the locks
 * that order the threads are taken (gRPC's queue is no ordering that
 * ThreadSanitizer can see). */
#define RS__WATCH_TAG_BIT ((uintptr_t)1)

typedef struct rs__driver rs__driver_t; /* client.c: the process's one client thread */

/* One channel of a client (rs_grpc_opts_t.channels). */
typedef struct rs__lane {
    rs_grpc_client_t *cl;
    grpc_channel *ch;
    atomic_int connectivity; /* grpc_connectivity_state, for readiness */
} rs__lane_t;

struct rs_grpc_client {
    rs__lane_t lane[RS_GRPC_MAX_CHANNELS];
    int n_lanes;
    rs_upstream_t *up;
    rs__driver_t *driver;
    grpc_completion_queue *cq; /* the driver's, shared by every client */
    int watch_ms;
    pthread_mutex_t mu;  /* guards stopping and on_cq */
    pthread_cond_t idle; /* on_cq reached 0 while stopping */
    bool stopping;
    int on_cq;              /* completions still to come: attempts and the watch */
    rs_grpc_client_t *next; /* the driver's list */

    /* Backoff timers of async calls: a binary min-heap on due time. Only
     * the driver thread touches it (retries are decided there), and free
     * once the client is off the driver's list, so it needs no lock. */
    rs_grpc_async_t **heap;
    size_t n_heap, cap_heap;
};

/* client.c */
/* The channel a call with these options uses. */
grpc_channel *rs__channel(const rs_grpc_client_t *cl, const rs_grpc_call_opts_t *o);
/* The caller's result of a finished call r, from its last attempt's message,
 * status details and header metadata (none of them NULL). */
void rs__result_fill(rs_grpc_client_t *cl, const rs_result_t *r, const char *last_message,
                     const rpc_status_details_t *last_details, const rpc_header_md_t *last_headers,
                     rs_grpc_result_t *res);
/* A CANCELLED the caller did not ask for is UNAVAILABLE (see client.c). */
svc_err_t rs__server_cancel_is_unavailable(svc_err_t err);
/* Copies o->md into md (RS_GRPC_MAX_MD + 1 entries) and adds
 * grpc-previous-rpc-attempts on retries; num holds its text (12 bytes). */
size_t rs__md_with_attempt(const rs_grpc_call_opts_t *o, uint32_t attempt, char *num, rpc_md_t *md);

/* A completion of cl is expected (before starting what will complete) /
 * has been handled; false once cl is stopping (then nothing is started). */
bool rs__on_cq_add(rs_grpc_client_t *cl);
void rs__on_cq_done(rs_grpc_client_t *cl);

/* async.c, driver thread only */
void rs__async_attempt_done(rs_grpc_async_t *a);
gpr_timespec rs__timers_next_deadline(rs_grpc_client_t *cl);
void rs__timers_fire(rs_grpc_client_t *cl);
void rs__timers_dispose(rs_grpc_client_t *cl);

#endif
