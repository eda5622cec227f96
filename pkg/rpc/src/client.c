/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c - a blocking unary gRPC call with protobuf-c messages.
 *
 * The six operations of a unary call go in one batch, which always
 * completes (at the latest at the deadline), so plucking with an infinite
 * timeout cannot hang. Each thread has its own pluck queue, created on first
 * use and destroyed when the thread exits.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>

#include "internal.h"

static pthread_key_t cq_key;
static pthread_once_t cq_once = PTHREAD_ONCE_INIT;

static void cq_destroy(void *p)
{
    grpc_completion_queue *cq = p;

    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
}

static void cq_key_create(void)
{
    pthread_key_create(&cq_key, cq_destroy);
}

static grpc_completion_queue *thread_cq(void)
{
    grpc_completion_queue *cq;

    pthread_once(&cq_once, cq_key_create);
    cq = pthread_getspecific(cq_key);
    if (cq == NULL) {
        cq = grpc_completion_queue_create_for_pluck(NULL);
        pthread_setspecific(cq_key, cq);
    }
    return cq;
}

void rpc_channel_opts_init(rpc_channel_opts_t *o)
{
    o->initial_reconnect_ms = RPC_DEFAULT_INITIAL_RECONNECT_MS;
    o->max_reconnect_ms = RPC_DEFAULT_MAX_RECONNECT_MS;
    o->max_message_bytes = RPC_DEFAULT_MAX_MESSAGE;
    o->own_connections = false;
}

/* Several addresses ("ipv4:a:1,b:2") or a name that may resolve to several
 * ("dns:///catalog:25051"): calls are spread over all of them, and an
 * address whose server answers NOT_SERVING (grpc.health.v1 Watch, which
 * every pkg/rpc server serves) gets none until it is SERVING again. A
 * single host:port keeps gRPC's default (pick_first, no health watch). */
static bool is_replicated(const char *target)
{
    return strchr(target, ',') != NULL || strncmp(target, "dns:", 4) == 0;
}

#define REPLICA_SERVICE_CONFIG                                                                     \
    "{\"loadBalancingConfig\":[{\"round_robin\":{}}],\"healthCheckConfig\":{\"serviceName\":\"\"}" \
    "}"

grpc_channel *rpc_channel_new(const char *target, const rpc_channel_opts_t *o)
{
    rpc_channel_opts_t def;
    grpc_arg args[7];
    grpc_channel_args ch_args = {5, args};
    grpc_channel_credentials *creds;
    grpc_channel *ch;

    if (o == NULL) {
        rpc_channel_opts_init(&def);
        o = &def;
    }
    /* gRPC's default reconnect backoff (1 s growing to 120 s) keeps a
     * restarted dependency unused for many seconds; see platform notes §3. */
    args[0] = (grpc_arg){GRPC_ARG_INTEGER,
                         (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                         {.integer = o->initial_reconnect_ms}};
    args[1] = (grpc_arg){GRPC_ARG_INTEGER,
                         (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                         {.integer = o->max_reconnect_ms}};
    args[2] = (grpc_arg){GRPC_ARG_INTEGER,
                         (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                         {.integer = o->max_message_bytes}};
    args[3] = (grpc_arg){GRPC_ARG_INTEGER,
                         (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
                         {.integer = o->max_message_bytes}};
    /* pkg/resilience is the one retry layer. gRPC's own (on by default
     * since 1.40) holds a copy of every call's metadata and message until
     * the answer's headers, in case it retries a call the server never
     * saw: copies and allocations on every call, retried or not
     * (docs/bench/history.md, "gRPC's retry layer off"). Such a call now fails
     * UNAVAILABLE, which pkg/resilience retries if the method is idempotent. */
    args[4] = (grpc_arg){GRPC_ARG_INTEGER, (char *)GRPC_ARG_ENABLE_RETRIES, {.integer = 0}};
    if (o->own_connections)
        args[ch_args.num_args++] = (grpc_arg){
            GRPC_ARG_INTEGER, (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, {.integer = 1}};
    if (is_replicated(target))
        args[ch_args.num_args++] = (grpc_arg){GRPC_ARG_STRING,
                                              (char *)GRPC_ARG_SERVICE_CONFIG,
                                              {.string = (char *)REPLICA_SERVICE_CONFIG}};
    creds = grpc_insecure_credentials_create();
    ch = grpc_channel_create(target, creds, &ch_args);
    grpc_channel_credentials_release(creds);
    return ch;
}

/* Copies the grpc-retry-pushback-ms trailer, if any, for pkg/resilience. */
static void keep_pushback(const grpc_metadata_array *trailers, rpc_result_t *res)
{
    const char *v;
    size_t n;

    res->has_pushback = rpc_md_find(trailers, "grpc-retry-pushback-ms", &v, &n);
    if (!res->has_pushback)
        return;
    /* A value too long to be a number stays visibly malformed. */
    if (n >= sizeof res->pushback)
        n = 1, v = "-";
    memcpy(res->pushback, v, n);
    res->pushback[n] = '\0';
}

/* The google.rpc.Status a failed call's server sent, as received; one too
 * long for the buffer is left out (rpc.h). */
static void keep_status_details(const grpc_metadata_array *trailers, rpc_result_t *res)
{
    const char *v;
    size_t n;

    if (res->err == SVC_OK || !rpc_md_find(trailers, RPC_STATUS_DETAILS_MD, &v, &n) ||
        n > sizeof res->details.bytes)
        return;
    memcpy(res->details.bytes, v, n);
    res->details.len = n;
}

/* The reply's header metadata that fits, but gRPC's own and binary (-bin)
 * entries. */
static void keep_header_md(const grpc_metadata_array *md, rpc_header_md_t *h)
{
    for (size_t i = 0; i < md->count; i++) {
        grpc_slice k = md->metadata[i].key, v = md->metadata[i].value;
        size_t kl = GRPC_SLICE_LENGTH(k), vl = GRPC_SLICE_LENGTH(v);
        const char *key = (const char *)GRPC_SLICE_START_PTR(k);

        if ((kl >= 5 && memcmp(key, "grpc-", 5) == 0) ||
            (kl == 12 && memcmp(key, "content-type", 12) == 0) ||
            (kl >= 4 && memcmp(key + kl - 4, "-bin", 4) == 0) ||
            memchr(GRPC_SLICE_START_PTR(v), '\0', vl) != NULL ||
            h->len + kl + vl + 2 > sizeof h->bytes)
            continue;
        memcpy(h->bytes + h->len, key, kl);
        h->bytes[h->len + kl] = '\0';
        memcpy(h->bytes + h->len + kl + 1, GRPC_SLICE_START_PTR(v), vl);
        h->bytes[h->len + kl + 1 + vl] = '\0';
        h->len += kl + vl + 2;
        h->n++;
    }
}

bool rpc_header_md_next(const rpc_header_md_t *h, size_t *pos, const char **key, const char **value)
{
    if (*pos >= h->len)
        return false;
    *key = h->bytes + *pos;
    *value = *key + strlen(*key) + 1;
    *pos += strlen(*key) + strlen(*value) + 2;
    return true;
}

static void result_set(rpc_result_t *res, grpc_status_code st, grpc_slice details,
                       const char *error_string)
{
    size_t n = GRPC_SLICE_LENGTH(details);

    res->grpc_status = (int)st;
    res->err = svc_err_from_grpc((int)st);
    if (n >= sizeof res->message)
        n = sizeof res->message - 1;
    memcpy(res->message, GRPC_SLICE_START_PTR(details), n);
    res->message[n] = '\0';
    if (n == 0 && st != GRPC_STATUS_OK && error_string != NULL)
        snprintf(res->message, sizeof res->message, "%s", error_string);
}

bool rpc_unary_start(rpc_unary_t *u, grpc_channel *ch, grpc_call *parent, grpc_completion_queue *cq,
                     const char *method, grpc_byte_buffer *send, const rpc_md_t *md, size_t n_md,
                     uint64_t deadline_ns, bool wait_for_ready, void *tag)
{
    grpc_op ops[6];

    memset(u, 0, sizeof *u);
    u->started_ns = svc_now_ns();
    u->send = send;
    if (send == NULL || n_md > RPC_UNARY_MAX_MD) {
        grpc_byte_buffer_destroy(send);
        return false;
    }
    for (size_t i = 0; i < n_md; i++) {
        u->md[i].key = grpc_slice_from_static_string(md[i].key);
        u->md[i].value = grpc_slice_from_static_string(md[i].value);
    }
    grpc_metadata_array_init(&u->initial_md);
    grpc_metadata_array_init(&u->trailers);
    u->status = GRPC_STATUS_UNKNOWN;
    u->details = grpc_empty_slice();
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = n_md;
    ops[0].data.send_initial_metadata.metadata = u->md;
    ops[0].flags = wait_for_ready ? GRPC_INITIAL_METADATA_WAIT_FOR_READY : 0;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = u->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->initial_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &u->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &u->trailers;
    ops[5].data.recv_status_on_client.status = &u->status;
    ops[5].data.recv_status_on_client.status_details = &u->details;
    ops[5].data.recv_status_on_client.error_string = &u->error_string;
    u->call = grpc_channel_create_call(ch, parent, GRPC_PROPAGATE_DEFAULTS, cq,
                                       grpc_slice_from_static_string(method), NULL,
                                       rpc_deadline_to_timespec(deadline_ns), NULL);
    if (grpc_call_start_batch(u->call, ops, SVC_COUNTOF(ops), tag, NULL) == GRPC_CALL_OK)
        return true;
    u->status = GRPC_STATUS_INTERNAL;
    rpc_unary_finish(u, NULL, NULL);
    return false;
}

ProtobufCMessage *rpc_unary_finish(rpc_unary_t *u, const ProtobufCMessageDescriptor *resp_desc,
                                   rpc_result_t *res)
{
    ProtobufCMessage *m = NULL;

    if (res != NULL) {
        memset(res, 0, sizeof *res);
        const char *v;
        size_t n;

        result_set(res, u->status, u->details, u->error_string);
        keep_pushback(&u->trailers, res);
        keep_status_details(&u->trailers, res);
        keep_header_md(&u->initial_md, &res->headers);
        res->dependency_failure =
            res->err != SVC_OK && rpc_md_find(&u->trailers, RPC_DEPENDENCY_FAILURE_MD, &v, &n);
        if (res->err == SVC_OK) {
            m = rpc_message_unpack(u->recv, resp_desc, NULL);
            if (m == NULL) {
                res->err = SVC_EINTERNAL;
                snprintf(res->message, sizeof res->message, "reply is not a valid %s",
                         resp_desc->name);
            }
        }
        res->elapsed_ns = svc_now_ns() - u->started_ns;
    }
    grpc_slice_unref(u->details);
    gpr_free((void *)u->error_string);
    grpc_metadata_array_destroy(&u->initial_md);
    grpc_metadata_array_destroy(&u->trailers);
    grpc_byte_buffer_destroy(u->send);
    grpc_byte_buffer_destroy(u->recv);
    grpc_call_unref(u->call);
    memset(u, 0, sizeof *u);
    return m;
}

svc_err_t rpc_call_unary(grpc_channel *ch, const char *method, const ProtobufCMessage *req,
                         const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                         const rpc_call_opts_t *o, rpc_result_t *res)
{
    grpc_completion_queue *cq = thread_cq();
    rpc_unary_t u;
    int tag;

    *resp = NULL;
    if (!rpc_unary_start(&u, ch, o->parent != NULL ? rpc_ctx_call(o->parent) : NULL, cq, method,
                         rpc_message_pack(req), o->md, o->n_md, o->deadline_ns, o->wait_for_ready,
                         &tag)) {
        memset(res, 0, sizeof *res);
        res->err = SVC_EINTERNAL;
        res->grpc_status = GRPC_STATUS_INTERNAL;
        snprintf(res->message, sizeof res->message,
                 "cannot start the call (%zu metadata entries, "
                 "at most %d)",
                 o->n_md, RPC_UNARY_MAX_MD);
        return res->err;
    }
    /* The batch always completes, at the latest at the deadline. */
    grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    *resp = rpc_unary_finish(&u, resp_desc, res);
    return res->err;
}
