/* SPDX-License-Identifier: Apache-2.0 */
/*
 * async.c - non-blocking calls: the same engine as rs_call_run, driven by
 * completion-queue events and backoff timers on the client's thread.
 *
 * Life of a call: rs_grpc_call_async() admits it and starts attempt 1 on the
 * caller's thread; every later step (attempt completion, decision, timer,
 * retry, done) happens on the client thread. A call has two references, the
 * engine's and (optionally) the caller's handle; whoever drops the last one
 * frees it, so a caller may cancel a call that has just completed.
 *
 * Two things end a call, and they are kept apart: the caller's answer
 * (done, delivered exactly once) and the engine's verdict (rs_call_finish).
 * Normally the verdict comes first and the answer right after it. A cancel
 * delivers the answer at once, on the cancelling thread; the verdict follows
 * on the client thread. For an ordinary attempt that is a wire cancel, which
 * the breaker ignores. A breaker TRIAL is not cancelled on the wire: it is
 * the one call the half-open breaker waits for, and if every caller that
 * gives up (a sibling line of an order failed, an HTTP client went away)
 * took its trial with it, the breaker would hand the permit on and on and
 * never hear that the upstream is back. So a cancelled trial runs to its own
 * end, bounded by its attempt deadline, and only the breaker hears it.
 */
#include <stdlib.h>
#include <string.h>

#include "async.h"

struct rs_grpc_async {
    rs_grpc_client_t *cl;
    rs_call_t rc;
    const char *method;
    const ProtobufCMessageDescriptor *resp_desc;
    rs_grpc_done_fn done;
    void *arg;
    atomic_int refs;

    grpc_byte_buffer *request; /* packed once, copied for every attempt */
    rs_grpc_call_opts_t o;     /* md points into md_copy */
    rpc_md_t md[RS_GRPC_MAX_MD];
    char *md_strings;

    pthread_mutex_t mu; /* guards the four flags below against rs_grpc_cancel */
    bool in_flight;     /* u.call is an attempt on the wire */
    bool cancelled;
    bool delivered;    /* done has been called (or is being called) */
    bool trial;        /* the breaker admitted it as a trial: never wire-cancelled */
    uint32_t attempts; /* started so far, for a cancelled caller's result */

    /* per attempt */
    rpc_unary_t u;
    rpc_md_t attempt_md[RS_GRPC_MAX_MD + 1];
    char attempt_num[12];
    char message[SVC_ERRBUF_LEN];
    rpc_status_details_t details; /* that came with message; len 0: message is ours */
    rpc_header_md_t headers;      /* of the last attempt's reply; n 0: none */

    uint64_t due_ns; /* backoff timer */
};

/* The call's last message is one of ours (text, a string literal): no
 * server's details go with it. */
static void say(rs_grpc_async_t *a, const char *text)
{
    snprintf(a->message, sizeof a->message, "%s", text);
    a->details.len = 0;
    a->headers.n = a->headers.len = 0;
}

static void unref(rs_grpc_async_t *a)
{
    if (atomic_fetch_sub(&a->refs, 1) != 1)
        return;
    grpc_byte_buffer_destroy(a->request);
    free(a->md_strings);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* Claims the right to call done: true exactly once per call. */
static bool claim_delivery(rs_grpc_async_t *a)
{
    bool mine;

    pthread_mutex_lock(&a->mu);
    mine = !a->delivered;
    a->delivered = true;
    pthread_mutex_unlock(&a->mu);
    return mine;
}

/* Ends the call: the engine's verdict, then the caller's answer unless a
 * cancel has already given it. */
static void complete(rs_grpc_async_t *a, ProtobufCMessage *resp)
{
    rs_grpc_result_t res;
    rs_result_t r;

    rs_call_finish(&a->rc, &r);
    if (r.err != SVC_OK && resp != NULL) {
        protobuf_c_message_free_unpacked(resp, NULL);
        resp = NULL;
    }
    if (claim_delivery(a)) {
        rs__result_fill(a->cl, &r, a->message, &a->details, &a->headers, &res);
        a->done(a->arg, &res, resp);
    } else if (resp != NULL) {
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    unref(a);
}

/* ------------------------------------------------------------------------
 * Timers (client thread only)
 * ------------------------------------------------------------------------ */

static void heap_swap(rs_grpc_async_t **h, size_t i, size_t j)
{
    rs_grpc_async_t *t = h[i];
    h[i] = h[j];
    h[j] = t;
}

static bool timer_add(rs_grpc_client_t *cl, rs_grpc_async_t *a)
{
    size_t i;

    if (cl->n_heap == cl->cap_heap) {
        size_t cap = cl->cap_heap ? cl->cap_heap * 2 : 64;
        rs_grpc_async_t **h = realloc(cl->heap, cap * sizeof *h);
        if (h == NULL)
            return false;
        cl->heap = h;
        cl->cap_heap = cap;
    }
    i = cl->n_heap++;
    cl->heap[i] = a;
    while (i > 0 && cl->heap[(i - 1) / 2]->due_ns > cl->heap[i]->due_ns) {
        heap_swap(cl->heap, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    return true;
}

static rs_grpc_async_t *timer_pop(rs_grpc_client_t *cl)
{
    rs_grpc_async_t *top = cl->heap[0];
    size_t i = 0;

    cl->heap[0] = cl->heap[--cl->n_heap];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < cl->n_heap && cl->heap[l]->due_ns < cl->heap[m]->due_ns)
            m = l;
        if (r < cl->n_heap && cl->heap[r]->due_ns < cl->heap[m]->due_ns)
            m = r;
        if (m == i)
            break;
        heap_swap(cl->heap, i, m);
        i = m;
    }
    return top;
}

gpr_timespec rs__timers_next_deadline(rs_grpc_client_t *cl)
{
    if (cl->n_heap == 0)
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    return rpc_deadline_to_timespec(cl->heap[0]->due_ns);
}

static void start_attempt(rs_grpc_async_t *a);

void rs__timers_fire(rs_grpc_client_t *cl)
{
    uint64_t now = svc_now_ns();

    while (cl->n_heap > 0 && cl->heap[0]->due_ns <= now)
        start_attempt(timer_pop(cl));
}

void rs__timers_dispose(rs_grpc_client_t *cl)
{
    /* Calls still waiting out a backoff when the client goes away end as
     * cancelled, so their callers hear back. */
    while (cl->n_heap > 0) {
        rs_grpc_async_t *a = timer_pop(cl);
        say(a, "client shut down");
        complete(a, NULL);
    }
    free(cl->heap);
}

/* ------------------------------------------------------------------------
 * Attempts
 * ------------------------------------------------------------------------ */

static bool start_batch(rs_grpc_async_t *a, uint64_t deadline_ns, uint32_t number)
{
    size_t n = rs__md_with_attempt(&a->o, number, a->attempt_num, a->attempt_md);
    bool started;

    pthread_mutex_lock(&a->mu);
    if (a->cancelled) {
        pthread_mutex_unlock(&a->mu);
        say(a, "cancelled by the caller");
        return false;
    }
    /* A retry due after the client began to go away: its channel is gone. */
    if (!rs__on_cq_add(a->cl)) {
        pthread_mutex_unlock(&a->mu);
        say(a, "client shut down");
        return false;
    }
    started =
        rpc_unary_start(&a->u, rs__channel(a->cl, &a->o), NULL, a->cl->cq, a->method,
                        grpc_byte_buffer_copy(a->request), a->attempt_md, n, deadline_ns, false, a);
    a->in_flight = started;
    a->attempts = number;
    pthread_mutex_unlock(&a->mu);
    if (!started) {
        rs__on_cq_done(a->cl);
        say(a, "cannot start the call");
    }
    return started;
}

/* Starts a retry, or ends the call if the engine says no (deadline,
 * breaker opened meanwhile, bulkhead full). */
static void start_attempt(rs_grpc_async_t *a)
{
    uint64_t deadline;
    bool cancelled;

    /* Cancelled while waiting out the backoff: end it here, before the
     * engine counts an attempt, takes a bulkhead slot or a breaker trial. */
    pthread_mutex_lock(&a->mu);
    cancelled = a->cancelled;
    pthread_mutex_unlock(&a->mu);
    if (cancelled) {
        say(a, "cancelled by the caller");
        complete(a, NULL);
        return;
    }
    if (rs_call_attempt(&a->rc, &deadline) != SVC_OK) {
        complete(a, NULL);
        return;
    }
    if (!start_batch(a, deadline, rs_call_attempts(&a->rc)))
        complete(a, NULL);
}

/* Turns a finished attempt into an outcome (and a reply, on success). */
static ProtobufCMessage *collect(rs_grpc_async_t *a, rs_outcome_t *o)
{
    rpc_result_t r;
    ProtobufCMessage *resp = rpc_unary_finish(&a->u, a->resp_desc, &r);

    memcpy(a->message, r.message, sizeof a->message);
    rpc_status_details_copy(&a->details, &r.details);
    rpc_header_md_copy(&a->headers, &r.headers);
    o->err = r.err;
    o->attempt_timer_fired = r.err == SVC_ETIMEDOUT;
    o->dependency_failed = r.dependency_failure;
    o->pushback_ms =
        r.has_pushback ? rs_pushback_parse_grpc(r.pushback, strlen(r.pushback)) : RS_PUSHBACK_NONE;
    o->detail = a->message;
    return resp;
}

/* Returns the call's client: the call may be gone when this returns. */
static rs_grpc_client_t *attempt_done(rs_grpc_async_t *a)
{
    rs_outcome_t o = RS_OUTCOME_INIT;
    rs_grpc_client_t *cl;
    ProtobufCMessage *resp;
    rs_decision_t d;
    bool cancelled;

    pthread_mutex_lock(&a->mu);
    a->in_flight = false;
    cancelled = a->cancelled;
    cl = a->cl;
    pthread_mutex_unlock(&a->mu);
    resp = collect(a, &o);
    if (cancelled && !a->trial) {
        say(a, "cancelled by the caller");
        complete(a, resp); /* finish before a verdict: reason cancelled */
        return cl;
    }
    /* Not cancelled by us: an ordinary attempt we cancel is handled above,
     * and a trial is never cancelled on the wire. */
    o.err = rs__server_cancel_is_unavailable(o.err);
    d = rs_call_end_attempt(&a->rc, &o);
    if (d.action == RS_RETRY && !cancelled) {
        a->due_ns = svc_now_ns() + (uint64_t)d.delay_ms * SVC_NS_PER_MS;
        if (timer_add(cl, a))
            return cl;
        say(a, "out of memory scheduling a retry");
    }
    complete(a, d.action == RS_DONE ? resp : NULL);
    if (d.action != RS_DONE && resp != NULL)
        protobuf_c_message_free_unpacked(resp, NULL);
    return cl;
}

/* The attempt's completion; its client hears afterwards that it was
 * handled (the call itself may be gone by then). */
void rs__async_attempt_done(rs_grpc_async_t *a)
{
    rs__on_cq_done(attempt_done(a));
}

/* ------------------------------------------------------------------------
 * Public entry points
 * ------------------------------------------------------------------------ */

/* Copies the caller's metadata into one allocation owned by the call. */
static bool copy_md(rs_grpc_async_t *a, const rs_grpc_call_opts_t *o)
{
    size_t n = o->n_md < RS_GRPC_MAX_MD ? o->n_md : RS_GRPC_MAX_MD, total = 0, off = 0;

    for (size_t i = 0; i < n; i++)
        total += strlen(o->md[i].key) + strlen(o->md[i].value) + 2;
    a->md_strings = malloc(total ? total : 1);
    if (a->md_strings == NULL)
        return false;
    for (size_t i = 0; i < n; i++) {
        size_t kl = strlen(o->md[i].key) + 1, vl = strlen(o->md[i].value) + 1;
        a->md[i].key = memcpy(a->md_strings + off, o->md[i].key, kl);
        a->md[i].value = memcpy(a->md_strings + off + kl, o->md[i].value, vl);
        off += kl + vl;
    }
    a->o = *o;
    a->o.md = a->md;
    a->o.n_md = n;
    a->o.parent = NULL;
    return true;
}

static rs_grpc_async_t *async_new(rs_grpc_client_t *cl, const char *method,
                                  const ProtobufCMessage *req,
                                  const ProtobufCMessageDescriptor *resp_desc,
                                  const rs_grpc_call_opts_t *o)
{
    rs_grpc_async_t *a = calloc(1, sizeof *a);

    if (a == NULL)
        return NULL;
    a->cl = cl;
    a->method = method;
    a->resp_desc = resp_desc;
    pthread_mutex_init(&a->mu, NULL);
    a->request = rpc_message_pack(req);
    if (a->request == NULL || !copy_md(a, o)) {
        grpc_byte_buffer_destroy(a->request);
        pthread_mutex_destroy(&a->mu);
        free(a);
        return NULL;
    }
    return a;
}

svc_err_t rs_grpc_call_async(rs_grpc_client_t *cl, const char *method, const ProtobufCMessage *req,
                             const ProtobufCMessageDescriptor *resp_desc,
                             const rs_grpc_call_opts_t *o, rs_grpc_done_fn done, void *arg,
                             rs_grpc_async_t **handle, rs_grpc_result_t *res)
{
    rs_grpc_async_t *a;
    rs_result_t r;
    uint64_t deadline;
    svc_err_t err;

    if (handle != NULL)
        *handle = NULL;
    if (o->n_md > RS_GRPC_MAX_MD) {
        memset(res, 0, sizeof *res);
        res->err = SVC_EINVAL;
        snprintf(res->message, sizeof res->message, "more than %d metadata entries",
                 RS_GRPC_MAX_MD);
        return SVC_EINVAL;
    }
    a = async_new(cl, method, req, resp_desc, o);
    if (a == NULL) {
        memset(res, 0, sizeof *res);
        res->err = SVC_ENOMEM;
        snprintf(res->message, sizeof res->message, "out of memory");
        return SVC_ENOMEM;
    }
    /* Everything the client thread needs is in place before the first
     * attempt starts: its completion may arrive before we return. */
    a->done = done;
    a->arg = arg;
    atomic_store(&a->refs, handle != NULL ? 2 : 1);
    err = rs_call_begin(cl->up, method, o->deadline_ns, &a->rc);
    a->trial = err == SVC_OK && rs_call_is_trial(&a->rc); /* published by start_batch's lock */
    if (err == SVC_OK)
        err = rs_call_attempt(&a->rc, &deadline);
    if (err == SVC_OK) {
        if (start_batch(a, deadline, 1)) {
            if (handle != NULL)
                *handle = a;
            return SVC_OK;
        }
        err = SVC_EINTERNAL;
    }
    /* Rejected before anything is in flight: answer synchronously and never
     * call done (the libuv rule). */
    rs_call_finish(&a->rc, &r);
    rs__result_fill(cl, &r, a->message, &a->details, &a->headers, res);
    if (res->err == SVC_OK)
        res->err = err;
    atomic_store(&a->refs, 1);
    unref(a);
    return res->err != SVC_OK ? res->err : err;
}

/* The caller's answer to a cancel: it gave up, so it hears "cancelled"
 * whatever the attempt on the wire comes to. */
static void answer_cancelled(rs_grpc_async_t *h, uint32_t attempts)
{
    rs_grpc_result_t res;

    memset(&res, 0, sizeof res);
    res.err = SVC_ECANCELLED;
    res.reason = RS_REASON_CANCELLED;
    res.attempts = attempts;
    snprintf(res.message, sizeof res.message, "cancelled by the caller");
    h->done(h->arg, &res, NULL);
}

void rs_grpc_cancel(rs_grpc_async_t *h)
{
    bool answer, trial_on_wire;
    uint32_t attempts;

    pthread_mutex_lock(&h->mu);
    h->cancelled = true;
    trial_on_wire = h->in_flight && h->trial;
    if (h->in_flight && !h->trial)
        grpc_call_cancel(h->u.call, NULL);
    answer = !h->delivered;
    h->delivered = true;
    attempts = h->attempts;
    pthread_mutex_unlock(&h->mu);
    if (trial_on_wire)
        svc_log_debug(RS__GRPC_LOG_MODULE,
                      "%s: caller gave up on a breaker trial; it runs on to its verdict",
                      h->method);
    if (answer)
        answer_cancelled(h, attempts);
    unref(h);
}

void rs_grpc_release(rs_grpc_async_t *h)
{
    unref(h);
}
