/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpc/rpc.h - gRPC C core for ShopMicro: a server driven by a method table,
 * and a blocking unary client call. protobuf-c messages in and out.
 *
 * Server threading: N worker threads, each with its own completion queue.
 * A worker takes one call at a time, and only an idle worker is offered a
 * new one, so a slow call never holds up another. A call lives on one
 * worker from arrival to the last byte of the reply, so a handler may use
 * per-worker state (a database connection) without locks. Handlers run on
 * the worker and may block (SQL, outgoing calls).
 *
 * What the dispatcher does once, so a handler is business logic only:
 * decode the request, refuse work whose deadline already passed, run the
 * handler, map svc_err_t to a gRPC status, encode the reply, write one
 * access-log line, and free everything the call allocated.
 */
#ifndef RPC_RPC_H
#define RPC_RPC_H

#include <string.h>

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include "svc/core.h"

/* ------------------------------------------------------------------------
 * Process set-up
 * ------------------------------------------------------------------------ */

/* Call first in main(), before any thread exists: blocks SIGTERM/SIGINT in
 * the calling thread (every thread created later inherits the mask, so only
 * rpc_server_run receives them), ignores SIGPIPE, turns off abseil's mutex
 * deadlock detection (a debugging aid Debian's abseil leaves on; 2-5 % of a
 * gRPC process's CPU, src/absl_quiet.cc) and calls grpc_init(). */
void rpc_init(void);
/* Pairs with rpc_init(): grpc_shutdown(). */
void rpc_shutdown(void);

/* ------------------------------------------------------------------------
 * Server
 * ------------------------------------------------------------------------ */

typedef struct rpc_server rpc_server_t;
/* One incoming call, as seen by its handler. Valid until the handler returns. */
typedef struct rpc_ctx rpc_ctx_t;

/*
 * A handler. `req` is the decoded request (borrowed). On SVC_OK it sets
 * *resp to the reply, allocated with rpc_ctx_alloc() (or static); it is
 * encoded and freed by the dispatcher. On error it returns the code and may
 * write the status message into errbuf (SVC_ERRBUF_LEN bytes); an empty
 * errbuf sends svc_strerror(code).
 */
typedef svc_err_t (*rpc_handler_fn)(rpc_ctx_t *ctx, const ProtobufCMessage *req,
                                    ProtobufCMessage **resp, char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Built-in services. Besides its method table every server answers
 *   grpc.health.v1.Health/Check and /Watch (the standard health protocol:
 *     grpc_health_probe, Kubernetes gRPC probes, Envoy), for service "" and
 *     for each service of the table; another name is NOT_FOUND (Check) or
 *     SERVICE_UNKNOWN (Watch). Watch sends the status at once and again on
 *     every change (health is asked once a second while someone watches);
 *     from SIGTERM on every status is NOT_SERVING and watches end.
 *   grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo (when
 *     descriptor_set is set): list_services, file_by_filename and
 *     file_containing_symbol, so `grpcurl list` works without .proto files.
 * They run on a thread of their own, never on a worker, so a server whose
 * workers are all busy still answers its probes. At most
 * RPC_BUILTIN_MAX_CALLS of their calls at once; more get RESOURCE_EXHAUSTED.
 *
 * The health callback runs on that thread: it may block briefly (a database
 * ping with a short timeout) but holds up every other built-in call while it
 * does. true = SERVING; why (cap bytes) may say what is wrong, for the log.
 */
#define RPC_BUILTIN_MAX_CALLS 32
typedef bool (*rpc_health_fn)(void *ctx, char *why, size_t cap);

typedef struct rpc_method {
    const char *path;                          /* "/pkg.Service/Method"             */
    const ProtobufCMessageDescriptor *request; /* decodes the request             */
    rpc_handler_fn handler;
} rpc_method_t;

#define RPC_DEFAULT_WORKERS     4
#define RPC_DEFAULT_DRAIN_MS    10000 /* in-flight time allowed on SIGTERM */
#define RPC_DEFAULT_MAX_MESSAGE (4 * 1024 * 1024)

typedef struct rpc_server_opts {
    const char *listen;     /* "host:port"; port 0 picks a free one (tests)    */
    int workers;            /* RPC_DEFAULT_WORKERS                              */
    int drain_ms;           /* RPC_DEFAULT_DRAIN_MS; then in-flight calls are cancelled */
    int max_message_bytes;  /* RPC_DEFAULT_MAX_MESSAGE, both directions         */
    const char *log_module; /* "rpc" when NULL; used for access-log lines       */
    void *app;              /* borrowed; handed to handlers (rpc_ctx_app)       */
    /* Per-worker state, created on the worker thread before it serves a call
     * and destroyed on it after the last (e.g. a database connection).
     * worker_init returning NULL stops start-up with an error. Optional. */
    void *(*worker_init)(int worker_index, void *app, char errbuf[static SVC_ERRBUF_LEN]);
    void (*worker_fini)(void *worker_state);
    /* grpc.health.v1.Health (Check, Watch): is the server able to do its job
     * now? NULL: SERVING whenever the server runs. See "Built-in services". */
    rpc_health_fn health;
    void *health_ctx; /* borrowed; passed to health                   */
    /* A serialized google.protobuf.FileDescriptorSet of the services served
     * (with imports; shopmicro/descriptors.h), for server reflection. Borrowed,
     * must outlive the server. NULL: no reflection service. */
    const unsigned char *descriptor_set;
    size_t descriptor_set_len;
    /* ErrorInfo.domain of every failed reply ("Error details"): who decided,
     * e.g. "catalog.shopmicro". NULL: "<log_module>.shopmicro". Borrowed. */
    const char *error_domain;
} rpc_server_opts_t;

void rpc_server_opts_init(rpc_server_opts_t *o);

/*
 * Creates the server and binds the port. SO_REUSEPORT is off, so a second
 * server on a busy port fails here with SVC_EUNAVAIL and "address in use"
 * in errbuf instead of silently sharing traffic. `methods` is borrowed and
 * must outlive the server. On success *out is owned by the caller.
 */
svc_err_t rpc_server_new(const rpc_server_opts_t *o, const rpc_method_t *methods, size_t n,
                         rpc_server_t **out, char errbuf[static SVC_ERRBUF_LEN]);
/* The bound port (useful with port 0). */
int rpc_server_port(const rpc_server_t *s);
/*
 * Starts the workers and serves until SIGTERM/SIGINT or rpc_server_stop().
 * Then: stop accepting, let in-flight calls finish (up to drain_ms, then
 * cancel them), stop the workers. Returns SVC_OK after a clean drain.
 */
svc_err_t rpc_server_run(rpc_server_t *s, char errbuf[static SVC_ERRBUF_LEN]);
/* Asks a running rpc_server_run to shut down. Thread-safe. */
void rpc_server_stop(rpc_server_t *s);
/* NULL-safe. The server must not be running. */
void rpc_server_free(rpc_server_t *s);

/*
 * The server's metrics in Prometheus text format (docs/operations.md lists
 * them; the names are go-grpc-prometheus's, so dashboards made for it work):
 * grpc_server_started_total, grpc_server_handled_total by grpc_code and
 * grpc_server_handling_seconds (histogram) by grpc_service and grpc_method,
 * and shopmicro_rpc_server_in_flight. Same contract as rs_metrics_render:
 * *len the full length, SVC_ERANGE when cut. Thread-safe, lock-free reads.
 */
svc_err_t rpc_server_metrics_render(const rpc_server_t *s, char *buf, size_t cap, size_t *len);

/* The call's deadline on the monotonic clock (ns); SVC_DEADLINE_NONE if none. */
uint64_t rpc_ctx_deadline(const rpc_ctx_t *c);
/* This worker's state from worker_init (NULL without one). */
void *rpc_ctx_worker(rpc_ctx_t *c);
void *rpc_ctx_app(rpc_ctx_t *c);
/* The first value of request metadata `key` (lower case), NUL-terminated,
 * valid until the handler returns; NULL when absent and also when the
 * call's arena is full; a value with a NUL byte inside is cut at it. Good
 * enough for a hint (x-request-id); a value that must be honoured exactly
 * or refused takes rpc_ctx_metadata_n. */
const char *rpc_ctx_metadata(rpc_ctx_t *c, const char *key);

/* How often a metadata key occurs, for callers that must tell "absent"
 * from "ambiguous": a key given twice cannot be honoured as one value. */
typedef enum rpc_md_presence {
    RPC_MD_ABSENT = 0, /* no entry                                            */
    RPC_MD_ONE,        /* exactly one entry                                   */
    RPC_MD_REPEATED,   /* two or more (HTTP/2 allows a key in several fields) */
} rpc_md_presence_t;

/*
 * Request metadata `key` (lower case) as received, without copying: sets
 * *value (borrowed, valid until the handler returns; NOT NUL-terminated,
 * may contain NUL bytes) and *len to the first entry's bytes unless
 * RPC_MD_ABSENT (then NULL and 0). Allocates nothing, so it cannot fail.
 */
rpc_md_presence_t rpc_ctx_metadata_n(rpc_ctx_t *c, const char *key, const char **value,
                                     size_t *len);
/* Per-call memory, freed after the reply is sent. NULL when the call's
 * arena limit (RPC_ARENA_MAX) is reached. Aligned for any type. */
#define RPC_ARENA_MAX (16 * 1024 * 1024)
void *rpc_ctx_alloc(rpc_ctx_t *c, size_t n);
char *rpc_ctx_strdup(rpc_ctx_t *c, const char *s);
/* The call's arena as an svc_alloc_t, for stores that build replies. */
svc_alloc_t rpc_ctx_allocator(rpc_ctx_t *c);
/* Says that the call is failing because a dependency of this service failed
 * (not this service itself): the reply carries trailer
 * RPC_DEPENDENCY_FAILURE_MD, so a guarded client counts it as "the server is
 * up" and does not retry what this service already retried. */
#define RPC_DEPENDENCY_FAILURE_MD "shopmicro-dependency-failure"
void rpc_ctx_mark_dependency_failure(rpc_ctx_t *c);
/* Says that the message the handler writes into errbuf is written for the
 * service's clients: the project's own words, no library text, address or
 * host name. Without it, a failure on the server's side (UNKNOWN,
 * DEADLINE_EXCEEDED, INTERNAL, UNAVAILABLE, DATA_LOSS) goes out with
 * svc_strerror()'s text ("database error", "dependency unavailable", ...)
 * and the handler's message only to the access line, under the call's
 * request id. Other codes are the handler's verdict on the request and go
 * out as written. */
void rpc_ctx_set_message_public(rpc_ctx_t *c);
/* Asks the client to wait ms before trying again (gRFC A6 trailer
 * grpc-retry-pushback-ms on a failed reply; pkg/resilience honours it when
 * it retries). Sent only when the handler returns an error; the last call
 * wins. A load-shedding server answers SVC_EEXHAUSTED with it. */
void rpc_ctx_set_pushback_ms(rpc_ctx_t *c, uint32_t ms);

/*
 * Error details. Every failed reply carries a google.rpc.Status
 * (proto/google/rpc) in trailer RPC_STATUS_DETAILS_MD, as gRPC's richer
 * error model has it, with the call's code and client message and:
 *   - ErrorInfo {reason, domain, metadata}: reason as the handler set it,
 *     else the code's name ("NOT_FOUND"); domain the server's error_domain;
 *   - RetryInfo {retry_delay}: when the handler asked for a pushback, the
 *     same wait;
 *   - BadRequest {field_violations: [{field, description}]}: on
 *     INVALID_ARGUMENT when the handler named the field; the description is
 *     the status message.
 * The reason is a string constant (borrowed for good); the other setters
 * copy their strings into the call's arena (a copy that does not fit is
 * dropped: the reply then says less, never something else). They matter
 * only when the handler returns an error.
 */
#define RPC_STATUS_DETAILS_MD "grpc-status-details-bin"
/* The type URL of a detail is this prefix and the message's full name. */
#define RPC_TYPE_URL_PREFIX "type.googleapis.com/"
/* How many ErrorInfo metadata entries a reply carries; more are dropped. */
#define RPC_ERROR_METADATA_MAX 4
/* reason: UPPER_SNAKE_CASE, at most 63 characters (AIP-193). */
void rpc_ctx_set_error_reason(rpc_ctx_t *c, const char *reason);
void rpc_ctx_add_error_metadata(rpc_ctx_t *c, const char *key, const char *value);
/* The request field an INVALID_ARGUMENT is about, as a path of proto field
 * names ("items[2].quantity"). */
void rpc_ctx_set_bad_field(rpc_ctx_t *c, const char *field);

/* Adds response header metadata key (lower case, not "grpc-...") with value
 * (printable ASCII) to the reply, whatever its status: what the client reads
 * before the message (a gateway in front shows it as Grpc-Metadata-<Key>).
 * Both copied into the call's arena; at most RPC_HEADER_MD_MAX entries, more
 * are dropped. */
#define RPC_HEADER_MD_MAX 4
void rpc_ctx_add_header_md(rpc_ctx_t *c, const char *key, const char *value);

/* The underlying server call, for deadline/cancellation propagation to
 * outgoing calls (rpc_call_opts_t.parent). Valid until the handler returns. */
grpc_call *rpc_ctx_call(rpc_ctx_t *c);

/* ------------------------------------------------------------------------
 * Client
 * ------------------------------------------------------------------------ */

/* A restarted dependency is retried at most this often apart (gRPC adds
 * +-20% jitter), so it is back in use within ~0.6 s of listening. */
#define RPC_DEFAULT_INITIAL_RECONNECT_MS 100
#define RPC_DEFAULT_MAX_RECONNECT_MS     500

typedef struct rpc_channel_opts {
    int initial_reconnect_ms; /* RPC_DEFAULT_INITIAL_RECONNECT_MS (gRPC default 1000) */
    int max_reconnect_ms;     /* RPC_DEFAULT_MAX_RECONNECT_MS (gRPC default 120000)   */
    int max_message_bytes;    /* RPC_DEFAULT_MAX_MESSAGE                              */
    /* false (default): channels to the same target with the same settings
     * share gRPC's global subchannel pool, so one TCP connection; true: this
     * channel makes connections of its own (rs/grpc.h, "channels"). */
    bool own_connections;
} rpc_channel_opts_t;

void rpc_channel_opts_init(rpc_channel_opts_t *o);
/* An insecure channel to `target` ("127.0.0.1:25051"). NULL opts: defaults.
 * Thread-safe to share; release with grpc_channel_destroy().
 * Replicas: a target of several addresses ("ipv4:127.0.0.1:25051,127.0.0.1:
 * 25061") or a DNS name that resolves to several ("dns:///catalog:25051",
 * a Kubernetes headless Service) spreads calls round robin over them, and
 * takes an address out while its server's grpc.health.v1 Watch says
 * NOT_SERVING (or it is down), until it says SERVING. */
grpc_channel *rpc_channel_new(const char *target, const rpc_channel_opts_t *o);

typedef struct rpc_md {
    const char *key; /* lower case, e.g. "x-request-id" */
    const char *value;
} rpc_md_t;

typedef struct rpc_call_opts {
    uint64_t deadline_ns; /* monotonic; SVC_DEADLINE_NONE: none (not advised) */
    rpc_ctx_t *parent;    /* propagate deadline and cancellation from it; NULL: none */
    const rpc_md_t *md;   /* borrowed */
    size_t n_md;
    bool wait_for_ready; /* queue while the channel connects, until the deadline */
} rpc_call_opts_t;

/* A packed google.rpc.Status from trailer RPC_STATUS_DETAILS_MD (len 0:
 * none, or one longer than RPC_STATUS_DETAILS_MAX, which is dropped; ours
 * are a few hundred bytes). Not decoded: who renders it decodes it. */
#define RPC_STATUS_DETAILS_MAX 2048
typedef struct rpc_status_details {
    size_t len;
    uint8_t bytes[RPC_STATUS_DETAILS_MAX];
} rpc_status_details_t;

/* *dst = *src, copying only the bytes in use (the buffer is 2 KiB). */
static inline void rpc_status_details_copy(rpc_status_details_t *dst,
                                           const rpc_status_details_t *src)
{
    dst->len = src->len;
    memcpy(dst->bytes, src->bytes, src->len);
}

/* A reply's header metadata, as received: the entries that fit, each key
 * and value NUL-terminated one after the other ("key\0value\0...").
 * gRPC's own (content-type, grpc-*) and binary ones (-bin) are not kept.
 * rpc_header_md_next walks it. */
#define RPC_HEADER_MD_BYTES 1024
typedef struct rpc_header_md {
    size_t n;   /* entries */
    size_t len; /* bytes used */
    char bytes[RPC_HEADER_MD_BYTES];
} rpc_header_md_t;

/* *dst = *src, copying only the bytes in use. */
static inline void rpc_header_md_copy(rpc_header_md_t *dst, const rpc_header_md_t *src)
{
    dst->n = src->n;
    dst->len = src->len;
    memcpy(dst->bytes, src->bytes, src->len);
}

/* The next entry of h from *pos (0 to begin): sets *key and *value (NUL-
 * terminated, borrowed from h) and advances *pos; false at the end. */
bool rpc_header_md_next(const rpc_header_md_t *h, size_t *pos, const char **key,
                        const char **value);

typedef struct rpc_result {
    svc_err_t err;                /* from the gRPC status                   */
    int grpc_status;              /* 0..16                                  */
    char message[SVC_ERRBUF_LEN]; /* the status message                     */
    bool dependency_failure;      /* the server marked it (RPC_DEPENDENCY_FAILURE_MD) */
    bool has_pushback;            /* a grpc-retry-pushback-ms trailer came back ... */
    char pushback[24];            /* ... with this raw value (pkg/resilience parses it) */
    rpc_status_details_t details; /* trailer RPC_STATUS_DETAILS_MD, as received */
    rpc_header_md_t headers;      /* the reply's header metadata, success or not */
    uint64_t elapsed_ns;
} rpc_result_t;

/*
 * A blocking unary call on the calling thread (one pluck queue per thread,
 * created on first use). On SVC_OK *resp is a new message owned by caller:
 * free with protobuf_c_message_free_unpacked(*resp, NULL). On error *resp
 * is NULL and `res` says why. Returns res->err.
 */
svc_err_t rpc_call_unary(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
                         const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                         const rpc_call_opts_t *o, rpc_result_t *res);

/* ------------------------------------------------------------------------
 * One unary call as a single batch, for callers that drive a completion
 * queue themselves (pkg/resilience's async binding, load generators).
 * rpc_call_unary is this plus a per-thread pluck queue.
 * ------------------------------------------------------------------------ */

#define RPC_UNARY_MAX_MD 16

typedef struct rpc_unary {
    grpc_call *call; /* valid from start until finish (for cancel) */
    /* private: the batch's buffers */
    grpc_metadata md[RPC_UNARY_MAX_MD];
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array initial_md, trailers;
    grpc_status_code status;
    grpc_slice details;
    const char *error_string;
    uint64_t started_ns;
} rpc_unary_t;

/*
 * Creates the call on cq and starts its six operations with `tag`; the
 * completion arrives on cq. Takes ownership of send (a packed request),
 * even on failure. md (at most RPC_UNARY_MAX_MD, more are an error) is
 * borrowed until the completion. parent NULL: none. Returns false when the
 * batch did not start; then everything is released and no completion comes.
 */
bool rpc_unary_start(rpc_unary_t *u, grpc_channel *ch, grpc_call *parent, grpc_completion_queue *cq,
                     const char *method, grpc_byte_buffer *send, const rpc_md_t *md, size_t n_md,
                     uint64_t deadline_ns, bool wait_for_ready, void *tag);
/*
 * After the completion: fills res (status, message, pushback, elapsed),
 * decodes the reply on OK (NULL and res->err = SVC_EINTERNAL if it does
 * not decode), and releases the call and every buffer. The reply is owned
 * by caller (protobuf_c_message_free_unpacked(m, NULL)).
 */
ProtobufCMessage *rpc_unary_finish(rpc_unary_t *u, const ProtobufCMessageDescriptor *resp_desc,
                                   rpc_result_t *res);

/* ------------------------------------------------------------------------
 * Helpers shared by the server, the blocking client and pkg/resilience's
 * non-blocking binding.
 * ------------------------------------------------------------------------ */

/* Packs m into a new byte buffer owned by caller (grpc_byte_buffer_destroy);
 * NULL when out of memory. */
grpc_byte_buffer *rpc_message_pack(const ProtobufCMessage *m);
/* Decodes bb (NULL: no message) with allocator a (NULL: malloc). NULL when
 * absent or not a valid message of type d. Owned by caller. */
ProtobufCMessage *rpc_message_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *d,
                                     ProtobufCAllocator *a);
/* The first value of metadata `key` (lower case): *value is borrowed from md
 * and not NUL-terminated. False when absent. */
bool rpc_md_find(const grpc_metadata_array *md, const char *key, const char **value, size_t *len);
/* rpc_md_find that also says whether the key occurs more than once (md may
 * be NULL: absent). *value and *len are the first entry's, NULL and 0 when
 * absent. */
rpc_md_presence_t rpc_md_lookup(const grpc_metadata_array *md, const char *key, const char **value,
                                size_t *len);

/*
 * A GRPC_CQ_NEXT queue whose waiters never poll, for a server's requests: a
 * thread blocked in grpc_completion_queue_next on it sleeps until an event
 * is put on it and takes no part in gRPC's I/O polling. With gRPC's default
 * engine (epoll1) every thread waiting on a polling queue is a candidate
 * poller, and each time the poller returns to its caller it hands the role
 * to another one (a futex wake and a context switch); a thread that seldom
 * gets an event (the built-in services) only adds those hand-offs. Some
 * polling queue of the server must have a waiter for I/O to progress. Not
 * for client calls: gRPC 1.51 needs a pollset for those (it asserts). Under
 * another engine (GRPC_POLL_STRATEGY=poll) this is an ordinary polling
 * queue. Owned by caller (grpc_completion_queue_destroy).
 */
grpc_completion_queue *rpc_cq_new_non_polling(void);

/* Monotonic ns deadline <-> gpr_timespec. */
gpr_timespec rpc_deadline_to_timespec(uint64_t deadline_ns);
uint64_t rpc_deadline_from_timespec(gpr_timespec t);

#endif /* RPC_RPC_H */
