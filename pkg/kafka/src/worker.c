/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker.c - kfk_worker: one thread that drives one consumer until it is
 * stopped (contract in kafka/worker.h).
 *
 * Logging follows the relay's rule: one line when the state changes (the
 * first failure, a different failure, the recovery), never one per poll, so
 * a broker that is down for an hour costs three lines, not a million.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/worker.h"

/* How long one kfk_consumer_poll may wait for a record: also how soon the
 * thread notices a stop that arrives while it is idle (kfk_consumer_stop
 * wakes the poll at once anyway). */
#define WORKER_POLL_MS 500

struct kfk_worker {
    kfk_consumer_t *c;
    kfk_handler_fn handler; /* the service's, with its ctx */
    void *ctx;
    pthread_t thread;
    char module[64];
    char last_error[SVC_ERRBUF_LEN]; /* "" while healthy; thread-owned */
};

/* librdkafka's lines: warnings and errors become ours, the rest debug. */
static void on_log(void *ctx, int level, const char *facility, const char *text)
{
    const kfk_worker_t *w = ctx;

    if (level <= 3)
        svc_log_error(w->module, "librdkafka %s: %s", facility, text);
    else if (level == 4)
        svc_log_warn(w->module, "librdkafka %s: %s", facility, text);
    else
        svc_log_debug(w->module, "librdkafka %s: %s", facility, text);
}

/* The consumer passes one ctx to its handler and its on_log; the worker is
 * that ctx, and hands the service's own ctx on to the service's handler. */
static kfk_verdict_t handle(void *ctx, const kfk_record_t *r, char *reason)
{
    const kfk_worker_t *w = ctx;

    return w->handler(w->ctx, r, reason);
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
    if (err == SVC_OK) {
        if (w->last_error[0] != '\0')
            svc_log_info(w->module, "consumer recovered (was: %s)", w->last_error);
        w->last_error[0] = '\0';
        return;
    }
    if (!same_state(w->last_error, errbuf))
        svc_log_warn(w->module, "consumer: %s (%s); retrying, one line per change", errbuf,
                     svc_err_name(err));
    snprintf(w->last_error, sizeof w->last_error, "%s", errbuf);
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

svc_err_t kfk_worker_start(const kfk_consumer_opts_t *o, const char *log_module,
                           kfk_worker_t **out, char *errbuf)
{
    kfk_consumer_opts_t co = *o;
    kfk_worker_t *w;
    svc_err_t err;
    int rc;

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
    w->handler = o->handler;
    w->ctx = o->ctx;
    co.handler = o->handler != NULL ? handle : NULL; /* NULL: let validation name it */
    co.on_log = on_log;
    co.ctx = w;
    err = kfk_consumer_new(&co, &w->c, errbuf);
    if (err != SVC_OK) {
        free(w);
        return err;
    }
    rc = pthread_create(&w->thread, NULL, run, w);
    if (rc != 0) {
        svc_errbuf_set(errbuf, "kfk_worker_start: pthread_create: %s", strerror(rc));
        kfk_consumer_free(w->c);
        free(w);
        return SVC_EINTERNAL;
    }
    svc_log_info(w->module, "consumer started (group %s, brokers %s)", o->group_id, o->brokers);
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
    free(w);
}

const kfk_consumer_t *kfk_worker_consumer(const kfk_worker_t *w)
{
    return w->c;
}
