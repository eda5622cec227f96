/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.h - the notification service's counters and gauges. Written by the
 * Kafka worker's thread (the publisher) and the delivery threads, read by
 * pkg/admin's thread (/metrics, /readyz): every field is an atomic, used
 * relaxed (each is exact; a page is not a snapshot), except the two detail
 * strings, which a spin flag guards.
 */
#ifndef NTF_STATS_H
#define NTF_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "admin/admin.h"
#include "mq/mq.h"

/* Webhook latency buckets (ms): 5 10 25 50 100 250 500 1000 2500 5000 10000, then +Inf. */
#define NTF_LATENCY_BUCKETS 11

typedef struct ntf_stats {
    atomic_uint_fast64_t published;                  /* jobs confirmed by RabbitMQ              */
    atomic_uint_fast64_t skipped;                    /* order events nobody is notified of      */
    atomic_uint_fast64_t publish_errors;             /* publishes that failed (the record waits) */
    atomic_uint_fast64_t delivered;                  /* 2xx: acked                             */
    atomic_uint_fast64_t retried[RMQ_MAX_TIERS + 1]; /* moved to tier k (index k)  */
    atomic_uint_fast64_t dead_lettered;              /* moved to the dead-letter queue          */
    atomic_uint_fast64_t requeued;                   /* left unsettled at a stop                */
    atomic_uint_fast64_t settle_errors;              /* ack or move failed: RabbitMQ redelivers */
    atomic_uint_fast64_t latency_le[NTF_LATENCY_BUCKETS];
    atomic_uint_fast64_t latency_count, latency_sum_us;
    atomic_int workers_up;    /* delivery threads with a live consumer   */
    atomic_bool publisher_up; /* the publisher's connection works        */
    int workers;              /* configured; set once before any thread  */
    char publisher_detail[SVC_ERRBUF_LEN], worker_detail[SVC_ERRBUF_LEN];
    atomic_flag lock; /* guards the two details                  */
} ntf_stats_t;

void ntf_stats_init(ntf_stats_t *s, int workers);
/* One webhook call (all its attempts) that took us microseconds. */
void ntf_stats_latency(ntf_stats_t *s, uint64_t us);
/* Records why the publisher (worker false) or a delivery thread (true) is down; "" when up. */
void ntf_stats_detail(ntf_stats_t *s, bool worker, const char *detail);

/* Prometheus text of s (retried by tier: labels tier="1".., and the delay). */
void ntf_stats_render(ntf_stats_t *s, const uint32_t *tier_ms, size_t n_tiers, admin_buf_t *out);
/* The /readyz checks "rabbitmq-publisher" and "rabbitmq-workers" as JSON array items (no
 * brackets), each preceded by a comma when first is false; returns whether both are ok. */
bool ntf_stats_ready_checks(ntf_stats_t *s, admin_buf_t *out, bool first);

#endif
