/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rs/grpc.h - the gRPC binding of pkg/resilience: the system's "DialOptions".
 *
 * One call, rs_grpc_client_new(), makes a guarded client for a target: a
 * channel with the settings that make recovery fast, plus an rs_upstream_t
 * (breaker, retry budget, bulkhead, metrics). Every gRPC call any service
 * makes goes through one of these, so every call gets
 *
 *     bulkhead -> breaker -> retry -> per-attempt timeout -> gRPC
 *
 * without the caller writing a loop. Two ways to call:
 *
 *   rs_grpc_call()        blocking, for worker threads (order's handlers);
 *                         with a parent server call, its deadline and
 *                         cancellation propagate to every attempt.
 *   rs_grpc_call_async()  non-blocking, for event loops (the gateway): the
 *                         result arrives in a callback on the client's own
 *                         thread, and the caller hands it to its loop.
 *
 * Threads: the clients of a process share one thread (started by the first
 * client, stopped with the last) and its completion queue, which (a)
 * completes async attempts, (b) fires backoff timers of async calls, and (c)
 * keeps a connectivity watch on each client's channel. One thread, not one
 * per client: with gRPC's epoll1 engine each thread waiting on a queue takes
 * the poller role from the others in turn, a futex wake-up and two context
 * switches per wake-up (docs/bench/history.md, "Issue 17: the GET path").
 * (c) is what makes a restarted dependency usable within ~1 s: gRPC C core
 * 1.51 only processes a reconnect when some thread polls, and fail-fast
 * calls never do (platform notes §3: ~10 s with default settings).
 *
 * The core (rs/resilience.h) has no gRPC in it; this binding is its own
 * library (svc_resilience_grpc) so that an HTTP-only program never links gRPC.
 */
#ifndef RS_GRPC_H
#define RS_GRPC_H

#include "rpc/rpc.h"
#include "rs/resilience.h"

typedef struct rs_grpc_client rs_grpc_client_t;

#define RS_GRPC_DEFAULT_WATCH_MS 1000 /* connectivity re-check period */
#define RS_GRPC_MAX_CHANNELS     16

/*
 * channels: how many channels (each its own HTTP/2 connection) the client
 * keeps to the target, all behind its one upstream: one breaker, one retry
 * budget, one bulkhead and one set of metrics whichever carries a call. A
 * call picks one with rs_grpc_call_opts_t.lane. Why more than one: every
 * call on a connection goes through that connection's gRPC combiner, so
 * threads that call at once (the gateway's loops) queue for it and hand
 * its work to gRPC's executor; with a connection per calling thread they
 * do not (the gateway's GET: docs/bench/history.md, "A connection per loop").
 */
typedef struct rs_grpc_opts {
    const char *target;          /* "127.0.0.1:25051"; copied */
    rs_upstream_opts_t upstream; /* name, policy, method table, breaker, ... */
    rpc_channel_opts_t channel;  /* reconnect backoff: 100 ms .. 500 ms by default */
    int watch_ms;                /* RS_GRPC_DEFAULT_WATCH_MS; 0 = no watcher */
    int channels;                /* 1 (default) .. RS_GRPC_MAX_CHANNELS */
} rs_grpc_opts_t;

/* Defaults everywhere; upstream.name and target must still be set. */
void rs_grpc_opts_init(rs_grpc_opts_t *o);

/* Creates the channel, the upstream and the client thread. *out is owned by
 * caller. SVC_EINVAL (bad options, named in errbuf) or SVC_ENOMEM. */
svc_err_t rs_grpc_client_new(const rs_grpc_opts_t *o, rs_grpc_client_t **out,
                             char errbuf[static SVC_ERRBUF_LEN]);
/* Stops the thread and closes the channel. Every async call must have
 * completed (its done callback returned). A breaker trial whose caller
 * cancelled it may still be on the wire: the client waits for it (at most
 * its attempt deadline). NULL-safe. */
void rs_grpc_client_free(rs_grpc_client_t *cl);

/* The client's upstream: breaker state, Retry-After, metrics. Borrowed. */
rs_upstream_t *rs_grpc_client_upstream(rs_grpc_client_t *cl);
/* The channels' connectivity, for readiness checks: "idle", "connecting",
 * "ready", "transient-failure" or "shutdown": "ready" when every channel
 * is, else the state of the first one that is not. */
const char *rs_grpc_client_connectivity(rs_grpc_client_t *cl);

#define RS_GRPC_MAX_MD 15 /* metadata entries a caller may send; more is SVC_EINVAL */

typedef struct rs_grpc_call_opts {
    uint64_t deadline_ns; /* overall, all attempts included; SVC_DEADLINE_NONE */
    rpc_ctx_t *parent;    /* blocking calls only: propagate from this server call */
    const rpc_md_t *md;   /* borrowed during the call; copied by the async call;
                             at most RS_GRPC_MAX_MD entries */
    size_t n_md;
    unsigned lane; /* the channel: lane % channels (0 with one channel) */
} rs_grpc_call_opts_t;

typedef struct rs_grpc_result {
    svc_err_t err;                /* what the caller should answer with       */
    char message[SVC_ERRBUF_LEN]; /* the last real status message, or "circuit open" ... */
    rs_reason_t reason;           /* why the call ended                       */
    uint32_t attempts;            /* attempts made (0: rejected at admission) */
    uint32_t retry_after_ms;      /* when to come back: breaker-open (>= 1) / bulkhead-full,
                                     or a failed call's last grpc-retry-pushback-ms; 0: no hint */
    rpc_status_details_t details; /* the google.rpc.Status that came with message (rpc.h,
                                     "Error details"); len 0: none, or message is ours */
    rpc_header_md_t headers;      /* the last attempt's reply header metadata (n 0: none) */
} rs_grpc_result_t;

/*
 * A blocking call through the chain. On SVC_OK *resp is owned by caller
 * (protobuf_c_message_free_unpacked(*resp, NULL)); otherwise NULL. `method`
 * is the full path and selects the policy row. Returns res->err.
 */
svc_err_t rs_grpc_call(rs_grpc_client_t *cl, const char *method, const ProtobufCMessage *req,
                       const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                       const rs_grpc_call_opts_t *o, rs_grpc_result_t *res);

typedef struct rs_grpc_async rs_grpc_async_t;

/*
 * Called once per accepted async call, when the call is over for its
 * caller: on the clients' thread, or - when rs_grpc_cancel() answers the
 * call - on the cancelling thread, before rs_grpc_cancel() returns (so the
 * caller must not hold, around rs_grpc_cancel(), a lock that done takes).
 * resp (SVC_OK only) is owned by the callee; res is borrowed. It must not
 * block: copy what it needs and hand off to its own thread.
 */
typedef void (*rs_grpc_done_fn)(void *arg, const rs_grpc_result_t *res, ProtobufCMessage *resp);

/*
 * Starts a non-blocking call. `method` and `resp_desc` are borrowed and must
 * outlive the client (use the static path strings): a cancelled breaker
 * trial runs on after done. The request is packed before the function
 * returns, so req is borrowed only during the call.
 *
 * Returns SVC_OK: done will run exactly once. If handle is not NULL, *handle
 * is a reference owned by caller, to be given back exactly once with
 * rs_grpc_cancel() or rs_grpc_release() - before or after done ran, from any
 * thread: the handle stays valid until both sides are through with it.
 * Any other return (breaker open, bulkhead full, out of memory): done will
 * NOT run, no handle is made, and res says why, so the caller can answer at
 * once (a breaker-open rejection costs microseconds).
 */
svc_err_t rs_grpc_call_async(rs_grpc_client_t *cl, const char *method, const ProtobufCMessage *req,
                             const ProtobufCMessageDescriptor *resp_desc,
                             const rs_grpc_call_opts_t *o, rs_grpc_done_fn done, void *arg,
                             rs_grpc_async_t **handle, rs_grpc_result_t *res);

/*
 * The caller has gone away: done runs now with SVC_ECANCELLED, reason
 * cancelled (unless it has already run, or is running on the client thread),
 * no retry follows, and the caller's reference is released. The attempt on
 * the wire is cancelled - except a breaker trial, which runs on to its
 * verdict so that the breaker learns whether the upstream is back (see
 * rs_call_is_trial()); only the breaker hears how it ended. A call waiting
 * out a backoff is answered at once and ends without another attempt.
 */
void rs_grpc_cancel(rs_grpc_async_t *h);
/* Releases the caller's reference without cancelling. */
void rs_grpc_release(rs_grpc_async_t *h);

#endif /* RS_GRPC_H */
