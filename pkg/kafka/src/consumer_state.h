/* SPDX-License-Identifier: Apache-2.0 */
/*
 * consumer_state.h - the consumer's state, shared by consumer.c (the loop) and
 * consumer_stats.c (counters, lag, the Prometheus text). Internal to
 * pkg/kafka.
 */
#ifndef KFK_CONSUMER_STATE_H
#define KFK_CONSUMER_STATE_H

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "kafka/consumer.h"

/* A record that got KFK_RETRY (or whose dead letter failed): kept, its
 * partition paused, handed again at due_ms. At most one per partition. */
typedef struct kfk__pending {
    rd_kafka_message_t *m;
    unsigned attempt; /* the attempt that failed                    */
    uint64_t due_ms;
    bool dead_letter; /* the verdict stands; only the copy is left  */
    char reason[KFK_REASON_LEN];
} kfk__pending_t;

typedef struct kfk__lag {
    char topic[128];
    int32_t partition;
    int64_t lag; /* -1: not known yet                          */
} kfk__lag_t;

typedef struct kfk__stats {
    atomic_uint_fast64_t consumed, batches, handled, duplicates, dead_lettered, retries,
        commit_errors, rebalances, latency_count, latency_sum_us, latency_le[KFK_LATENCY_BUCKETS];
    pthread_mutex_t lag_mu; /* guards lag[] and n_lag                    */
    kfk__lag_t lag[KFK_CONSUMER_MAX_LAG_PARTITIONS];
    unsigned n_lag;
    atomic_uint n_assigned;
} kfk__stats_t;

/* One record of the batch in hand, and the view of it the handler gets
 * (consumer_loop.c). */
typedef struct kfk__slot {
    rd_kafka_message_t *m;
    kfk_record_t r;
    kfk_header_t *h; /* r.n_headers entries pointing into m        */
    char ce_id[128];
    kfk_action_t act;
    bool counted; /* in consumed already                        */
    char reason[KFK_REASON_LEN];
} kfk__slot_t;

struct kfk_consumer {
    rd_kafka_t *rk;
    kfk_producer_t *dlq;
    kfk_consumer_opts_t o; /* strings below are our copies              */
    char *group_id, *dlq_topic, *instance_id;
    atomic_bool stop;
    bool closed;
    bool polled;                /* the last poll called rd_kafka_consumer_poll */
    kfk__slot_t *slots;         /* opts.batch_max: the batch in hand          */
    size_t n_slots;             /* filled so far, while collect() runs        */
    bool stored;                /* an offset was stored since the last commit  */
    uint64_t commit_at_ms;      /* commit_interval_ms: the next commit, not before */
    rd_kafka_queue_t *commit_q; /* commit_interval_ms: async commits' results */
    bool dlq_failed;            /* a dead letter failed in this poll: no more  */
    kfk__pending_t *pending;    /* n_pending of cap_pending                  */
    size_t n_pending, cap_pending;
    uint64_t rand_state, lag_at_ms;
    /* The dead letter in flight: its report matches dlq_seq. */
    uint64_t dlq_seq;
    bool dlq_done;
    svc_err_t dlq_err;
    char dlq_reason[128];
    /* An error met inside a rebalance callback, returned by the next poll. */
    svc_err_t deferred;
    char deferred_text[SVC_ERRBUF_LEN];
    kfk__stats_t st;
};

void kfk__stats_init(kfk__stats_t *s);
void kfk__stats_dispose(kfk__stats_t *s);
/* One handler call took elapsed_ns. */
void kfk__stats_latency(kfk__stats_t *s, uint64_t elapsed_ns);
/* Samples the lag of every assigned partition (the loop's thread). */
void kfk__stats_sample_lag(kfk_consumer_t *c);

/* consumer.c, for the loop (consumer_loop.c). */
uint64_t kfk__next_random(kfk_consumer_t *c);
/* The record kept for partition (topic, partition), or NULL. */
kfk__pending_t *kfk__pending_of(kfk_consumer_t *c, const char *topic, int32_t partition);
/* Keeps m (takes ownership) and pauses its partition; NULL when out of
 * memory (m is still the caller's then). */
kfk__pending_t *kfk__pending_add(kfk_consumer_t *c, rd_kafka_message_t *m);
/* Forgets p (destroys its record); with resume, its partition fetches on
 * after the record. */
void kfk__pending_drop(kfk_consumer_t *c, kfk__pending_t *p, bool resume);
/* Commits every stored offset, synchronously (nothing stored is SVC_OK). */
svc_err_t kfk__commit_stored(kfk_consumer_t *c, char errbuf[static SVC_ERRBUF_LEN]);
/* The end of a poll: commits what is stored, as opts.commit_interval_ms
 * says, and serves the results of asynchronous commits. */
svc_err_t kfk__commit_due(kfk_consumer_t *c, char errbuf[static SVC_ERRBUF_LEN]);

#endif
