/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c - the gRPC C core server loop behind rpc_server_*.
 *
 * Each worker thread owns a completion queue and one "slot": a single
 * outstanding grpc_server_request_call, armed only while the worker is
 * idle. gRPC hands a new call to a queue that has a pending request, so a
 * call always goes to an idle worker and never waits behind a busy one
 * (gRPC prefers the queue a connection is bound to: with several requests
 * armed per worker, one client's calls would pile up behind its first slow
 * call). Calls that arrive while every worker is busy wait inside gRPC until
 * one re-arms. A call never changes thread.
 *
 * A slot goes IDLE -> WAIT_CALL (armed) -> RECV_MESSAGE (read the request)
 * -> REPLYING (handler ran, reply sent) -> WAIT_CALL again, or IDLE once the
 * server is stopping; a worker whose slot is idle while stopping shuts its
 * own queue down, so no queue disappears under a call.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/log.h>

#include "absl_quiet.h"
#include "builtin.h"
#include "internal.h"
#include "sock.h"
#include "stats.h"

typedef enum { SLOT_IDLE, SLOT_WAIT_CALL, SLOT_RECV_MESSAGE, SLOT_REPLYING } slot_state_t;

typedef struct worker worker_t;

typedef struct slot {
    worker_t *w;
    const rpc_method_t *method; /* NULL: not in the table (UNIMPLEMENTED) */
    slot_state_t state;
    grpc_call *call;
    grpc_call_details details_in;
    grpc_metadata_array md;
    grpc_byte_buffer *payload;
    grpc_byte_buffer *reply;
    grpc_slice details;          /* the status message the client gets */
    char detail[SVC_ERRBUF_LEN]; /* the handler's, for the access line */
    int cancelled;
    svc_err_t err;
    uint64_t started_ns;
    char request_id[40];
    grpc_metadata trailers[3]; /* of a failed reply; live until the batch completes */
    grpc_slice status_details; /* the packed google.rpc.Status of a failed reply */
    rpc_ctx_t ctx;
} slot_t;

struct worker {
    rpc_server_t *srv;
    int index;
    pthread_t thread;
    grpc_completion_queue *cq;
    slot_t slot;
    void *state;
    uint64_t rng;
};

struct rpc_server {
    rpc_server_opts_t o;
    const rpc_method_t *methods;
    size_t n_methods;
    grpc_server *server;
    grpc_completion_queue *shutdown_cq;
    int port;
    worker_t *workers;
    int n_workers;
    const char *mod;
    char error_domain[64]; /* ErrorInfo.domain of failed replies */

    /* Start-up handshake: workers report their init result. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_ready, n_failed;
    char init_err[SVC_ERRBUF_LEN];

    rpc__stats_t *stats;       /* shards: one per worker, then the built-ins' */
    rpc__stats_method_t *rows; /* the stats rows: the table, then the built-ins */
    rpc__builtin_t *builtin;

    atomic_bool stopping;
    atomic_bool stop_requested;
    /* Calls between arrival and the end of their reply: gRPC's shutdown
     * notification does not wait for handlers still running. */
    atomic_int in_flight;
};

void rpc_init(void)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    rpc__route_grpc_logs();
    rpc__absl_deadlock_detection_off();
    grpc_init();
}

void rpc_shutdown(void)
{
    grpc_shutdown();
}

void rpc_server_opts_init(rpc_server_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->listen = "127.0.0.1:25051";
    o->workers = RPC_DEFAULT_WORKERS;
    o->drain_ms = RPC_DEFAULT_DRAIN_MS;
    o->max_message_bytes = RPC_DEFAULT_MAX_MESSAGE;
}

/* --------------------------------------------------------------------- */
/* One call                                                              */
/* --------------------------------------------------------------------- */

/* Stopping and idle: nothing more can arrive on this queue. */
static void retire(slot_t *s)
{
    s->state = SLOT_IDLE;
    grpc_completion_queue_shutdown(s->w->cq);
}

static void arm(slot_t *s)
{
    grpc_call_error rc;

    if (atomic_load(&s->w->srv->stopping)) {
        retire(s);
        return;
    }
    s->state = SLOT_WAIT_CALL;
    s->call = NULL;
    s->payload = NULL;
    grpc_call_details_init(&s->details_in);
    grpc_metadata_array_init(&s->md);
    rc = grpc_server_request_call(s->w->srv->server, &s->call, &s->details_in, &s->md, s->w->cq,
                                  s->w->cq, s);
    if (rc != GRPC_CALL_OK) {
        /* Only happens while shutting down. */
        grpc_call_details_destroy(&s->details_in);
        grpc_metadata_array_destroy(&s->md);
        retire(s);
    }
}

/* The call's row in the stats: its method's, or the unknown one. */
static size_t stats_row(const slot_t *s)
{
    const rpc_server_t *srv = s->w->srv;

    return s->method != NULL ? (size_t)(s->method - srv->methods) : rpc__stats_unknown(srv->stats);
}

/* A call arrived: find its method and read the request message. */
static void receive(slot_t *s)
{
    const rpc_server_t *srv = s->w->srv;
    char path[256];
    size_t n = GRPC_SLICE_LENGTH(s->details_in.method);
    grpc_op op;

    atomic_fetch_add(&s->w->srv->in_flight, 1);
    if (n >= sizeof path)
        n = sizeof path - 1;
    memcpy(path, GRPC_SLICE_START_PTR(s->details_in.method), n);
    path[n] = '\0';
    s->method = rpc__method_find(srv->methods, srv->n_methods, path);
    rpc__stats_started(srv->stats, (size_t)s->w->index, stats_row(s));
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->payload;
    s->state = SLOT_RECV_MESSAGE;
    if (grpc_call_start_batch(s->call, &op, 1, s, NULL) != GRPC_CALL_OK) {
        svc_log_error(srv->mod, "cannot read the request of %s", path);
        grpc_call_cancel(s->call, NULL);
    }
}

/* Copies x-request-id (sanitised) or makes one up, so every log line of the
 * call can be correlated across services. */
static void take_request_id(slot_t *s)
{
    const char *id = rpc_ctx_metadata(&s->ctx, "x-request-id");
    size_t n = 0;

    if (id != NULL) {
        for (; id[n] != '\0' && n < sizeof s->request_id - 1; n++) {
            char c = id[n];
            int ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                     c == '-' || c == '_' || c == '.';
            s->request_id[n] = ok ? c : '_';
        }
    }
    if (n == 0) {
        uint64_t x = s->w->rng;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        s->w->rng = x;
        snprintf(s->request_id, sizeof s->request_id, "%016" PRIx64, x);
        return;
    }
    s->request_id[n] = '\0';
}

static grpc_byte_buffer *encode(const ProtobufCMessage *m, svc_err_t *err,
                                char errbuf[static SVC_ERRBUF_LEN])
{
    grpc_byte_buffer *bb = rpc_message_pack(m);

    if (bb == NULL) {
        *err = SVC_ENOMEM;
        svc_errbuf_set(errbuf, "cannot allocate the reply");
    }
    return bb;
}

/* The trailer of rpc_ctx_mark_dependency_failure(); static, never freed. */
static grpc_metadata dependency_failure_md;

/* Stands in for a path that is not in the table, for logs. */
static const rpc_method_t unknown_method = {"(unknown method)", NULL, NULL};

/* The trailers of a failed reply: the dependency-failure mark and the
 * pushback hint, as the handler asked, and the error details. The pushback
 * value lives in the slot's ctx and the details in the slot, neither reused
 * before the reply batch completes. */
static size_t failure_trailers(slot_t *s)
{
    size_t n = 0;

    if (s->err == SVC_OK)
        return 0;
    if (s->ctx.dependency_failure)
        s->trailers[n++] = dependency_failure_md;
    if (s->ctx.has_pushback) {
        memset(&s->trailers[n], 0, sizeof s->trailers[n]);
        s->trailers[n].key = grpc_slice_from_static_string("grpc-retry-pushback-ms");
        s->trailers[n++].value = grpc_slice_from_static_string(s->ctx.pushback);
    }
    if (!GRPC_SLICE_IS_EMPTY(s->status_details)) {
        memset(&s->trailers[n], 0, sizeof s->trailers[n]);
        s->trailers[n].key = grpc_slice_from_static_string(RPC_STATUS_DETAILS_MD);
        s->trailers[n++].value = s->status_details;
    }
    return n;
}

/* The status message of a failed call. A failure on the server's side is
 * described to the client in the project's words (svc_strerror) unless the
 * handler said its message is written for the client
 * (rpc_ctx_set_message_public): a handler's detail there is often a
 * library's (libpq's "connection to server at ..., port ... failed"), which
 * tells a client the system's insides. The detail stays in the access line
 * under the call's request id. */
static const char *client_details(const slot_t *s)
{
    switch (svc_err_to_grpc(s->err)) {
    case 2:  /* UNKNOWN */
    case 4:  /* DEADLINE_EXCEEDED */
    case 13: /* INTERNAL */
    case 14: /* UNAVAILABLE */
    case 15: /* DATA_LOSS */
        return s->ctx.public_message ? s->detail : svc_strerror(s->err);
    default:
        return s->detail;
    }
}

/* Runs the handler for a call whose request has been read (received is
 * false when the client went away first) and starts the reply batch. */
static void serve(slot_t *s, bool received)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ProtobufCMessage *resp = NULL;
    grpc_slice in = grpc_empty_slice();
    grpc_op ops[4];
    size_t n = 0;

    s->started_ns = svc_now_ns();
    s->ctx.method = s->method != NULL ? s->method : &unknown_method;
    s->ctx.deadline_ns = rpc_deadline_from_timespec(s->details_in.deadline);
    s->ctx.worker = s->w->state;
    s->ctx.app = s->w->srv->o.app;
    s->ctx.call = s->call;
    s->ctx.md = &s->md;
    rpc__ctx_reset_reply(&s->ctx);
    take_request_id(s);
    svc_log_set_request_id(s->request_id);

    if (s->payload != NULL) {
        grpc_byte_buffer_reader r;
        if (grpc_byte_buffer_reader_init(&r, s->payload)) {
            in = grpc_byte_buffer_reader_readall(&r);
            grpc_byte_buffer_reader_destroy(&r);
        }
    }
    if (!received) {
        s->err = SVC_ECANCELLED;
        svc_errbuf_set(errbuf, "the client went away before its request arrived");
    } else if (s->method != NULL) {
        s->err =
            rpc__dispatch(&s->ctx, GRPC_SLICE_START_PTR(in), GRPC_SLICE_LENGTH(in), &resp, errbuf);
    } else {
        s->err = SVC_EUNIMPL;
        svc_errbuf_set(errbuf, "unknown method %.*s", (int)GRPC_SLICE_LENGTH(s->details_in.method),
                       (const char *)GRPC_SLICE_START_PTR(s->details_in.method));
    }
    grpc_slice_unref(in);
    s->reply = NULL;
    if (s->err == SVC_OK)
        s->reply = resp != NULL ? encode(resp, &s->err, errbuf) : NULL;
    if (s->err == SVC_OK && s->reply == NULL) {
        s->err = SVC_EINTERNAL;
        svc_errbuf_set(errbuf, "handler returned no reply");
    }
    snprintf(s->detail, sizeof s->detail, "%s", errbuf[0] ? errbuf : svc_strerror(s->err));
    s->details = grpc_slice_from_copied_string(client_details(s));
    s->status_details = s->err == SVC_OK
                            ? grpc_empty_slice()
                            : rpc__status_details(&s->ctx, svc_err_to_grpc(s->err),
                                                  client_details(s), s->w->srv->error_domain);

    memset(ops, 0, sizeof ops);
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n].data.send_initial_metadata.count = s->ctx.n_header_md;
    ops[n++].data.send_initial_metadata.metadata = s->ctx.header_md;
    if (s->err == SVC_OK) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = s->reply;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.trailing_metadata_count = failure_trailers(s);
    ops[n].data.send_status_from_server.trailing_metadata = s->trailers;
    ops[n].data.send_status_from_server.status = (grpc_status_code)svc_err_to_grpc(s->err);
    ops[n++].data.send_status_from_server.status_details = s->err == SVC_OK ? NULL : &s->details;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &s->cancelled;
    s->state = SLOT_REPLYING;
    if (grpc_call_start_batch(s->call, ops, n, s, NULL) != GRPC_CALL_OK) {
        /* Not reachable with a well-formed batch; never leave the slot stuck. */
        svc_log_error(s->w->srv->mod, "cannot start the reply batch for %s", s->ctx.method->path);
        grpc_call_cancel(s->call, NULL);
    }
    svc_log_set_request_id(NULL);
}

/* The access-log line: written once per call, when it is completely over. */
static void log_access(const slot_t *s)
{
    char kv[512];
    double ms = (double)(svc_now_ns() - s->started_ns) / 1e6;
    const char *code = svc_err_name(s->err);
    svc_log_level_t lvl = s->err == SVC_OK || s->err == SVC_ENOTFOUND || s->err == SVC_EINVAL
                              ? SVC_LOG_INFO
                              : SVC_LOG_WARN;

    char key[160];
    uint64_t repeated = 0;
    int n;

    if (!svc_log_enabled(lvl))
        return;
    /* A failing dependency fails every call the same way: the first line of
     * each method and code, then one a second with the count (svc/core.h). */
    if (lvl >= SVC_LOG_WARN) {
        snprintf(key, sizeof key, "%s %s", s->ctx.method->path, code);
        if (!svc_log_repeats_admit(svc_log_repeats_default(), lvl, s->w->srv->mod, key, &repeated))
            return;
    }
    n = snprintf(kv, sizeof kv, " method=%s code=%s duration_ms=%.3f client_cancelled=%d",
                 s->ctx.method->path, code, ms, s->cancelled);
    if (repeated > 0 && n > 0 && (size_t)n < sizeof kv)
        snprintf(kv + n, sizeof kv - (size_t)n, " repeated=%llu", (unsigned long long)repeated);
    svc_log_set_request_id(s->request_id);
    svc_log_write(lvl, s->w->srv->mod, kv, "%s %s %.3fms%s%s", s->ctx.method->path, code, ms,
                  s->err == SVC_OK ? "" : ": ", s->err == SVC_OK ? "" : s->detail);
    svc_log_set_request_id(NULL);
}

static void finish(slot_t *s)
{
    atomic_fetch_sub(&s->w->srv->in_flight, 1);
    rpc__stats_handled(s->w->srv->stats, (size_t)s->w->index, stats_row(s), svc_err_to_grpc(s->err),
                       svc_now_ns() - s->started_ns);
    log_access(s);
    grpc_slice_unref(s->details);
    grpc_slice_unref(s->status_details);
    grpc_byte_buffer_destroy(s->reply);
    grpc_byte_buffer_destroy(s->payload);
    grpc_metadata_array_destroy(&s->md);
    grpc_call_details_destroy(&s->details_in);
    grpc_call_unref(s->call);
    rpc__arena_reset(&s->ctx.arena);
    s->reply = s->payload = NULL;
    s->call = NULL;
    arm(s);
}

/* --------------------------------------------------------------------- */
/* Workers                                                               */
/* --------------------------------------------------------------------- */

static void worker_report(worker_t *w, bool ok, const char *err)
{
    rpc_server_t *srv = w->srv;

    pthread_mutex_lock(&srv->mu);
    if (ok) {
        srv->n_ready++;
    } else {
        if (srv->n_failed++ == 0)
            snprintf(srv->init_err, sizeof srv->init_err, "worker %d: %s", w->index, err);
    }
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    rpc_server_t *srv = w->srv;
    char errbuf[SVC_ERRBUF_LEN] = "worker_init failed";

    if (srv->o.worker_init != NULL) {
        w->state = srv->o.worker_init(w->index, srv->o.app, errbuf);
        worker_report(w, w->state != NULL, errbuf);
    } else {
        worker_report(w, true, NULL);
    }
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        slot_t *s = ev.tag;

        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        switch (s->state) {
        case SLOT_WAIT_CALL:
            if (ev.success) {
                receive(s);
            } else { /* the server is shutting down */
                grpc_call_details_destroy(&s->details_in);
                grpc_metadata_array_destroy(&s->md);
                retire(s);
            }
            break;
        case SLOT_RECV_MESSAGE:
            serve(s, ev.success != 0);
            break;
        case SLOT_REPLYING:
            finish(s);
            break;
        case SLOT_IDLE:
            break;
        }
    }
    if (srv->o.worker_fini != NULL && w->state != NULL)
        srv->o.worker_fini(w->state);
    return NULL;
}

/* --------------------------------------------------------------------- */
/* Server lifecycle                                                      */
/* --------------------------------------------------------------------- */

static svc_err_t create_grpc_server(rpc_server_t *s, char errbuf[static SVC_ERRBUF_LEN])
{
    grpc_arg args[3];
    grpc_channel_args ch_args = {SVC_COUNTOF(args), args};
    grpc_server_credentials *creds;

    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
    args[0].value.integer = 0; /* a second server on our port must fail loudly */
    args[1].type = GRPC_ARG_INTEGER;
    args[1].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[1].value.integer = s->o.max_message_bytes;
    args[2].type = GRPC_ARG_INTEGER;
    args[2].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
    args[2].value.integer = s->o.max_message_bytes;

    if (rpc__probe_listen(s->o.listen, errbuf) != 0)
        return SVC_EUNAVAIL;
    s->server = grpc_server_create(&ch_args, NULL);
    s->shutdown_cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(s->server, s->shutdown_cq, NULL);
    creds = grpc_insecure_server_credentials_create();
    s->port = grpc_server_add_http2_port(s->server, s->o.listen, creds);
    grpc_server_credentials_release(creds);
    if (s->port == 0) {
        svc_errbuf_set(errbuf, "cannot listen on %s", s->o.listen);
        return SVC_EUNAVAIL;
    }
    return SVC_OK;
}

static svc_err_t create_workers(rpc_server_t *s, char errbuf[static SVC_ERRBUF_LEN])
{
    s->workers = calloc((size_t)s->o.workers, sizeof *s->workers);
    if (s->workers == NULL) {
        svc_errbuf_set(errbuf, "out of memory creating workers");
        return SVC_ENOMEM;
    }
    for (int i = 0; i < s->o.workers; i++) {
        worker_t *w = &s->workers[i];
        w->srv = s;
        w->index = i;
        w->rng = 0x9E3779B97F4A7C15ull ^ (svc_now_ns() + (uint64_t)i * 7919);
        w->cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(s->server, w->cq, NULL);
        w->slot.w = w;
        rpc__arena_init(&w->slot.ctx.arena);
        s->n_workers++;
    }
    return SVC_OK;
}

static svc_err_t create_stats(rpc_server_t *s)
{
    size_t n = s->n_methods + RPC__BUILTIN_COUNT;

    s->rows = calloc(n, sizeof *s->rows);
    if (s->rows == NULL)
        return SVC_ENOMEM;
    for (size_t i = 0; i < s->n_methods; i++)
        s->rows[i] = (rpc__stats_method_t){s->methods[i].path, "unary"};
    memcpy(&s->rows[s->n_methods], rpc__builtin_methods, sizeof rpc__builtin_methods);
    s->stats = rpc__stats_new(s->rows, n, (size_t)s->o.workers + 1);
    return s->stats != NULL ? SVC_OK : SVC_ENOMEM;
}

static svc_err_t create_builtin(rpc_server_t *s, char errbuf[static SVC_ERRBUF_LEN])
{
    rpc__builtin_opts_t bo = {
        .server = s->server,
        .o = &s->o,
        .methods = s->methods,
        .n_methods = s->n_methods,
        .stats = s->stats,
        .shard = (size_t)s->o.workers,
        .first_row = s->n_methods,
        .stopping = &s->stopping,
        .mod = s->mod,
    };

    return rpc__builtin_new(&bo, &s->builtin, errbuf);
}

svc_err_t rpc_server_new(const rpc_server_opts_t *o, const rpc_method_t *methods, size_t n,
                         rpc_server_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    rpc_server_t *s = calloc(1, sizeof *s);
    svc_err_t err;

    *out = NULL;
    if (s == NULL)
        return SVC_ENOMEM;
    s->o = *o;
    s->methods = methods;
    s->n_methods = n;
    s->mod = o->log_module != NULL ? o->log_module : "rpc";
    snprintf(s->error_domain, sizeof s->error_domain, "%s%s",
             o->error_domain != NULL ? o->error_domain : s->mod,
             o->error_domain != NULL ? "" : ".shopmicro");
    dependency_failure_md.key = grpc_slice_from_static_string(RPC_DEPENDENCY_FAILURE_MD);
    dependency_failure_md.value = grpc_slice_from_static_string("1");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (o->workers < 1 || o->listen == NULL) {
        svc_errbuf_set(errbuf, "rpc_server_new: need workers >= 1 and listen");
        err = SVC_EINVAL;
        goto fail;
    }
    err = rpc__methods_validate(methods, n, errbuf);
    if (err != SVC_OK)
        goto fail;
    err = create_stats(s);
    if (err != SVC_OK)
        goto fail;
    err = create_grpc_server(s, errbuf);
    if (err != SVC_OK)
        goto fail;
    err = create_builtin(s, errbuf);
    if (err != SVC_OK)
        goto fail;
    err = create_workers(s, errbuf);
    if (err != SVC_OK)
        goto fail;
    *out = s;
    return SVC_OK;
fail:
    rpc_server_free(s);
    return err;
}

int rpc_server_port(const rpc_server_t *s)
{
    return s->port;
}

void rpc_server_stop(rpc_server_t *s)
{
    atomic_store(&s->stop_requested, true);
}

/* Waits for SIGTERM/SIGINT (blocked in every thread by rpc_init, so they
 * queue for us) or rpc_server_stop(). */
static void wait_for_stop(rpc_server_t *s)
{
    sigset_t set;
    struct timespec tick = {0, 100 * 1000 * 1000};

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    while (!atomic_load(&s->stop_requested)) {
        int sig = sigtimedwait(&set, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT) {
            svc_log_info(s->mod, "received %s: shutting down (drain up to %d ms)",
                         sig == SIGTERM ? "SIGTERM" : "SIGINT", s->o.drain_ms);
            return;
        }
    }
    svc_log_info(s->mod, "stop requested: shutting down (drain up to %d ms)", s->o.drain_ms);
}

/* Polls until no call is being served or `until_ns` passes. */
static bool wait_idle(rpc_server_t *s, uint64_t until_ns)
{
    while (atomic_load(&s->in_flight) > 0) {
        if (svc_now_ns() >= until_ns)
            return false;
        nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
    }
    return true;
}

/*
 * Stops accepting, lets in-flight calls finish within drain_ms, then
 * cancels what is left and waits for those handlers to return (they are
 * bounded by their own deadlines). Returns false when calls were cancelled.
 * Workers retire on their own as their slots go idle (see arm()).
 *
 * Known gRPC 1.51 behaviour (grpc/grpc#41785): a call that reaches the
 * server after shutdown began, before its client has read the GOAWAY, is
 * dropped and the client sees CANCELLED. Such a call never ran, so nothing
 * is lost; pkg/resilience treats a CANCELLED it did not ask for as
 * UNAVAILABLE, so guarded clients retry it elsewhere or fail cleanly.
 */
static bool drain(rpc_server_t *s)
{
    uint64_t until = svc_now_ns() + (uint64_t)s->o.drain_ms * SVC_NS_PER_MS;
    grpc_event ev;
    bool clean;

    atomic_store(&s->stopping, true);
    grpc_server_shutdown_and_notify(s->server, s->shutdown_cq, s);
    /* Clean means: every call we had started finished by itself. */
    clean = wait_idle(s, until);
    if (!clean) {
        svc_log_warn(s->mod, "drain timed out after %d ms: cancelling %d in-flight calls",
                     s->o.drain_ms, atomic_load(&s->in_flight));
        grpc_server_cancel_all_calls(s->server);
        wait_idle(s, SVC_DEADLINE_NONE);
    }
    /* Our calls are over; a client that keeps its connection open (or keeps
     * sending on it before reading the GOAWAY) must not hold the process:
     * after a short grace, connections still open are closed. */
    ev = grpc_completion_queue_next(
        s->shutdown_cq, rpc_deadline_to_timespec(svc_now_ns() + 200 * SVC_NS_PER_MS), NULL);
    if (ev.type == GRPC_QUEUE_TIMEOUT) {
        grpc_server_cancel_all_calls(s->server);
        grpc_completion_queue_next(s->shutdown_cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    }
    return clean;
}

/* Joins the workers. After a drain each has retired its own queue; when
 * the server never started, nothing is armed and the queues are shut here. */
static void stop_workers(rpc_server_t *s, int started, bool served)
{
    if (!served)
        for (int i = 0; i < s->n_workers; i++)
            grpc_completion_queue_shutdown(s->workers[i].cq);
    for (int i = 0; i < started; i++)
        pthread_join(s->workers[i].thread, NULL);
}

static int start_workers(rpc_server_t *s, char errbuf[static SVC_ERRBUF_LEN])
{
    int started = 0;

    for (; started < s->n_workers; started++)
        if (pthread_create(&s->workers[started].thread, NULL, worker_main, &s->workers[started]) !=
            0)
            break;
    pthread_mutex_lock(&s->mu);
    while (s->n_ready + s->n_failed < started)
        pthread_cond_wait(&s->cv, &s->mu);
    if (started < s->n_workers)
        svc_errbuf_set(errbuf, "cannot start worker threads: %s", strerror(errno));
    else if (s->n_failed > 0)
        svc_errbuf_set(errbuf, "%s", s->init_err);
    pthread_mutex_unlock(&s->mu);
    return started;
}

svc_err_t rpc_server_run(rpc_server_t *s, char errbuf[static SVC_ERRBUF_LEN])
{
    int started = start_workers(s, errbuf);
    bool clean;

    if (started < s->n_workers || s->n_failed > 0) {
        stop_workers(s, started, false);
        return SVC_EUNAVAIL;
    }
    grpc_server_start(s->server);
    if (rpc__builtin_start(s->builtin, errbuf) != SVC_OK) {
        rpc_server_stop(s); /* no probes: do not serve half a server */
        svc_log_error(s->mod, "%s", errbuf);
    }
    for (int i = 0; i < s->n_workers; i++)
        arm(&s->workers[i].slot);
    svc_log_info(s->mod, "listening on %s (port %d) with %d workers", s->o.listen, s->port,
                 s->n_workers);

    wait_for_stop(s);
    clean = drain(s);
    stop_workers(s, started, true);
    rpc__builtin_join(s->builtin);
    svc_log_info(s->mod, "stopped%s", clean ? " after a clean drain" : " (calls were cancelled)");
    return SVC_OK;
}

void rpc_server_free(rpc_server_t *s)
{
    if (s == NULL)
        return;
    if (s->server != NULL) {
        if (!atomic_load(&s->stopping)) {
            /* Never started or never stopped: a shutdown is still required
             * before destroy. */
            grpc_server_shutdown_and_notify(s->server, s->shutdown_cq, s);
            grpc_server_cancel_all_calls(s->server);
            grpc_completion_queue_next(s->shutdown_cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        }
        grpc_server_destroy(s->server);
    }
    rpc__builtin_free(s->builtin);
    for (int i = 0; i < s->n_workers; i++) {
        worker_t *w = &s->workers[i];
        grpc_completion_queue_shutdown(w->cq);
        while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(w->cq);
        rpc__arena_dispose(&w->slot.ctx.arena);
    }
    if (s->shutdown_cq != NULL) {
        grpc_completion_queue_shutdown(s->shutdown_cq);
        while (grpc_completion_queue_next(s->shutdown_cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
                   .type != GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(s->shutdown_cq);
    }
    free(s->workers);
    rpc__stats_free(s->stats);
    free(s->rows);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

svc_err_t rpc_server_metrics_render(const rpc_server_t *s, char *buf, size_t cap, size_t *len)
{
    svc_text_t t = svc_text_on(buf, cap);

    rpc__stats_render(s->stats, atomic_load(&s->in_flight), &t);
    return svc_text_end(&t, len);
}
