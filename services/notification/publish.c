/* SPDX-License-Identifier: Apache-2.0 */
/* publish.c - order events become RabbitMQ jobs (publish.h). */
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "publish.h"

#define LOG "notification.publish"

struct ntf_publisher {
    const ntf_config_t *cfg;
    ntf_stats_t *stats;
    rmq_topology_t topo;
    rmq_conn_t *conn; /* NULL while disconnected */
};

svc_err_t ntf_connect(const ntf_config_t *cfg, const char *name, rmq_conn_t **out,
                      char errbuf[static SVC_ERRBUF_LEN])
{
    rmq_conn_opts_t o;
    rmq_topology_t t;
    svc_err_t err;

    ntf_config_conn_opts(cfg, name, &o);
    ntf_config_topology(cfg, &t);
    if ((err = rmq_conn_new(&o, out, errbuf)) != SVC_OK)
        return err;
    if ((err = rmq_topology_declare(*out, &t, errbuf)) != SVC_OK) {
        rmq_conn_free(*out);
        *out = NULL;
    }
    return err;
}

/* Connected (and the topology declared), or the stats say why not. The
 * state line is logged on a change only: a broker that stays down for an
 * hour is one line, not one per record. */
static svc_err_t ensure_conn(ntf_publisher_t *p, char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err;

    if (p->conn != NULL && rmq_conn_alive(p->conn))
        return SVC_OK;
    rmq_conn_free(p->conn);
    p->conn = NULL;
    err = ntf_connect(p->cfg, "notification-publisher", &p->conn, errbuf);
    if (err != SVC_OK) {
        if (atomic_exchange(&p->stats->publisher_up, false))
            svc_log_warn(LOG, "rabbitmq down, jobs wait on Kafka: %s", errbuf);
        ntf_stats_detail(p->stats, false, errbuf);
        return err;
    }
    if (!atomic_exchange(&p->stats->publisher_up, true))
        svc_log_info(LOG, "rabbitmq connected, topology %s declared", p->cfg->queue_base);
    ntf_stats_detail(p->stats, false, "");
    return SVC_OK;
}

svc_err_t ntf_publisher_new(const ntf_config_t *cfg, ntf_stats_t *stats, ntf_publisher_t **out)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ntf_publisher_t *p = calloc(1, sizeof *p);

    if (p == NULL)
        return SVC_ENOMEM;
    p->cfg = cfg;
    p->stats = stats;
    ntf_config_topology(cfg, &p->topo);
    atomic_store(&stats->publisher_up, true); /* so that a failure below is logged */
    (void)ensure_conn(p, errbuf);             /* down is fine: the first record retries */
    *out = p;
    return SVC_OK;
}

void ntf_publisher_free(ntf_publisher_t *p)
{
    if (p == NULL)
        return;
    rmq_conn_free(p->conn);
    free(p);
}

/* Publishes with a confirm; a connection found dead is replaced once, since
 * the broker may have closed an idle one (a restart, a missed heartbeat)
 * long before this record came. */
static svc_err_t publish(ntf_publisher_t *p, const rmq_message_t *m,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    svc_err_t err = SVC_EUNAVAIL;

    for (int pass = 0; pass < 2; pass++) {
        if ((err = ensure_conn(p, errbuf)) != SVC_OK)
            return err;
        err = rmq_publish(p->conn, &p->topo, m, errbuf);
        if (err == SVC_OK || rmq_conn_alive(p->conn))
            return err;
    }
    return err;
}

kfk_verdict_t ntf_publisher_handle(void *ctx, const kfk_record_t *r, char *reason)
{
    ntf_publisher_t *p = ctx;
    char errbuf[SVC_ERRBUF_LEN] = "", type[256] = "", req[256] = "";
    rmq_header_t h[2] = {{NTF_HDR_TYPE, type}, {"x-request-id", req}};
    rmq_message_t m = {.content_type = NTF_CONTENT_TYPE, .headers = h};
    char *body = NULL;
    size_t len = 0;
    svc_err_t err;

    switch (ntf_job_from_record(r, &body, &len, reason)) {
    case NTF_SKIP:
        atomic_fetch_add_explicit(&p->stats->skipped, 1, memory_order_relaxed);
        return KFK_HANDLED;
    case NTF_POISON:
        return KFK_POISON;
    case NTF_JOB:
        break;
    }
    kfk_record_header(r, "ce_type", type, sizeof type);
    m.n_headers = kfk_record_header(r, "x-request-id", req, sizeof req) && req[0] ? 2 : 1;
    m.body = body;
    m.body_len = len;
    m.message_id = r->ce_id;
    err = publish(p, &m, errbuf);
    free(body);
    if (err != SVC_OK) {
        atomic_fetch_add_explicit(&p->stats->publish_errors, 1, memory_order_relaxed);
        snprintf(reason, KFK_REASON_LEN, "job %.64s not published: %.160s", r->ce_id, errbuf);
        return KFK_RETRY;
    }
    atomic_fetch_add_explicit(&p->stats->published, 1, memory_order_relaxed);
    svc_log_debug(LOG, "job published id=%s type=%s", r->ce_id, type);
    return KFK_HANDLED;
}
