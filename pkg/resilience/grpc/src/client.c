/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c - the gRPC binding: channels and an upstream per client, and one
 * thread for all clients (the driver) that drives async calls, their backoff
 * timers and each client's connectivity watch.
 *
 * The policy lives in the core (rs_call_*); this file only moves bytes and
 * time. Blocking calls run the core's own driver (rs_call_run) with
 * rpc_call_unary as the attempt; async calls run the same engine from
 * completion-queue events and timers.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/support/alloc.h>

#include "async.h"

/* ------------------------------------------------------------------------
 * The driver: one thread and one completion queue for every client of the
 * process. With gRPC's epoll1 engine every thread waiting on a completion
 * queue is a candidate poller, and the poller hands its role to another
 * waiting thread each time it returns with an event: with a thread per
 * client, the gateway's idle order client took the role from the catalog's
 * on every wake-up (a futex wake and two context switches; docs/bench/history.md,
 * "Issue 17: the GET path"). Callbacks run on this thread, so they must not
 * block (as before); a client's backoff timers stay its own.
 * ------------------------------------------------------------------------ */

struct rs__driver {
    grpc_completion_queue *cq;
    pthread_t thread;
    pthread_mutex_t mu; /* guards clients */
    rs_grpc_client_t *clients;
    int refs; /* clients using it; under g_driver_mu */
};

static pthread_mutex_t g_driver_mu = PTHREAD_MUTEX_INITIALIZER;
static rs__driver_t *g_driver;

bool rs__on_cq_add(rs_grpc_client_t *cl)
{
    bool ok;

    pthread_mutex_lock(&cl->mu);
    ok = !cl->stopping;
    cl->on_cq += ok;
    pthread_mutex_unlock(&cl->mu);
    return ok;
}

void rs__on_cq_done(rs_grpc_client_t *cl)
{
    pthread_mutex_lock(&cl->mu);
    if (--cl->on_cq == 0 && cl->stopping)
        pthread_cond_broadcast(&cl->idle);
    pthread_mutex_unlock(&cl->mu);
}

/* Keeps one connectivity watch pending on each channel at all times. Its
 * only job is to make the driver poll the channel, so reconnects are
 * processed as soon as they happen; try_to_connect=1 also wakes an idle
 * channel. */
static void watch(rs__lane_t *lane)
{
    rs_grpc_client_t *cl = lane->cl;

    pthread_mutex_lock(&cl->mu);
    if (!cl->stopping) {
        grpc_connectivity_state st = grpc_channel_check_connectivity_state(lane->ch, 1);
        atomic_store(&lane->connectivity, (int)st);
        cl->on_cq++;
        grpc_channel_watch_connectivity_state(
            lane->ch, st,
            rpc_deadline_to_timespec(svc_now_ns() + (uint64_t)cl->watch_ms * SVC_NS_PER_MS), cl->cq,
            (void *)((uintptr_t)lane | RS__WATCH_TAG_BIT));
    }
    pthread_mutex_unlock(&cl->mu);
}

/* The earliest backoff timer of any client. */
static gpr_timespec next_deadline(rs__driver_t *d)
{
    gpr_timespec t = gpr_inf_future(GPR_CLOCK_MONOTONIC);

    pthread_mutex_lock(&d->mu);
    for (rs_grpc_client_t *c = d->clients; c != NULL; c = c->next) {
        gpr_timespec ct = rs__timers_next_deadline(c);
        if (gpr_time_cmp(ct, t) < 0)
            t = ct;
    }
    pthread_mutex_unlock(&d->mu);
    return t;
}

static void fire_timers(rs__driver_t *d)
{
    pthread_mutex_lock(&d->mu);
    for (rs_grpc_client_t *c = d->clients; c != NULL; c = c->next)
        rs__timers_fire(c);
    pthread_mutex_unlock(&d->mu);
}

static void *driver_main(void *arg)
{
    rs__driver_t *d = arg;

    for (;;) {
        grpc_event ev = grpc_completion_queue_next(d->cq, next_deadline(d), NULL);
        uintptr_t tag = (uintptr_t)ev.tag;

        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type == GRPC_OP_COMPLETE && (tag & RS__WATCH_TAG_BIT) != 0) {
            rs__lane_t *lane = (rs__lane_t *)(tag & ~RS__WATCH_TAG_BIT);
            watch(lane);
            rs__on_cq_done(lane->cl);
        } else if (ev.type == GRPC_OP_COMPLETE) {
            rs__async_attempt_done(ev.tag);
        }
        fire_timers(d);
    }
    return NULL;
}

/* The process's driver, started by its first client; NULL if it cannot be. */
static rs__driver_t *driver_acquire(void)
{
    rs__driver_t *d;

    pthread_mutex_lock(&g_driver_mu);
    d = g_driver;
    if (d == NULL && (d = calloc(1, sizeof *d)) != NULL) {
        pthread_mutex_init(&d->mu, NULL);
        d->cq = grpc_completion_queue_create_for_next(NULL);
        if (d->cq == NULL || pthread_create(&d->thread, NULL, driver_main, d) != 0) {
            if (d->cq != NULL)
                grpc_completion_queue_destroy(d->cq);
            pthread_mutex_destroy(&d->mu);
            free(d);
            d = NULL;
        }
        g_driver = d;
    }
    if (d != NULL)
        d->refs++;
    pthread_mutex_unlock(&g_driver_mu);
    return d;
}

/* The last client gone: the thread is stopped and the queue destroyed. */
static void driver_release(rs__driver_t *d)
{
    pthread_mutex_lock(&g_driver_mu);
    if (--d->refs == 0) {
        grpc_completion_queue_shutdown(d->cq);
        pthread_join(d->thread, NULL);
        grpc_completion_queue_destroy(d->cq);
        pthread_mutex_destroy(&d->mu);
        free(d);
        g_driver = NULL;
    }
    pthread_mutex_unlock(&g_driver_mu);
}

static void driver_add(rs__driver_t *d, rs_grpc_client_t *cl)
{
    pthread_mutex_lock(&d->mu);
    cl->next = d->clients;
    d->clients = cl;
    pthread_mutex_unlock(&d->mu);
}

/* Off the list: the driver fires none of cl's timers any more. */
static void driver_remove(rs__driver_t *d, rs_grpc_client_t *cl)
{
    pthread_mutex_lock(&d->mu);
    for (rs_grpc_client_t **p = &d->clients; *p != NULL; p = &(*p)->next) {
        if (*p == cl) {
            *p = cl->next;
            break;
        }
    }
    pthread_mutex_unlock(&d->mu);
}

/* ------------------------------------------------------------------------
 * Client lifecycle
 * ------------------------------------------------------------------------ */

void rs_grpc_opts_init(rs_grpc_opts_t *o)
{
    memset(o, 0, sizeof *o);
    rs_upstream_opts_init(&o->upstream);
    rpc_channel_opts_init(&o->channel);
    o->watch_ms = RS_GRPC_DEFAULT_WATCH_MS;
    o->channels = 1;
}

/* The client's channels. With more than one, each makes connections of its
 * own: by default gRPC would give channels of the same target and settings
 * one shared connection. */
static svc_err_t open_lanes(rs_grpc_client_t *cl, const rs_grpc_opts_t *o)
{
    rpc_channel_opts_t co = o->channel;

    co.own_connections = co.own_connections || o->channels > 1;
    for (int i = 0; i < o->channels; i++) {
        cl->lane[i].cl = cl;
        cl->lane[i].ch = rpc_channel_new(o->target, &co);
        if (cl->lane[i].ch == NULL)
            return SVC_ENOMEM;
        cl->n_lanes = i + 1;
    }
    return SVC_OK;
}

svc_err_t rs_grpc_client_new(const rs_grpc_opts_t *o, rs_grpc_client_t **out,
                             char errbuf[static SVC_ERRBUF_LEN])
{
    rs_grpc_client_t *cl;
    svc_err_t err;

    *out = NULL;
    if (o->target == NULL || o->target[0] == '\0') {
        svc_errbuf_set(errbuf, "rs_grpc_client_new: target is required");
        return SVC_EINVAL;
    }
    if (o->channels < 1 || o->channels > RS_GRPC_MAX_CHANNELS) {
        svc_errbuf_set(errbuf, "rs_grpc_client_new: channels must be 1-%d (got %d)",
                       RS_GRPC_MAX_CHANNELS, o->channels);
        return SVC_EINVAL;
    }
    cl = calloc(1, sizeof *cl);
    if (cl == NULL)
        return SVC_ENOMEM;
    pthread_mutex_init(&cl->mu, NULL);
    pthread_cond_init(&cl->idle, NULL);
    cl->watch_ms = o->watch_ms;
    err = rs_upstream_new(&o->upstream, &cl->up, errbuf);
    if (err != SVC_OK)
        goto fail;
    err = open_lanes(cl, o);
    cl->driver = driver_acquire();
    if (err != SVC_OK || cl->driver == NULL) {
        svc_errbuf_set(errbuf, "cannot create the channels or thread for %s", o->target);
        err = SVC_ENOMEM;
        goto fail;
    }
    cl->cq = cl->driver->cq;
    driver_add(cl->driver, cl);
    for (int i = 0; cl->watch_ms > 0 && i < cl->n_lanes; i++)
        watch(&cl->lane[i]);
    *out = cl;
    return SVC_OK;
fail:
    rs_grpc_client_free(cl);
    return err;
}

void rs_grpc_client_free(rs_grpc_client_t *cl)
{
    if (cl == NULL)
        return;
    /* Destroying the channel completes the pending watch at once; the lock
     * keeps the driver from re-arming it on a channel being destroyed, and
     * from starting a retry on it. */
    pthread_mutex_lock(&cl->mu);
    cl->stopping = true;
    for (int i = 0; i < cl->n_lanes; i++) {
        grpc_channel_destroy(cl->lane[i].ch);
        cl->lane[i].ch = NULL;
    }
    pthread_mutex_unlock(&cl->mu);
    if (cl->driver != NULL) {
        driver_remove(cl->driver, cl);
        /* The watch's and every attempt's completion (a cancelled breaker
         * trial runs to its attempt deadline) must be handled before cl goes. */
        pthread_mutex_lock(&cl->mu);
        while (cl->on_cq > 0)
            pthread_cond_wait(&cl->idle, &cl->mu);
        pthread_mutex_unlock(&cl->mu);
    }
    rs__timers_dispose(cl);
    if (cl->driver != NULL)
        driver_release(cl->driver);
    rs_upstream_free(cl->up);
    pthread_cond_destroy(&cl->idle);
    pthread_mutex_destroy(&cl->mu);
    free(cl);
}

rs_upstream_t *rs_grpc_client_upstream(rs_grpc_client_t *cl)
{
    return cl->up;
}

const char *rs_grpc_client_connectivity(rs_grpc_client_t *cl)
{
    grpc_connectivity_state st = GRPC_CHANNEL_READY;

    for (int i = 0; i < cl->n_lanes && st == GRPC_CHANNEL_READY; i++)
        st = (grpc_connectivity_state)atomic_load(&cl->lane[i].connectivity);
    switch (st) {
    case GRPC_CHANNEL_IDLE:
        return "idle";
    case GRPC_CHANNEL_CONNECTING:
        return "connecting";
    case GRPC_CHANNEL_READY:
        return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
        return "transient-failure";
    case GRPC_CHANNEL_SHUTDOWN:
        return "shutdown";
    }
    return "unknown";
}

/* ------------------------------------------------------------------------
 * What both call styles share
 * ------------------------------------------------------------------------ */

grpc_channel *rs__channel(const rs_grpc_client_t *cl, const rs_grpc_call_opts_t *o)
{
    return cl->lane[o->lane % (unsigned)cl->n_lanes].ch;
}

void rs__result_fill(rs_grpc_client_t *cl, const rs_result_t *r, const char *last_message,
                     const rpc_status_details_t *last_details, const rpc_header_md_t *last_headers,
                     rs_grpc_result_t *res)
{
    /* What a server said comes only from an attempt that reached one. */
    res->headers.n = res->headers.len = 0;
    res->details.len = 0;
    if (r->attempts > 0) {
        rpc_header_md_copy(&res->headers, last_headers);
        if (r->err != SVC_OK)
            rpc_status_details_copy(&res->details, last_details);
    }
    res->err = r->err;
    res->reason = r->reason;
    res->attempts = r->attempts;
    /* The upstream's own hint (it shed the call: grpc-retry-pushback-ms), unless
     * our breaker or bulkhead refused, whose own wait is what counts then. */
    res->retry_after_ms = r->err != SVC_OK ? r->pushback_ms : 0;
    if (r->reason == RS_REASON_BREAKER_OPEN) {
        /* Before a retry the breaker may open too; either way the caller
         * learns when the next trial is due (HTTP Retry-After), at least
         * 1 ms: a refusal always says when to come back. */
        res->retry_after_ms = rs_upstream_ms_until_trial(cl->up);
        if (res->retry_after_ms == 0)
            res->retry_after_ms = 1;
        if (r->attempts == 0 || last_message == NULL || last_message[0] == '\0')
            last_message = "circuit open";
    } else if (r->reason == RS_REASON_BULKHEAD_FULL) {
        res->retry_after_ms = RS_GRPC_BULKHEAD_RETRY_AFTER_MS;
        if (r->attempts == 0 || last_message == NULL || last_message[0] == '\0')
            last_message = "bulkhead full";
    } else if (r->err != SVC_OK && (last_message == NULL || last_message[0] == '\0')) {
        last_message = svc_strerror(r->err);
    }
    snprintf(res->message, sizeof res->message, "%s", r->err == SVC_OK ? "" : last_message);
}

svc_err_t rs__server_cancel_is_unavailable(svc_err_t err)
{
    /* We never cancel a blocking attempt ourselves, so a CANCELLED here
     * came from the other side: gRPC 1.51 answers so for a call that
     * reached a server already shutting down (grpc/grpc#41785). That call
     * never ran; for the chain it is the dependency going away. */
    return err == SVC_ECANCELLED ? SVC_EUNAVAIL : err;
}

size_t rs__md_with_attempt(const rs_grpc_call_opts_t *o, uint32_t attempt, char *num, rpc_md_t *md)
{
    size_t n = o->n_md; /* <= RS_GRPC_MAX_MD: checked by both call styles */

    if (n > 0)
        memcpy(md, o->md, n * sizeof *md);
    /* gRFC A6: tell the server this is a retry, so its logs can say so. */
    if (attempt > 1) {
        snprintf(num, 12, "%u", attempt - 1);
        md[n].key = "grpc-previous-rpc-attempts";
        md[n++].value = num;
    }
    return n;
}

/* ------------------------------------------------------------------------
 * Blocking calls
 * ------------------------------------------------------------------------ */

typedef struct blocking {
    rs_grpc_client_t *cl;
    const char *method;
    const ProtobufCMessage *req;
    const ProtobufCMessageDescriptor *resp_desc;
    const rs_grpc_call_opts_t *o;
    ProtobufCMessage *resp;
    char message[SVC_ERRBUF_LEN];
    rpc_status_details_t details; /* that came with message */
    rpc_header_md_t headers;      /* of the last attempt's reply */
} blocking_t;

static void blocking_attempt(void *arg, const rs_attempt_t *at, rs_outcome_t *out)
{
    blocking_t *b = arg;
    rpc_md_t md[RS_GRPC_MAX_MD + 1];
    char num[12];
    rpc_call_opts_t co = {at->deadline_ns, b->o->parent, md, 0, false};
    rpc_result_t r;

    co.n_md = rs__md_with_attempt(b->o, at->number, num, md);
    rpc_call_unary(rs__channel(b->cl, b->o), b->method, b->req, b->resp_desc, &b->resp, &co, &r);
    memcpy(b->message, r.message, sizeof b->message);
    rpc_status_details_copy(&b->details, &r.details);
    rpc_header_md_copy(&b->headers, &r.headers);
    out->err = rs__server_cancel_is_unavailable(r.err);
    /* rpc_call_unary only ever sees our attempt deadline (a parent's earlier
     * deadline is part of it), so DEADLINE_EXCEEDED is "our timer fired";
     * the engine itself tells it apart from the caller's overall deadline. */
    out->attempt_timer_fired = r.err == SVC_ETIMEDOUT;
    out->dependency_failed = r.dependency_failure;
    out->pushback_ms =
        r.has_pushback ? rs_pushback_parse_grpc(r.pushback, strlen(r.pushback)) : RS_PUSHBACK_NONE;
    out->detail = b->message;
}

svc_err_t rs_grpc_call(rs_grpc_client_t *cl, const char *method, const ProtobufCMessage *req,
                       const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                       const rs_grpc_call_opts_t *o, rs_grpc_result_t *res)
{
    blocking_t b = {.cl = cl, .method = method, .req = req, .resp_desc = resp_desc, .o = o};
    uint64_t deadline = o->deadline_ns;
    rs_result_t r;
    svc_err_t err;

    if (o->n_md > RS_GRPC_MAX_MD) {
        memset(res, 0, sizeof *res);
        res->err = SVC_EINVAL;
        snprintf(res->message, sizeof res->message, "more than %d metadata entries",
                 RS_GRPC_MAX_MD);
        *resp = NULL;
        return SVC_EINVAL;
    }
    /* An incoming call's deadline bounds everything done on its behalf. */
    if (o->parent != NULL && rpc_ctx_deadline(o->parent) < deadline)
        deadline = rpc_ctx_deadline(o->parent);
    err = rs_call_run(cl->up, method, deadline, blocking_attempt, &b, &r);
    rs__result_fill(cl, &r, b.message, &b.details, &b.headers, res);
    if (err != SVC_OK && b.resp != NULL) {
        protobuf_c_message_free_unpacked(b.resp, NULL);
        b.resp = NULL;
    }
    *resp = b.resp;
    return res->err;
}
