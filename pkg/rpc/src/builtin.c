/* SPDX-License-Identifier: Apache-2.0 */
/*
 * builtin.c - the built-in services' thread and its calls (see builtin.h).
 *
 * Each call is a small state machine driven by its completions. A call has
 * up to three batches in flight, each with a tag of its own: the close
 * (RECV_CLOSE_ON_SERVER, which completes when the call is over, whoever
 * ended it), a receive and a send. It is freed when it is closed and no
 * batch of it is left, so no completion ever finds it gone. One request per
 * method is armed at all times; an arrival arms the next before it is served.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>

#include "builtin.h"
#include "grpc/health/v1/health.pb-c.h"
#include "reflect.h"

#define TICK_NS      (100 * SVC_NS_PER_MS)  /* how often the thread looks up   */
#define POLL_NS      (1000 * SVC_NS_PER_MS) /* health, while someone watches   */
#define CHECK_AGE_NS (250 * SVC_NS_PER_MS)  /* a probe flood asks the callback at most 4/s */

#define ST_NOT_SERVING GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING
#define ST_UNKNOWN_SVC GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN

const rpc__stats_method_t rpc__builtin_methods[RPC__BUILTIN_COUNT] = {
    {"/grpc.health.v1.Health/Check", "unary"},
    {"/grpc.health.v1.Health/Watch", "server_stream"},
    {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", "bidi_stream"},
};

typedef enum { OP_REQUEST, OP_RECV, OP_SEND, OP_CLOSE, OP__COUNT } op_t;
typedef struct bcall bcall_t;
typedef struct btag {
    bcall_t *c;
    op_t op;
} btag_t;

struct bcall {
    rpc__builtin_t *b;
    int kind;
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *in, *out;
    grpc_slice details;
    btag_t tag[OP__COUNT];
    int outstanding; /* batches started and not completed (the request not counted) */
    int cancelled;   /* from the close                                            */
    bool closed, sent_initial, status_sent, send_busy, dirty, ending;
    bool watching;     /* a watch that has its request (and counts in n_watch)      */
    int code;          /* the status sent                                           */
    int last;          /* a watch: the status it sent last                          */
    char service[256]; /* a watch: the name watched                                 */
    uint64_t started_ns;
    bcall_t *prev, *next; /* the active list */
};

struct rpc__builtin {
    rpc__builtin_opts_t bo;
    grpc_completion_queue *cq;
    void *handle[RPC__BUILTIN_COUNT];
    rpc__health_t *health;
    rpc__reflect_t *reflect;
    char **names; /* the services served, for health and list_services */
    size_t n_names;
    pthread_t thread;
    bool started, ended, cq_shut;
    bcall_t *active;
    int n_active, n_pending, n_watch;
    uint64_t next_poll_ns;
};

/* ---- sending -------------------------------------------------------------- */

static bool stopping(const rpc__builtin_t *b)
{
    return atomic_load(b->bo.stopping);
}

/* One batch on the send tag: initial metadata when not sent yet, msg (owned;
 * may be NULL) and, with end, the status. */
static void start_send(bcall_t *c, grpc_byte_buffer *msg, bool end, int code, const char *why)
{
    grpc_op ops[3];
    size_t n = 0;

    memset(ops, 0, sizeof ops);
    if (!c->sent_initial) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        c->sent_initial = true;
    }
    if (msg != NULL) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = msg;
    }
    if (end) {
        c->code = code;
        c->status_sent = true;
        c->details = grpc_slice_from_copied_string(why != NULL ? why : "");
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = (grpc_status_code)code;
        ops[n++].data.send_status_from_server.status_details = code != 0 ? &c->details : NULL;
    }
    c->out = msg;
    c->send_busy = true;
    if (grpc_call_start_batch(c->call, ops, n, &c->tag[OP_SEND], NULL) != GRPC_CALL_OK) {
        svc_log_error(c->b->bo.mod, "cannot start a send on %s",
                      rpc__builtin_methods[c->kind].path);
        grpc_byte_buffer_destroy(msg);
        c->out = NULL;
        c->send_busy = false;
        grpc_call_cancel(c->call, NULL);
        return;
    }
    c->outstanding++;
}

static grpc_byte_buffer *health_message(int status)
{
    Grpc__Health__V1__HealthCheckResponse m = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;

    m.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)status;
    return rpc_message_pack(&m.base);
}

static void start_recv(bcall_t *c)
{
    grpc_op op;

    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &c->in;
    if (grpc_call_start_batch(c->call, &op, 1, &c->tag[OP_RECV], NULL) == GRPC_CALL_OK)
        c->outstanding++;
    else
        grpc_call_cancel(c->call, NULL);
}

/* A watch's update: the status now, unless it is what the watcher has. */
static void watch_push(bcall_t *c)
{
    int st = rpc__health_status(c->b->health, c->service, false, POLL_NS / 2);

    if (c->status_sent || st == c->last)
        return;
    if (c->send_busy) {
        c->dirty = true;
        return;
    }
    c->last = st;
    start_send(c, health_message(st), false, 0, NULL);
}

/* The server is stopping: a watcher learns NOT_SERVING, then every stream
 * ends with UNAVAILABLE (a client retries it on another server). */
static void end_call(bcall_t *c)
{
    grpc_byte_buffer *last = NULL;

    if (c->status_sent)
        return;
    if (c->send_busy) {
        c->ending = true;
        return;
    }
    if (c->kind == RPC__BUILTIN_WATCH && c->sent_initial && c->last != ST_NOT_SERVING)
        last = health_message(ST_NOT_SERVING);
    start_send(c, last, true, GRPC_STATUS_UNAVAILABLE, "server shutting down");
}

/* ---- serving one message -------------------------------------------------- */

static void *unpack_in(bcall_t *c, const ProtobufCMessageDescriptor *d)
{
    return rpc_message_unpack(c->in, d, NULL);
}

static void serve_check(bcall_t *c)
{
    Grpc__Health__V1__HealthCheckRequest *q =
        unpack_in(c, &grpc__health__v1__health_check_request__descriptor);
    char why[320];
    int st;

    if (q == NULL) {
        start_send(c, NULL, true, GRPC_STATUS_INVALID_ARGUMENT, "not a HealthCheckRequest");
        return;
    }
    st = rpc__health_status(c->b->health, q->service, stopping(c->b), CHECK_AGE_NS);
    if (st == ST_UNKNOWN_SVC) {
        snprintf(why, sizeof why, "unknown service %.256s", q->service);
        start_send(c, NULL, true, GRPC_STATUS_NOT_FOUND, why);
    } else {
        start_send(c, health_message(st), true, 0, NULL);
    }
    protobuf_c_message_free_unpacked(&q->base, NULL);
}

static void serve_watch(bcall_t *c)
{
    Grpc__Health__V1__HealthCheckRequest *q =
        unpack_in(c, &grpc__health__v1__health_check_request__descriptor);

    if (q == NULL) {
        start_send(c, NULL, true, GRPC_STATUS_INVALID_ARGUMENT, "not a HealthCheckRequest");
        return;
    }
    snprintf(c->service, sizeof c->service, "%s", q->service);
    protobuf_c_message_free_unpacked(&q->base, NULL);
    c->watching = true;
    c->b->n_watch++;
    c->last = rpc__health_status(c->b->health, c->service, stopping(c->b), POLL_NS);
    start_send(c, health_message(c->last), false, 0, NULL);
}

static void serve_reflect(bcall_t *c)
{
    grpc_byte_buffer_reader r;
    grpc_slice in, out;
    uint8_t *answer = NULL;
    size_t len = 0;

    if (c->in == NULL) { /* the client is done asking */
        start_send(c, NULL, true, 0, NULL);
        return;
    }
    if (grpc_byte_buffer_reader_init(&r, c->in)) {
        in = grpc_byte_buffer_reader_readall(&r);
        grpc_byte_buffer_reader_destroy(&r);
        answer = rpc__reflect_answer(c->b->reflect, GRPC_SLICE_START_PTR(in), GRPC_SLICE_LENGTH(in),
                                     &len);
        grpc_slice_unref(in);
    }
    if (answer == NULL) {
        start_send(c, NULL, true, GRPC_STATUS_INVALID_ARGUMENT, "not a ServerReflectionRequest");
        return;
    }
    out = grpc_slice_new(answer, len, free);
    start_send(c, grpc_raw_byte_buffer_create(&out, 1), false, 0, NULL);
    grpc_slice_unref(out);
}

/* ---- the call's life -------------------------------------------------------- */

static void arm(rpc__builtin_t *b, int kind);

static void link_active(rpc__builtin_t *b, bcall_t *c)
{
    c->next = b->active;
    if (b->active != NULL)
        b->active->prev = c;
    b->active = c;
    b->n_active++;
}

static void free_call(bcall_t *c)
{
    rpc__builtin_t *b = c->b;

    if (c->call != NULL) {
        int code = c->cancelled ? GRPC_STATUS_CANCELLED : c->code;
        rpc__stats_handled(b->bo.stats, b->bo.shard, b->bo.first_row + (size_t)c->kind, code,
                           svc_now_ns() - c->started_ns);
        svc_log_debug(b->bo.mod, "%s code=%d %.3fms", rpc__builtin_methods[c->kind].path, code,
                      (double)(svc_now_ns() - c->started_ns) / 1e6);
        if (c->prev != NULL)
            c->prev->next = c->next;
        else
            b->active = c->next;
        if (c->next != NULL)
            c->next->prev = c->prev;
        b->n_active--;
        if (c->watching)
            b->n_watch--;
        grpc_call_unref(c->call);
    }
    if (c->status_sent)
        grpc_slice_unref(c->details);
    grpc_byte_buffer_destroy(c->in);
    grpc_byte_buffer_destroy(c->out);
    grpc_metadata_array_destroy(&c->md);
    free(c);
}

static void on_arrival(bcall_t *c, bool ok)
{
    rpc__builtin_t *b = c->b;
    grpc_op op;

    b->n_pending--;
    if (!ok) { /* shutting down: the request was withdrawn */
        free_call(c);
        return;
    }
    arm(b, c->kind);
    c->started_ns = svc_now_ns();
    rpc__stats_started(b->bo.stats, b->bo.shard, b->bo.first_row + (size_t)c->kind);
    link_active(b, c);
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->cancelled;
    if (grpc_call_start_batch(c->call, &op, 1, &c->tag[OP_CLOSE], NULL) != GRPC_CALL_OK) {
        c->closed = true; /* cannot happen on a fresh call; never leak it */
        grpc_call_cancel(c->call, NULL);
        return;
    }
    c->outstanding++;
    if (stopping(b))
        start_send(c, NULL, true, GRPC_STATUS_UNAVAILABLE, "server shutting down");
    else if (b->n_active > RPC_BUILTIN_MAX_CALLS)
        start_send(c, NULL, true, GRPC_STATUS_RESOURCE_EXHAUSTED,
                   "too many health/reflection calls");
    else
        start_recv(c);
}

static void on_recv(bcall_t *c, bool ok)
{
    if (ok && !c->status_sent) {
        if (c->kind == RPC__BUILTIN_REFLECT)
            serve_reflect(c);
        else if (c->in == NULL)
            start_send(c, NULL, true, GRPC_STATUS_INVALID_ARGUMENT, "no request message");
        else if (c->kind == RPC__BUILTIN_CHECK)
            serve_check(c);
        else
            serve_watch(c);
    }
    grpc_byte_buffer_destroy(c->in);
    c->in = NULL;
}

static void on_sent(bcall_t *c, bool ok)
{
    grpc_byte_buffer_destroy(c->out);
    c->out = NULL;
    c->send_busy = false;
    if (!ok || c->status_sent)
        return;
    if (c->ending) {
        end_call(c);
    } else if (c->kind == RPC__BUILTIN_REFLECT) {
        start_recv(c);
    } else if (c->dirty) {
        c->dirty = false;
        watch_push(c);
    }
}

static void on_event(btag_t *t, bool ok)
{
    bcall_t *c = t->c;

    if (t->op == OP_REQUEST) {
        on_arrival(c, ok);
        if (!ok)
            return;
    } else {
        c->outstanding--;
        if (t->op == OP_RECV)
            on_recv(c, ok);
        else if (t->op == OP_SEND)
            on_sent(c, ok);
        else
            c->closed = true;
    }
    if (c->closed && c->outstanding == 0)
        free_call(c);
}

/* Asks gRPC for the next call of this kind. */
static void arm(rpc__builtin_t *b, int kind)
{
    bcall_t *c;

    if (b->handle[kind] == NULL || stopping(b))
        return;
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        svc_log_error(b->bo.mod, "out of memory: %s no longer answered",
                      rpc__builtin_methods[kind].path);
        return;
    }
    c->b = b;
    c->kind = kind;
    for (int op = 0; op < OP__COUNT; op++)
        c->tag[op] = (btag_t){c, (op_t)op};
    grpc_metadata_array_init(&c->md);
    if (grpc_server_request_registered_call(b->bo.server, b->handle[kind], &c->call, &c->deadline,
                                            &c->md, NULL, b->cq, b->cq,
                                            &c->tag[OP_REQUEST]) != GRPC_CALL_OK) {
        c->call = NULL;
        free_call(c);
        return;
    }
    b->n_pending++;
}

/* ---- the thread ----------------------------------------------------------- */

static void tick(rpc__builtin_t *b)
{
    uint64_t now = svc_now_ns();

    if (stopping(b)) {
        if (!b->ended)
            for (bcall_t *c = b->active; c != NULL; c = c->next)
                end_call(c);
        b->ended = true;
        if (b->n_pending == 0 && b->n_active == 0 && !b->cq_shut) {
            grpc_completion_queue_shutdown(b->cq);
            b->cq_shut = true;
        }
        return;
    }
    if (b->n_watch == 0 || now < b->next_poll_ns)
        return;
    b->next_poll_ns = now + POLL_NS;
    for (bcall_t *c = b->active; c != NULL; c = c->next)
        if (c->watching)
            watch_push(c);
}

static void *builtin_main(void *arg)
{
    rpc__builtin_t *b = arg;

    for (;;) {
        grpc_event ev = grpc_completion_queue_next(
            b->cq, rpc_deadline_to_timespec(svc_now_ns() + TICK_NS), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type == GRPC_OP_COMPLETE)
            on_event(ev.tag, ev.success != 0);
        tick(b);
    }
    return NULL;
}

/* ---- lifecycle -------------------------------------------------------------- */

/* The services of the table, each once, then the built-in ones. */
static svc_err_t collect_names(rpc__builtin_t *b, char errbuf[static SVC_ERRBUF_LEN])
{
    size_t cap = b->bo.n_methods + RPC__BUILTIN_COUNT;

    b->names = calloc(cap, sizeof *b->names);
    if (b->names == NULL)
        return SVC_ENOMEM;
    for (size_t i = 0; i < b->bo.n_methods + RPC__BUILTIN_COUNT; i++) {
        const char *path = i < b->bo.n_methods ? b->bo.methods[i].path
                                               : rpc__builtin_methods[i - b->bo.n_methods].path;
        const char *slash = strrchr(path, '/');
        size_t len = (size_t)(slash - path) - 1, k;

        if (i == b->bo.n_methods + RPC__BUILTIN_REFLECT && b->handle[RPC__BUILTIN_REFLECT] == NULL)
            continue;
        for (k = 0; k < b->n_names; k++)
            if (strlen(b->names[k]) == len && strncmp(b->names[k], path + 1, len) == 0)
                break;
        if (k < b->n_names)
            continue;
        if ((b->names[b->n_names] = strndup(path + 1, len)) == NULL)
            return SVC_ENOMEM;
        b->n_names++;
    }
    (void)errbuf;
    return SVC_OK;
}

static svc_err_t register_methods(rpc__builtin_t *b, char errbuf[static SVC_ERRBUF_LEN])
{
    bool reflect = b->bo.o->descriptor_set != NULL;

    for (int k = 0; k < RPC__BUILTIN_COUNT; k++) {
        if (k == RPC__BUILTIN_REFLECT && !reflect)
            continue;
        b->handle[k] = grpc_server_register_method(b->bo.server, rpc__builtin_methods[k].path, NULL,
                                                   GRPC_SRM_PAYLOAD_NONE, 0);
        if (b->handle[k] == NULL) {
            svc_errbuf_set(errbuf, "cannot register %s", rpc__builtin_methods[k].path);
            return SVC_EINTERNAL;
        }
    }
    return SVC_OK;
}

svc_err_t rpc__builtin_new(const rpc__builtin_opts_t *bo, rpc__builtin_t **out,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    rpc__builtin_t *b = calloc(1, sizeof *b);
    svc_err_t err;

    *out = NULL;
    if (b == NULL)
        return SVC_ENOMEM;
    b->bo = *bo;
    err = register_methods(b, errbuf);
    if (err == SVC_OK)
        err = collect_names(b, errbuf);
    if (err == SVC_OK && bo->o->descriptor_set != NULL)
        err = rpc__reflect_new(bo->o->descriptor_set, bo->o->descriptor_set_len,
                               (const char *const *)b->names, b->n_names, &b->reflect, errbuf);
    if (err == SVC_OK) {
        b->health = rpc__health_new(bo->o->health, bo->o->health_ctx, (const char *const *)b->names,
                                    b->n_names, bo->mod);
        if (b->health == NULL)
            err = SVC_ENOMEM;
    }
    if (err != SVC_OK) {
        if (err == SVC_ENOMEM)
            svc_errbuf_set(errbuf, "built-in services: out of memory");
        rpc__builtin_free(b);
        return err;
    }
    /* Health checks and reflection are rare: this thread must not take the
     * poller role from the workers, who are woken per call anyway. */
    b->cq = rpc_cq_new_non_polling();
    grpc_server_register_completion_queue(bo->server, b->cq, NULL);
    *out = b;
    return SVC_OK;
}

svc_err_t rpc__builtin_start(rpc__builtin_t *b, char errbuf[static SVC_ERRBUF_LEN])
{
    for (int k = 0; k < RPC__BUILTIN_COUNT; k++)
        arm(b, k);
    if (pthread_create(&b->thread, NULL, builtin_main, b) != 0) {
        svc_errbuf_set(errbuf, "cannot start the built-in services' thread");
        return SVC_EUNAVAIL;
    }
    b->started = true;
    return SVC_OK;
}

void rpc__builtin_join(rpc__builtin_t *b)
{
    if (b != NULL && b->started) {
        pthread_join(b->thread, NULL);
        b->started = false;
    }
}

void rpc__builtin_free(rpc__builtin_t *b)
{
    if (b == NULL)
        return;
    rpc__builtin_join(b);
    if (b->cq != NULL) {
        grpc_event ev;
        if (!b->cq_shut)
            grpc_completion_queue_shutdown(b->cq);
        /* Requests armed but never started (a server that never ran) come
         * back failed once the server is destroyed, which the caller did. */
        while ((ev = grpc_completion_queue_next(b->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL))
                   .type != GRPC_QUEUE_SHUTDOWN)
            if (ev.type == GRPC_OP_COMPLETE)
                free_call(((btag_t *)ev.tag)->c);
        grpc_completion_queue_destroy(b->cq);
    }
    rpc__health_free(b->health);
    rpc__reflect_free(b->reflect);
    for (size_t i = 0; i < b->n_names; i++)
        free(b->names[i]);
    free(b->names);
    free(b);
}
