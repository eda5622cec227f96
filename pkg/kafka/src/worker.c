/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker.c - kfk_worker: one thread that drives one consumer until it is
 * stopped (contract in kafka/worker.h).
 *
 * Logging follows the relay's rule: one line when the state changes (the
 * first failure, a different failure, the recovery), never one per poll, so
 * a broker that is down for an hour costs three lines, not a million.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kafka/worker.h"

/* How long one kfk_consumer_poll may wait for a record: also how soon the
 * thread notices a stop that arrives while it is idle (kfk_consumer_stop
 * wakes the poll at once anyway). */
#define WORKER_POLL_MS 500

struct kfk_worker {
    kfk_consumer_t *c;
    kfk_handler_fn handler;       /* the service's, with its ctx */
    const kfk_batch_ops_t *batch; /* the service's; NULL when none */
    kfk_batch_ops_t ops;          /* forwarders to batch with ctx */
    void *ctx;
    pthread_t thread;
    char module[64];
    pthread_mutex_t mu;              /* guards last_error against readers   */
    char last_error[SVC_ERRBUF_LEN]; /* "" while healthy; written by run()  */
};

/* librdkafka's own lines are detail (it logs every failed connect, each
 * reconnect, as an error): the consumer's errors reach note_result through
 * kfk_consumer_poll, one line per change. As the relay does. */
static void on_log(void *ctx, int level, const char *facility, const char *text)
{
    const kfk_worker_t *w = ctx;

    (void)level;
    svc_log_debug(w->module, "librdkafka %s: %s", facility, text);
}

/* The consumer passes one ctx to its handler and its on_log; the worker is
 * that ctx, and hands the service's own ctx on to the service's handler. */
static kfk_verdict_t handle(void *ctx, const kfk_record_t *r, char *reason)
{
    const kfk_worker_t *w = ctx;

    return w->handler(w->ctx, r, reason);
}

static svc_err_t tx_begin(void *ctx, uint64_t deadline_ms, char errbuf[static SVC_ERRBUF_LEN])
{
    const kfk_worker_t *w = ctx;

    return w->batch->begin(w->ctx, deadline_ms, errbuf);
}

static svc_err_t tx_commit(void *ctx, uint64_t deadline_ms, char errbuf[static SVC_ERRBUF_LEN])
{
    const kfk_worker_t *w = ctx;

    return w->batch->commit(w->ctx, deadline_ms, errbuf);
}

static void tx_rollback(void *ctx)
{
    const kfk_worker_t *w = ctx;

    w->batch->rollback(w->ctx);
}

/* One line per change: the text of a failure is compared without the
 * digits, so "retry 3 of ..." and "retry 4 of ..." are one state. */
static bool same_state(const char *a, const char *b)
{
    for (;; a++, b++) {
        while (*a >= '0' && *a <= '9')
            a++;
        while (*b >= '0' && *b <= '9')
            b++;
        if (*a != *b)
            return false;
        if (*a == '\0')
            return true;
    }
}

static void note_result(kfk_worker_t *w, svc_err_t err, const char *errbuf)
{
    if (err == SVC_OK && w->last_error[0] == '\0')
        return; /* the common case: no lock */
    if (err == SVC_OK)
        svc_log_info(w->module, "consumer recovered (was: %s)", w->last_error);
    else if (!same_state(w->last_error, errbuf))
        svc_log_warn(w->module, "consumer: %s (%s); retrying, one line per change", errbuf,
                     svc_err_name(err));
    pthread_mutex_lock(&w->mu);
    snprintf(w->last_error, sizeof w->last_error, "%s", err == SVC_OK ? "" : errbuf);
    pthread_mutex_unlock(&w->mu);
}

static void *run(void *arg)
{
    kfk_worker_t *w = arg;
    char errbuf[SVC_ERRBUF_LEN];
    svc_err_t err;

    for (;;) {
        errbuf[0] = '\0';
        err = kfk_consumer_poll(w->c, WORKER_POLL_MS, NULL, errbuf);
        if (err == SVC_ECANCELLED)
            break;
        note_result(w, err, errbuf);
    }
    return NULL;
}

svc_err_t kfk_worker_start(const kfk_consumer_opts_t *o, const char *log_module, kfk_worker_t **out,
                           char errbuf[static SVC_ERRBUF_LEN])
{
    kfk_consumer_opts_t co = *o;
    kfk_worker_t *w;
    svc_err_t err;
    int rc = 0;

    *out = NULL;
    if (o->on_log != NULL) {
        svc_errbuf_set(errbuf, "kfk_worker_start: on_log must be NULL (the worker logs)");
        return SVC_EINVAL;
    }
    w = calloc(1, sizeof *w);
    if (w == NULL) {
        svc_errbuf_set(errbuf, "kfk_worker_start: out of memory");
        return SVC_ENOMEM;
    }
    snprintf(w->module, sizeof w->module, "%s", log_module != NULL ? log_module : "kafka");
    pthread_mutex_init(&w->mu, NULL);
    w->handler = o->handler;
    w->ctx = o->ctx;
    co.handler = o->handler != NULL ? handle : NULL; /* NULL: let validation name it */
    co.on_log = on_log;
    co.ctx = w;
    if (o->batch != NULL) {
        w->batch = o->batch;
        w->ops = (kfk_batch_ops_t){tx_begin, tx_commit, tx_rollback};
        co.batch = &w->ops;
    }
    err = kfk_consumer_new(&co, &w->c, errbuf);
    if (err == SVC_OK && (rc = pthread_create(&w->thread, NULL, run, w)) != 0) {
        svc_errbuf_set(errbuf, "kfk_worker_start: pthread_create: %s", strerror(rc));
        kfk_consumer_free(w->c);
        err = SVC_EINTERNAL;
    }
    if (err != SVC_OK) {
        pthread_mutex_destroy(&w->mu);
        free(w);
        return err;
    }
    svc_log_info(w->module,
                 "consumer started (group %s, %s%s, session %d ms, brokers %s, up to %u "
                 "records per %s)",
                 o->group_id, o->group_instance_id != NULL ? "static member " : "dynamic member",
                 o->group_instance_id != NULL ? o->group_instance_id : "", o->session_timeout_ms,
                 o->brokers, o->batch_max, o->batch != NULL ? "transaction" : "poll");
    *out = w;
    return SVC_OK;
}

void kfk_worker_stop(kfk_worker_t *w)
{
    char errbuf[SVC_ERRBUF_LEN] = "";

    if (w == NULL)
        return;
    kfk_consumer_stop(w->c);
    pthread_join(w->thread, NULL);
    if (kfk_consumer_close(w->c, errbuf) != SVC_OK)
        svc_log_warn(w->module, "consumer close: %s", errbuf);
    else
        svc_log_info(w->module, "consumer stopped: offsets committed, group left");
    kfk_consumer_free(w->c);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

svc_err_t kfk_worker_start_cfg(const kfk_worker_cfg_t *cfg, const char *const *topics,
                               const char *client_id, const kfk_worker_handler_t *h,
                               const char *log_module, const char *without, kfk_worker_t **out,
                               char errbuf[static SVC_ERRBUF_LEN])
{
    kfk_consumer_opts_t o;
    char host[KFK_CONSUMER_INSTANCE_ID_MAX + 2] = "";

    *out = NULL;
    if (strcmp(cfg->brokers, "none") == 0) {
        svc_log_warn(log_module, "%s", without);
        return SVC_OK;
    }
    kfk_consumer_opts_init(&o);
    o.brokers = cfg->brokers;
    o.group_id = cfg->group;
    if (strcmp(cfg->instance_id, KFK_WORKER_INSTANCE_HOSTNAME) == 0) {
        /* One byte more than an id may have: a longer name is then cut to
         * one that validation refuses, not to another host's id. */
        if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
            svc_errbuf_set(errbuf, "kafka consumer: gethostname: %s (set the instance id)",
                           strerror(errno));
            return SVC_EINVAL;
        }
        o.group_instance_id = host;
    } else if (strcmp(cfg->instance_id, "none") != 0) {
        o.group_instance_id = cfg->instance_id;
    }
    o.topics = topics;
    o.client_id = client_id;
    o.session_timeout_ms = (int)cfg->session_timeout_ms;
    o.batch_max = (unsigned)cfg->batch_max;
    o.commit_interval_ms = (int)cfg->commit_interval_ms;
    o.batch = h->batch;
    o.handler = h->fn;
    o.ctx = h->ctx;
    return kfk_worker_start(&o, log_module, out, errbuf);
}

bool kfk_worker_healthy(kfk_worker_t *w, char *why, size_t len)
{
    bool ok;

    pthread_mutex_lock(&w->mu);
    ok = w->last_error[0] == '\0';
    snprintf(why, len, "%s", w->last_error);
    pthread_mutex_unlock(&w->mu);
    return ok;
}

char *kfk_worker_metrics_text(kfk_worker_t *w, const char *prefix)
{
    size_t cap = 8192, need;
    char *text;

    /* The lag lines can grow between two calls (a rebalance): until it fits. */
    for (;;) {
        if ((text = malloc(cap)) == NULL)
            return NULL;
        need = kfk_consumer_metrics(w->c, prefix, text, cap);
        if (need < cap)
            return text;
        free(text);
        cap = need + 1024;
    }
}
