/* SPDX-License-Identifier: Apache-2.0 */
/* stats.c - the notification service's metrics and readiness (stats.h). */
#include <inttypes.h>
#include <string.h>

#include "stats.h"

#define R memory_order_relaxed

static const double latency_bounds_ms[NTF_LATENCY_BUCKETS] = {5,   10,   25,   50,   100,  250,
                                                              500, 1000, 2500, 5000, 10000};

void ntf_stats_init(ntf_stats_t *s, int workers)
{
    memset(s, 0, sizeof *s);
    atomic_flag_clear(&s->lock);
    s->workers = workers;
    snprintf(s->publisher_detail, sizeof s->publisher_detail, "not connected yet");
    snprintf(s->worker_detail, sizeof s->worker_detail, "not connected yet");
}

void ntf_stats_latency(ntf_stats_t *s, uint64_t us)
{
    for (size_t i = 0; i < NTF_LATENCY_BUCKETS; i++)
        if ((double)us <= latency_bounds_ms[i] * 1000.0)
            atomic_fetch_add_explicit(&s->latency_le[i], 1, R);
    atomic_fetch_add_explicit(&s->latency_count, 1, R);
    atomic_fetch_add_explicit(&s->latency_sum_us, us, R);
}

void ntf_stats_detail(ntf_stats_t *s, bool worker, const char *detail)
{
    char *to = worker ? s->worker_detail : s->publisher_detail;

    while (atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire))
        ;
    snprintf(to, SVC_ERRBUF_LEN, "%s", detail);
    atomic_flag_clear_explicit(&s->lock, memory_order_release);
}

static void counter(admin_buf_t *out, const char *name, const char *help, atomic_uint_fast64_t *v)
{
    admin_buf_printf(
        out,
        "# HELP shopmicro_notification_%s %s\n# TYPE shopmicro_notification_%s counter\n"
        "shopmicro_notification_%s %" PRIuFAST64 "\n",
        name, help, name, name, atomic_load_explicit(v, R));
}

void ntf_stats_render(ntf_stats_t *s, const uint32_t *tier_ms, size_t n_tiers, admin_buf_t *out)
{
    counter(out, "jobs_published_total", "jobs RabbitMQ confirmed (one per order event)",
            &s->published);
    counter(out, "events_skipped_total", "order events nobody is notified of (OrderCreated)",
            &s->skipped);
    counter(out, "publish_errors_total", "job publishes that failed (the event is handed again)",
            &s->publish_errors);
    counter(out, "jobs_delivered_total", "jobs the webhook took (2xx), acked", &s->delivered);
    admin_buf_printf(out,
                     "# HELP shopmicro_notification_jobs_retried_total jobs moved to a retry tier\n"
                     "# TYPE shopmicro_notification_jobs_retried_total counter\n");
    for (size_t k = 1; k <= n_tiers; k++)
        admin_buf_printf(
            out,
            "shopmicro_notification_jobs_retried_total{tier=\"%zu\",delay_ms=\"%" PRIu32
            "\"} %" PRIuFAST64 "\n",
            k, tier_ms[k - 1], atomic_load_explicit(&s->retried[k], R));
    counter(out, "jobs_dead_lettered_total", "jobs moved to the dead-letter queue",
            &s->dead_lettered);
    counter(out, "jobs_requeued_total", "jobs left unsettled at a stop (RabbitMQ hands them again)",
            &s->requeued);
    counter(out, "settle_errors_total", "acks or moves that failed (RabbitMQ redelivers the job)",
            &s->settle_errors);
    admin_buf_printf(
        out,
        "# HELP shopmicro_notification_webhook_seconds one job's webhook call, every "
        "attempt and wait included\n# TYPE shopmicro_notification_webhook_seconds histogram\n");
    for (size_t i = 0; i < NTF_LATENCY_BUCKETS; i++)
        admin_buf_printf(
            out, "shopmicro_notification_webhook_seconds_bucket{le=\"%g\"} %" PRIuFAST64 "\n",
            latency_bounds_ms[i] / 1000.0, atomic_load_explicit(&s->latency_le[i], R));
    admin_buf_printf(out,
                     "shopmicro_notification_webhook_seconds_bucket{le=\"+Inf\"} %" PRIuFAST64 "\n"
                     "shopmicro_notification_webhook_seconds_sum %.6f\n"
                     "shopmicro_notification_webhook_seconds_count %" PRIuFAST64 "\n",
                     atomic_load_explicit(&s->latency_count, R),
                     (double)atomic_load_explicit(&s->latency_sum_us, R) / 1e6,
                     atomic_load_explicit(&s->latency_count, R));
    admin_buf_printf(out,
                     "# HELP shopmicro_notification_workers_connected delivery threads with a live "
                     "RabbitMQ consumer\n# TYPE shopmicro_notification_workers_connected gauge\n"
                     "shopmicro_notification_workers_connected %d\n",
                     atomic_load_explicit(&s->workers_up, R));
}

static bool check(ntf_stats_t *s, admin_buf_t *out, const char *name, bool ok, bool worker,
                  bool first)
{
    char detail[SVC_ERRBUF_LEN];

    while (atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire))
        ;
    snprintf(detail, sizeof detail, "%s", worker ? s->worker_detail : s->publisher_detail);
    atomic_flag_clear_explicit(&s->lock, memory_order_release);
    admin_buf_printf(out, "%s{\"name\":", first ? "" : ",");
    admin_buf_json_str(out, name);
    admin_buf_printf(out, ",\"ok\":%s,\"detail\":", ok ? "true" : "false");
    admin_buf_json_str(out, ok ? "" : detail);
    admin_buf_printf(out, "}");
    return ok;
}

bool ntf_stats_ready_checks(ntf_stats_t *s, admin_buf_t *out, bool first)
{
    bool pub = atomic_load_explicit(&s->publisher_up, R);
    /* Ready when the delivery threads are all consuming: one that lost its
     * connection reconnects on its own, but jobs then wait for the others. */
    bool wrk = atomic_load_explicit(&s->workers_up, R) == s->workers;
    bool ok = check(s, out, "rabbitmq-publisher", pub, false, first);

    return check(s, out, "rabbitmq-workers", wrk, true, false) && ok;
}
