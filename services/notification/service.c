/* SPDX-License-Identifier: Apache-2.0 */
/* service.c - the notification service's wiring (service.h). */
#include <stdlib.h>
#include <string.h>

#include "admin/admin.h"
#include "deliver.h"
#include "job.h"
#include "kafka/worker.h"
#include "publish.h"
#include "service.h"
#include "stats.h"

#define LOG "notification"

struct ntf_service {
    const ntf_config_t *cfg;
    ntf_stats_t stats;
    whk_keyset_t keys;
    rs_http_client_t *http;
    ntf_publisher_t *publisher;
    kfk_worker_t *events; /* NULL with NOTIFY_KAFKA_BROKERS=none */
    ntf_pool_t *pool;
    admin_server_t *admin;
};

static svc_err_t http_new(const ntf_config_t *cfg, rs_http_client_t **out,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    rs_http_opts_t o;

    rs_http_opts_init(&o);
    o.name = "webhook";
    o.upstream.policy.attempt_timeout_ms = (uint32_t)cfg->attempt_timeout_ms;
    o.upstream.policy.max_attempts = (uint32_t)cfg->max_attempts;
    o.upstream.breaker.failures = (uint32_t)cfg->breaker_failures;
    o.upstream.breaker.cooldown_ms = (uint32_t)cfg->breaker_cooldown_ms;
    /* Every delivery thread has at most one request in flight. */
    o.max_in_flight = (uint32_t)cfg->workers;
    o.default_deadline_ms = (uint32_t)cfg->job_deadline_ms;
    o.user_agent = "shopmicro-notification";
    return rs_http_client_new(&o, out, errbuf);
}

static void metrics(void *ctx, admin_buf_t *out)
{
    ntf_service_t *s = ctx;
    static char buf[1 << 16];
    size_t len = 0;
    char *text;

    ntf_stats_render(&s->stats, s->cfg->tiers, s->cfg->n_tiers, out);
    if (rs_http_client_metrics(s->http, buf, sizeof buf, &len) == SVC_OK)
        admin_buf_printf(out, "%.*s", (int)len, buf);
    else /* said on the page, not dropped: a scrape without them must show why */
        admin_buf_printf(out, "# the webhook client's metrics do not fit in %zu bytes\n",
                         sizeof buf);
    if (s->events != NULL &&
        (text = kfk_worker_metrics_text(s->events, "shopmicro_notification_consumer"))) {
        admin_buf_printf(out, "%s", text);
        free(text);
    }
}

static bool ready(void *ctx, admin_buf_t *out)
{
    ntf_service_t *s = ctx;
    char why[SVC_ERRBUF_LEN] = "";
    bool kafka = s->events == NULL || kfk_worker_healthy(s->events, why, sizeof why);
    bool webhook = rs_http_client_breaker_state(s->http, s->cfg->webhook_url) != RS_BREAKER_OPEN;
    bool rabbit;

    /* The status line comes first, so the body is built in two parts. */
    admin_buf_printf(
        out, "{\"checks\":[{\"name\":\"kafka\",\"ok\":%s,\"detail\":", kafka ? "true" : "false");
    admin_buf_json_str(out, s->events == NULL ? "off (NOTIFY_KAFKA_BROKERS=none)" : why);
    admin_buf_printf(out, "},");
    rabbit = ntf_stats_ready_checks(&s->stats, out, true);
    /* An open breaker is shown, not counted: the service still queues jobs. */
    admin_buf_printf(out, ",{\"name\":\"webhook-breaker\",\"ok\":%s,\"detail\":\"%s\"}],",
                     webhook ? "true" : "false",
                     webhook ? "" : "open: jobs wait in the retry tiers");
    admin_buf_printf(out, "\"status\":\"%s\"}\n", kafka && rabbit ? "ok" : "unavailable");
    return kafka && rabbit;
}

static svc_err_t start_events(ntf_service_t *s, char errbuf[static SVC_ERRBUF_LEN])
{
    static const char *const topics[] = {NTF_TOPIC, NULL};
    kfk_worker_handler_t h = {.fn = ntf_publisher_handle, .ctx = s->publisher};

    return kfk_worker_start_cfg(&s->cfg->events, topics, "notification", &h, LOG,
                                "no order event becomes a notification", &s->events, errbuf);
}

svc_err_t ntf_service_start(const ntf_config_t *cfg, ntf_service_t **out,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    ntf_service_t *s = calloc(1, sizeof *s);
    char url[SVC_CFG_STR_MAX];
    svc_err_t err;

    if (s == NULL)
        return SVC_ENOMEM;
    s->cfg = cfg;
    ntf_stats_init(&s->stats, (int)cfg->workers);
    err = whk_keyset_load("NOTIFY_WEBHOOK_SECRET", cfg->webhook_secret, cfg->webhook_secret_file,
                          &s->keys, errbuf);
    if (err == SVC_OK)
        err = http_new(cfg, &s->http, errbuf);
    if (err == SVC_OK)
        err = ntf_publisher_new(cfg, &s->stats, &s->publisher);
    if (err == SVC_OK)
        err = ntf_pool_start(cfg, s->http, &s->keys, &s->stats, &s->pool, errbuf);
    if (err == SVC_OK)
        err = start_events(s, errbuf);
    if (err == SVC_OK)
        err = admin_server_start(cfg->admin_listen, metrics, ready, s, &s->admin, errbuf);
    if (err != SVC_OK) {
        ntf_service_stop(s);
        return err;
    }
    svc_redact_credentials(cfg->webhook_url, url, sizeof url);
    svc_log_info(LOG, "started workers=%lld webhook=%s queue=%s.work admin_port=%d",
                 (long long)cfg->workers, url, cfg->queue_base, ntf_service_admin_port(s));
    *out = s;
    return SVC_OK;
}

int ntf_service_admin_port(const ntf_service_t *s)
{
    return s->admin != NULL ? admin_server_port(s->admin) : -1;
}

void ntf_service_stop(ntf_service_t *s)
{
    if (s == NULL)
        return;
    admin_server_free(s->admin); /* first: its callbacks read the rest */
    kfk_worker_stop(s->events);  /* no new job; the offsets of published ones are committed */
    ntf_pool_stop(s->pool);      /* deliveries in flight finish and are settled */
    rs_http_client_free(s->http);
    ntf_publisher_free(s->publisher);
    free(s);
}
