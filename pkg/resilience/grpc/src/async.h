/* SPDX-License-Identifier: Apache-2.0 */
/* async.h - what the binding's files share (not installed). */
#ifndef RS_GRPC_ASYNC_H
#define RS_GRPC_ASYNC_H

#include <pthread.h>
#include <stdatomic.h>

#include "rs/grpc.h"

#define RS_GRPC_BULKHEAD_RETRY_AFTER_MS 1000 /* "come back soon" for a full bulkhead */
#define RS__GRPC_LOG_MODULE "resilience"

struct rs_grpc_client {
    grpc_channel *ch;
    rs_upstream_t *up;
    grpc_completion_queue *cq;
    pthread_t thread;
    bool thread_started;
    int watch_ms;
    int watch_tag;            /* its address tags the connectivity watch */
    atomic_int connectivity;  /* grpc_connectivity_state, for readiness */
    pthread_mutex_t mu;       /* guards stopping against the watch re-arm */
    bool stopping;

    /* Backoff timers of async calls: a binary min-heap on due time. Only
     * the client thread touches it (retries are decided there), so it needs
     * no lock. */
    rs_grpc_async_t **heap;
    size_t n_heap, cap_heap;
};

/* client.c */
void rs__result_fill(rs_grpc_client_t *cl, const rs_result_t *r, const char *last_message,
                     rs_grpc_result_t *res);
/* A CANCELLED the caller did not ask for is UNAVAILABLE (see client.c). */
svc_err_t rs__server_cancel_is_unavailable(svc_err_t err);
/* Copies o->md into md (RS_GRPC_MAX_MD + 1 entries) and adds
 * grpc-previous-rpc-attempts on retries; num holds its text (12 bytes). */
size_t rs__md_with_attempt(const rs_grpc_call_opts_t *o, uint32_t attempt, char *num,
                           rpc_md_t *md);

/* async.c, client thread only */
void rs__async_attempt_done(void *tag);
gpr_timespec rs__timers_next_deadline(rs_grpc_client_t *cl);
void rs__timers_fire(rs_grpc_client_t *cl);
void rs__timers_dispose(rs_grpc_client_t *cl);

#endif
