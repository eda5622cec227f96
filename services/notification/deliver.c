/* SPDX-License-Identifier: Apache-2.0 */
/* deliver.c - delivery threads: a job, a webhook, a verdict (deliver.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "deliver.h"
#include "job.h"
#include "publish.h"

#define LOG              "notification.deliver"
#define NEXT_WAIT_MS     250 /* how often an idle thread looks at the stop flag */
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS   5000

typedef struct worker {
    struct ntf_pool *pool;
    int index;
    pthread_t thread;
    bool started;
    rmq_consumer_t *consumer; /* NULL while disconnected */
    bool up;                  /* counted in stats->workers_up */
} worker_t;

struct ntf_pool {
    const ntf_config_t *cfg;
    rs_http_client_t *http;
    const whk_keyset_t *keys; /* every one signs: rotation */
    ntf_stats_t *stats;
    rmq_topology_t topo;
    atomic_bool stop;
    int n;
    worker_t w[];
};

/* Sleeps ms, or less when the pool is stopping. */
static void nap(struct ntf_pool *p, int ms)
{
    for (int left = ms; left > 0 && !atomic_load(&p->stop); left -= 50) {
        struct timespec ts = {0, (left < 50 ? left : 50) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void set_up(worker_t *w, bool up, const char *detail)
{
    if (!up && detail != NULL)
        ntf_stats_detail(w->pool->stats, true,
                         detail); /* the latest reason, also when still down */
    if (w->up == up)
        return;
    w->up = up;
    atomic_fetch_add(&w->pool->stats->workers_up, up ? 1 : -1);
    if (detail == NULL)
        return; /* stopping: nothing to tell */
    if (up)
        svc_log_info(LOG, "consuming worker=%d queue=%s.work", w->index, w->pool->cfg->queue_base);
    else
        svc_log_warn(LOG, "consumer lost worker=%d: %s", w->index, detail);
}

/* A consumer, or false after a failed try (logged on a change of state). */
static bool connect_consumer(worker_t *w)
{
    struct ntf_pool *p = w->pool;
    char errbuf[SVC_ERRBUF_LEN] = "", name[32];
    rmq_consumer_opts_t o;
    rmq_conn_t *c = NULL;
    svc_err_t err;

    snprintf(name, sizeof name, "notification-worker-%d", w->index);
    rmq_consumer_opts_init(&o);
    ntf_config_conn_opts(p->cfg, name, &o.conn);
    o.topology = &p->topo;
    o.prefetch = (int)p->cfg->prefetch;
    err = rmq_consumer_new(&o, &w->consumer, errbuf);
    if (err == SVC_ENOTFOUND && ntf_connect(p->cfg, name, &c, errbuf) == SVC_OK) {
        rmq_conn_free(c); /* the topology was missing: declared now */
        err = rmq_consumer_new(&o, &w->consumer, errbuf);
    }
    if (err != SVC_OK) {
        w->consumer = NULL;
        set_up(w, false, errbuf);
        return false;
    }
    set_up(w, true, "");
    return true;
}

static int header_int(const rmq_delivery_t *d, const char *name)
{
    const char *v = rmq_delivery_header(d, name);

    return v != NULL ? atoi(v) : 0;
}

/* One pass of the webhook chain for d. */
static void call_webhook(struct ntf_pool *p, const rmq_delivery_t *d, rs_http_result_t *res)
{
    const char *id = rmq_delivery_message_id(d), *ct = rmq_delivery_content_type(d);
    char ctype[300], idem[300];
    const char *lines[5];
    whk_headers_t wh;
    size_t len;
    const void *body = rmq_delivery_body(d, &len);
    rs_http_request_t req = {.method = "POST",
                             .url = p->cfg->webhook_url,
                             .headers = lines,
                             .n_headers = 5,
                             .body = body,
                             .body_len = len};

    memset(res, 0, sizeof *res);
    if (whk_headers_make_all(p->keys, id, (int64_t)time(NULL), body, len, &wh) != SVC_OK) {
        /* Not a usable webhook-id: the job itself is wrong, for good. */
        res->err = SVC_EINVAL;
        res->status = 400;
        res->reason = RS_REASON_NOT_RETRYABLE;
        snprintf(res->message, sizeof res->message, "message-id is not a usable webhook-id");
        return;
    }
    snprintf(ctype, sizeof ctype, "Content-Type: %s", ct[0] ? ct : NTF_CONTENT_TYPE);
    snprintf(idem, sizeof idem, "Idempotency-Key: %s", id);
    lines[0] = ctype;
    lines[1] = idem;
    lines[2] = wh.id;
    lines[3] = wh.timestamp;
    lines[4] = wh.signature;
    req.deadline_ns = svc_now_ns() + (uint64_t)p->cfg->job_deadline_ms * 1000000u;
    (void)rs_http_do(p->http, &req, res); /* the verdict is in *res */
}

/* Settles d after its pass; false when the consumer must be replaced. */
static bool settle(worker_t *w, rmq_delivery_t *d, const rs_http_result_t *res)
{
    struct ntf_pool *p = w->pool;
    char errbuf[SVC_ERRBUF_LEN] = "", reason[64];
    const char *id = rmq_delivery_message_id(d), *type = rmq_delivery_header(d, NTF_HDR_TYPE);
    ntf_next_t next = ntf_next_of(res);
    int attempts = header_int(d, RMQ_HDR_ATTEMPTS) + (int)res->attempts;
    unsigned tier = 0;
    svc_err_t err = SVC_OK;

    /* The reason is the pass's (attempts-exhausted, breaker-open, ...), also
     * for a job that has been through every tier. */
    ntf_dead_reason(res, next, reason, sizeof reason);
    if (next == NTF_RETRY &&
        (tier = rmq_tier_next(rmq_delivery_tier_passes(d), p->topo.n_tiers)) == 0)
        next = NTF_DEAD;
    switch (next) {
    case NTF_ACK:
        if ((err = rmq_consumer_ack(w->consumer, d, errbuf)) == SVC_OK) {
            atomic_fetch_add(&p->stats->delivered, 1);
            svc_log_info(LOG, "job delivered id=%s type=%s status=%d attempts=%d", id,
                         type != NULL ? type : "-", res->status, attempts);
        }
        break;
    case NTF_RETRY:
        if ((err = rmq_consumer_retry(w->consumer, d, tier, attempts, errbuf)) == SVC_OK) {
            atomic_fetch_add(&p->stats->retried[tier], 1);
            svc_log_warn(LOG,
                         "job to retry tier id=%s tier=%u delay_ms=%u reason=%s status=%d "
                         "attempts=%d: %s",
                         id, tier, p->topo.tier_delay_ms[tier - 1], reason, res->status, attempts,
                         res->message);
        }
        break;
    case NTF_DEAD: {
        rmq_dead_info_t why = {
            .final_reason = reason, .last_http_status = res->status, .attempts = attempts};
        if ((err = rmq_consumer_dead(w->consumer, d, &why, errbuf)) == SVC_OK) {
            atomic_fetch_add(&p->stats->dead_lettered, 1);
            svc_log_error(LOG, "job dead-lettered id=%s reason=%s status=%d attempts=%d: %s", id,
                          reason, res->status, attempts, res->message);
        }
        break;
    }
    case NTF_REQUEUE:
        atomic_fetch_add(&p->stats->requeued, 1);
        return true; /* unsettled: back to the queue when the consumer closes */
    }
    if (err != SVC_OK) {
        /* Not acked, so RabbitMQ hands it again: the receiver dedupes. */
        atomic_fetch_add(&p->stats->settle_errors, 1);
        svc_log_warn(LOG, "job not settled id=%s: %s", id, errbuf);
        return rmq_consumer_alive(w->consumer);
    }
    return true;
}

static void handle(worker_t *w, rmq_delivery_t *d)
{
    rs_http_result_t res;
    uint64_t t0 = svc_now_ns();

    call_webhook(w->pool, d, &res);
    ntf_stats_latency(w->pool->stats, (svc_now_ns() - t0) / 1000u);
    if (!settle(w, d, &res)) {
        rmq_consumer_free(w->consumer);
        w->consumer = NULL;
        set_up(w, false, "settling a job failed");
    }
    rs_http_result_dispose(&res);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    struct ntf_pool *p = w->pool;
    int backoff = BACKOFF_FIRST_MS;

    while (!atomic_load(&p->stop)) {
        char errbuf[SVC_ERRBUF_LEN] = "";
        rmq_delivery_t *d = NULL;
        svc_err_t err;

        if (w->consumer == NULL && !connect_consumer(w)) {
            nap(p, backoff);
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
            continue;
        }
        backoff = BACKOFF_FIRST_MS;
        err = rmq_consumer_next(w->consumer, NEXT_WAIT_MS, &d, errbuf);
        if (err == SVC_OK) {
            handle(w, d);
            rmq_delivery_free(d);
        } else if (err != SVC_ETIMEDOUT) {
            rmq_consumer_free(w->consumer);
            w->consumer = NULL;
            set_up(w, false, errbuf);
        }
    }
    rmq_consumer_free(w->consumer); /* prefetched jobs go back to the queue */
    w->consumer = NULL;
    set_up(w, false, NULL);
    return NULL;
}

svc_err_t ntf_pool_start(const ntf_config_t *cfg, rs_http_client_t *http, const whk_keyset_t *keys,
                         ntf_stats_t *stats, ntf_pool_t **out, char errbuf[static SVC_ERRBUF_LEN])
{
    int n = (int)cfg->workers;
    struct ntf_pool *p = calloc(1, sizeof *p + (size_t)n * sizeof p->w[0]);

    if (p == NULL)
        return SVC_ENOMEM;
    p->cfg = cfg;
    p->http = http;
    p->keys = keys;
    p->stats = stats;
    ntf_config_topology(cfg, &p->topo);
    atomic_init(&p->stop, false);
    p->n = n;
    for (int i = 0; i < n; i++) {
        p->w[i].pool = p;
        p->w[i].index = i;
        if (pthread_create(&p->w[i].thread, NULL, worker_main, &p->w[i]) != 0) {
            svc_errbuf_set(errbuf, "cannot start delivery thread %d", i);
            ntf_pool_stop(p);
            return SVC_EINTERNAL;
        }
        p->w[i].started = true;
    }
    *out = p;
    return SVC_OK;
}

void ntf_pool_stop(ntf_pool_t *p)
{
    if (p == NULL)
        return;
    atomic_store(&p->stop, true);
    for (int i = 0; i < p->n; i++)
        if (p->w[i].started)
            pthread_join(p->w[i].thread, NULL);
    free(p);
}
