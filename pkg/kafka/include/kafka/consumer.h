/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kafka/consumer.h - a consumer-group member that hands each record to a
 * handler and commits its offset only once the handler is done with it.
 *
 * At least once, never past a record that is not done: auto-commit and the
 * automatic offset store are off; a record's offset + 1 is stored only after
 * the handler said KFK_HANDLED or KFK_DUPLICATE (and, with batch ops, after
 * the batch's transaction committed), or after the record was dead-lettered
 * and the broker acknowledged the dead-letter copy (acks=all). The stored
 * offsets are committed synchronously at the end of each kfk_consumer_poll,
 * before the next batch is handed out - or, with opts.commit_interval_ms,
 * asynchronously at most that often (and synchronously on revoke and
 * close), which saves a round trip to the group coordinator per batch and
 * the broker a commit per batch. A crash between the handler's own commit
 * and the offset commit hands those records again (with an interval: up to
 * an interval's worth): handlers dedupe on ce_id in the same transaction as
 * their effect (docs/events.md §2, §4).
 *
 * Batches (opts.batch_max > 1): one kfk_consumer_poll hands out up to
 * batch_max records that librdkafka has fetched already (it waits only for
 * the first), in fetch order. With opts.batch (begin, commit, rollback) the
 * handler calls of a batch share one transaction of the handler's: one
 * database commit for the batch instead of one per record, which is what
 * lets a consumer keep up when every commit waits for a disk flush. If any
 * record answers KFK_RETRY, or the commit fails, the transaction is rolled
 * back and the batch's records are handed again one at a time, each in a
 * transaction of its own, until the first of them that fails again: it is
 * kept for a retry (as below), and the ones after it are fetched again. So
 * one bad record never holds back, or takes down, the rest of its batch.
 *
 * Verdicts:
 *   KFK_HANDLED    done; the offset is committed.
 *   KFK_DUPLICATE  done, it had been handled before (counted as deduplicated).
 *   KFK_POISON     can never be processed (undecodable, unknown type, newer
 *                  schema): copied to the dead-letter topic with the reason
 *                  and the original topic, partition and offset in headers,
 *                  then committed; the consumer goes on.
 *   KFK_RETRY      not now (the database is down): the partition is paused,
 *                  and the same record is handed again after a jittered,
 *                  capped backoff, as often as needed; nothing behind it on
 *                  that partition is handed meanwhile, other partitions go on.
 *
 * Rebalances use the cooperative-sticky assignor: a rebalance moves only the
 * partitions that change owner, and the others keep flowing (and keep their
 * retry state). On revoke, the stored offsets are committed and the retry
 * state of the revoked partitions is dropped (the next owner starts from the
 * committed offset, which is that record). A new group starts at the
 * earliest offset (auto.offset.reset=earliest): events written before the
 * group first joined are handled, not skipped.
 *
 * Membership: with opts.group_instance_id the consumer is a static member
 * (KIP-345, group.instance.id). A static member that crashes (kill -9) keeps
 * its partitions, unread, for opts.session_timeout_ms: started again under
 * the same id within that time, it gets them back at once, with no
 * rebalance; not back by then, the group hands them to the others. Without
 * an id (dynamic membership) a crashed member's partitions also wait out
 * the session, and a restarted one is a stranger that waits with the
 * others. So the session timeout bounds how long a dead member's partitions
 * go unread, and the heartbeat interval how soon the others hear of it.
 * kfk_consumer_close leaves the group in both cases (see there): a clean
 * stop hands the partitions over at once.
 *
 * Threads: one thread drives a consumer (kfk_consumer_poll, _close, _free);
 * the handler and the on_log callback run on it, inside kfk_consumer_poll.
 * kfk_consumer_stop may be called from any thread or a signal handler;
 * kfk_consumer_stats and kfk_consumer_metrics from any thread (an admin
 * thread). The library logs nothing: errors are returned with errbuf,
 * librdkafka's lines go to on_log.
 */
#ifndef KFK_CONSUMER_H
#define KFK_CONSUMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kafka/kafka.h"

typedef enum kfk_verdict {
    KFK_HANDLED = 0,
    KFK_DUPLICATE,
    KFK_POISON,
    KFK_RETRY,
} kfk_verdict_t;

/* The reason buffer a handler fills for KFK_POISON and KFK_RETRY. */
#define KFK_REASON_LEN 256

typedef struct kfk_consumer kfk_consumer_t; /* opaque */

/* One record, as handed to the handler. Everything is borrowed: valid only
 * during the handler call. */
typedef struct kfk_record {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms; /* the record's timestamp; -1 when none    */
    const void *key;      /* key_len bytes; NULL when no key         */
    size_t key_len;
    const void *value; /* value_len bytes; NULL when empty        */
    size_t value_len;
    const kfk_header_t *headers; /* n_headers, in record order; values are
                                    not NUL-terminated                      */
    size_t n_headers;
    const char *ce_id;              /* the ce_id header, NUL-terminated; NULL
                                       when absent, empty, or not text         */
    unsigned attempt;               /* 1 the first time, +1 per KFK_RETRY      */
    bool batched;                   /* other records share this transaction
                                       (opts.batch): after a failed statement
                                       answer KFK_RETRY, never KFK_POISON (the
                                       record is handed again alone, where
                                       KFK_POISON is right)                    */
    uint64_t deadline_ms;           /* svc_now_ms() time the handler must be
                                       done by (opts.handler_timeout_ms)       */
    const kfk_consumer_t *consumer; /* for kfk_record_cancelled             */
} kfk_record_t;

/*
 * Decides what becomes of r. For KFK_POISON and KFK_RETRY, writes why into
 * reason (KFK_REASON_LEN bytes, NUL-terminated; it goes into the dlq-reason
 * header or is returned by kfk_consumer_poll). A value outside the enum counts
 * as KFK_RETRY: an unknown answer never skips a record.
 */
typedef kfk_verdict_t (*kfk_handler_fn)(void *ctx, const kfk_record_t *r, char *reason);

/* True once the handler should give up: kfk_consumer_stop was called, or
 * r->deadline_ms has passed. A handler that gives up returns KFK_RETRY (its
 * record is then handed again, to this consumer or the next owner). */
bool kfk_record_cancelled(const kfk_record_t *r);

/*
 * A transaction around a batch's handler calls (opts.batch), all three
 * required, called on the consumer's thread with opts.ctx. begin opens it
 * (the handler calls then write in it, and do not commit); commit makes the
 * batch's effects durable - an error means none of them happened (it must
 * not report success for a transaction the database rolled back); rollback
 * drops it (after a KFK_RETRY, a KFK_POISON of a lone record, or a failed
 * commit). deadline_ms as kfk_record_t's.
 */
typedef struct kfk_batch_ops {
    svc_err_t (*begin)(void *ctx, uint64_t deadline_ms, char errbuf[static SVC_ERRBUF_LEN]);
    svc_err_t (*commit)(void *ctx, uint64_t deadline_ms, char errbuf[static SVC_ERRBUF_LEN]);
    void (*rollback)(void *ctx);
} kfk_batch_ops_t;

#define KFK_CONSUMER_DEFAULT_DLQ_SUFFIX ".dlq"
/* The most kfk_consumer_close waits for the revoke and the leave: a
 * coordinator that does not answer by then leaves it to the session. */
#define KFK_CONSUMER_LEAVE_WAIT_MS 3000
/* The broker's limit on a group.instance.id (Kafka's Topic.validate rules). */
#define KFK_CONSUMER_INSTANCE_ID_MAX 249
/* How long a dead member keeps its partitions before the others get them:
 * the broker's default least (group.min.session.timeout.ms), not
 * librdkafka's 45 s. With a heartbeat every second and a rebalance, the
 * partitions of a member that died for good are read again within about
 * 6 + 1 + 1 s; one that comes back (static membership) takes them back at
 * once whatever this is. A member is declared dead only when its heartbeats,
 * sent by librdkafka's own thread and not by the handler's, stop for this
 * long: a slow handler is bounded by the poll interval instead. */
#define KFK_CONSUMER_DEFAULT_SESSION_TIMEOUT_MS 6000
/* How often the member tells the coordinator it lives, and learns of a
 * rebalance (librdkafka's 3000 would add up to 3 s to a takeover). At most
 * a third of the session, so that two lost heartbeats are not a death. */
#define KFK_CONSUMER_DEFAULT_HEARTBEAT_INTERVAL_MS 1000
/* librdkafka's default: how long a stuck member keeps its partitions. */
#define KFK_CONSUMER_DEFAULT_MAX_POLL_INTERVAL_MS 300000
#define KFK_CONSUMER_DEFAULT_HANDLER_TIMEOUT_MS   30000
#define KFK_CONSUMER_DEFAULT_BACKOFF_BASE_MS      100
#define KFK_CONSUMER_DEFAULT_BACKOFF_CAP_MS       30000
/* 0: KFK_RETRY is retried for ever (a database outage is never poison). */
#define KFK_CONSUMER_DEFAULT_MAX_ATTEMPTS    0u
#define KFK_CONSUMER_DEFAULT_DLQ_TIMEOUT_MS  10000
#define KFK_CONSUMER_DEFAULT_LAG_INTERVAL_MS 5000
#define KFK_CONSUMER_MAX_TOPICS              16
/* 1: one record per poll. The most records one poll hands out. */
#define KFK_CONSUMER_DEFAULT_BATCH_MAX 1u
#define KFK_CONSUMER_MAX_BATCH         1000u
/* 0: a synchronous offset commit at the end of every poll that stored one. */
#define KFK_CONSUMER_DEFAULT_COMMIT_INTERVAL_MS 0
/* Partitions whose lag is kept (more are consumed, but not shown). */
#define KFK_CONSUMER_MAX_LAG_PARTITIONS 256

typedef struct kfk_consumer_opts {
    const char *brokers;           /* bootstrap.servers; required                     */
    const char *group_id;          /* group.id; required                              */
    const char *const *topics;     /* NULL-terminated, 1..KFK_CONSUMER_MAX_TOPICS;
                                      required                                        */
    const char *client_id;         /* KFK_DEFAULT_CLIENT_ID                           */
    const char *dlq_topic;         /* one topic for every dead letter; NULL: each
                                      record's topic + KFK_CONSUMER_DEFAULT_DLQ_SUFFIX
                                      (shopmicro.orders.v1 -> shopmicro.orders.v1.dlq) */
    const char *group_instance_id; /* group.instance.id: NULL, dynamic membership;
                                      else static (KIP-345), 1..249 of [A-Za-z0-9._-],
                                      one per member of the group and kept across
                                      its restarts (a second consumer with the same
                                      id fences the first: its polls then fail)      */
    int session_timeout_ms;        /* 6000..300000 (the broker's group limits)        */
    int heartbeat_interval_ms;     /* 100..session_timeout_ms / 3                     */
    int max_poll_interval_ms;      /* > 2 x (handler_timeout_ms + dlq_timeout_ms),
                                      <= 1 h                                          */
    int handler_timeout_ms;        /* 100..600000: the handler's deadline             */
    int backoff_base_ms;           /* 1..60000: the first KFK_RETRY window            */
    int backoff_cap_ms;            /* backoff_base_ms..3600000                        */
    unsigned max_attempts;         /* 0: unlimited; N: the Nth KFK_RETRY of a record
                                      dead-letters it ("retries exhausted: ...")      */
    int dlq_timeout_ms;            /* 1000..300000: a dead letter's delivery bound    */
    int lag_interval_ms;           /* 100..600000: how often lag is sampled           */
    unsigned batch_max;            /* 1..KFK_CONSUMER_MAX_BATCH records per poll      */
    int commit_interval_ms;        /* 0..60000: 0 commits synchronously after every
                                      poll; N commits asynchronously, at most every
                                      N ms (a failed one is counted, returned by a
                                      later poll, and the offsets go with the next) */
    const kfk_batch_ops_t *batch;  /* NULL: each handler call commits its own effect;
                                      else one transaction per batch (borrowed: must
                                      outlive the consumer)                           */
    kfk_handler_fn handler;        /* required                                        */
    kfk_log_fn on_log;             /* NULL: librdkafka's lines are dropped            */
    void *ctx;                     /* passed to handler and on_log                    */
} kfk_consumer_opts_t;

/* Fills o with the defaults above (no brokers, group, topics or handler). */
void kfk_consumer_opts_init(kfk_consumer_opts_t *o);
/* SVC_EINVAL naming the first bad option in errbuf. Pure; thread-safe. */
svc_err_t kfk_consumer_opts_validate(const kfk_consumer_opts_t *o,
                                     char errbuf[static SVC_ERRBUF_LEN]);

/* Validates o, creates the consumer and its dead-letter producer, and
 * subscribes (joining the group happens in kfk_consumer_poll; a broker that
 * is down is not an error here). Strings of o are copied. On SVC_OK *out is
 * owned by caller: kfk_consumer_close, then kfk_consumer_free. */
svc_err_t kfk_consumer_new(const kfk_consumer_opts_t *o, kfk_consumer_t **out,
                           char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Serves a due retry alone, or else a batch of at most opts.batch_max
 * records, waiting up to timeout_ms for the first; rebalances are served
 * inside it too. *served (optional) is set to the number of records handed
 * to the handler or dead-lettered (0 when none).
 * SVC_OK: nothing went wrong (idle included). Otherwise the consumer is
 * still usable and errbuf says what happened, for the caller to log:
 * SVC_EUNAVAIL (broker unreachable, an offset commit failed - it is retried
 * with the next commit -, a dead letter was not acknowledged - retried after
 * a backoff -), or KFK_RETRY's reason (SVC_EUNAVAIL too), or SVC_ENOTFOUND
 * (a subscribed topic does not exist). After kfk_consumer_stop it returns
 * SVC_ECANCELLED at once.
 */
svc_err_t kfk_consumer_poll(kfk_consumer_t *c, int timeout_ms, int *served,
                            char errbuf[static SVC_ERRBUF_LEN]);

/* Asks the handler to give up (kfk_record_cancelled) and kfk_consumer_poll
 * to return. Async-signal-safe; thread-safe. */
void kfk_consumer_stop(kfk_consumer_t *c);

/* Commits what is done, drops retry state (those records are handed again
 * to the next owner) and leaves the group, so that the others take the
 * partitions at once - a static member too, although librdkafka's own close
 * does not send its LeaveGroup (KIP-345 expects it back): the consumer
 * unsubscribes first, serves the revoke and waits (up to
 * KFK_CONSUMER_LEAVE_WAIT_MS) until it has left. Its next start joins as a
 * new member under the same id. SVC_OK, or the commit's error in errbuf
 * (the group is left anyway). Call once, before kfk_consumer_free. */
svc_err_t kfk_consumer_close(kfk_consumer_t *c, char errbuf[static SVC_ERRBUF_LEN]);

/* Closes (if not closed) and frees. NULL-safe. */
void kfk_consumer_free(kfk_consumer_t *c);

/* ------------------------------------------------------------------------
 * Stats: atomics, readable from any thread.
 * ------------------------------------------------------------------------ */
#define KFK_LATENCY_BUCKETS 10 /* 1, 5, 10, 25, 50, 100, 250, 500, 1000, 5000 ms */

typedef struct kfk_consumer_stats {
    uint64_t consumed;      /* records handed to the handler the first time  */
    uint64_t batches;       /* polls that handed out records (consumed /
                               batches: the mean batch size)                 */
    uint64_t handled;       /* KFK_HANDLED                                   */
    uint64_t duplicates;    /* KFK_DUPLICATE (deduplicated)                  */
    uint64_t dead_lettered; /* acknowledged by the dead-letter topic         */
    uint64_t retries;       /* KFK_RETRY verdicts (and failed dead letters)  */
    uint64_t commit_errors; /* offset commits that failed                    */
    uint64_t rebalances;    /* assignments and revocations served            */
    uint64_t latency_count; /* handler calls timed                           */
    uint64_t latency_sum_us;
    uint64_t latency_le[KFK_LATENCY_BUCKETS]; /* cumulative, as Prometheus  */
    unsigned n_partitions;                    /* assigned now                                   */
    int64_t lag_total;                        /* sum of the known lags; -1 when none known      */
} kfk_consumer_stats_t;

/* The bounds of the latency buckets, in ms. */
extern const unsigned kfk_latency_bounds_ms[KFK_LATENCY_BUCKETS];

/* A snapshot. Thread-safe. */
void kfk_consumer_stats(const kfk_consumer_t *c, kfk_consumer_stats_t *out);

/*
 * Writes the Prometheus text of the stats into buf (cap bytes, always
 * NUL-terminated when cap > 0), metric names starting with prefix (e.g.
 * "shopmicro_catalog_consumer"): <prefix>_consumed_total, _batches_total,
 * _handled_total,
 * _deduplicated_total, _dead_lettered_total, _retries_total,
 * _commit_errors_total, _rebalances_total, _handler_seconds (histogram),
 * _assigned_partitions, and _lag{topic,partition} per assigned partition
 * whose lag is known. Returns the length the whole text needs (as snprintf:
 * >= cap means it was cut). Thread-safe: e.g. from an admin_metrics_fn,
 * then admin_buf_printf(out, "%s", buf).
 */
size_t kfk_consumer_metrics(const kfk_consumer_t *c, const char *prefix, char *buf, size_t cap);

/* ------------------------------------------------------------------------
 * Pure parts, exposed for tests (and for tools that read dead letters).
 * ------------------------------------------------------------------------ */
#define KFK_DLQ_REASON         "dlq-reason"
#define KFK_DLQ_ORIG_TOPIC     "dlq-original-topic"
#define KFK_DLQ_ORIG_PARTITION "dlq-original-partition"
#define KFK_DLQ_ORIG_OFFSET    "dlq-original-offset"
#define KFK_DLQ_GROUP          "dlq-consumer-group"
#define KFK_DLQ_TIME           "dlq-time"
#define KFK_DLQ_DROPPED        "dlq-dropped-headers"
#define KFK_DLQ_HEADERS        7 /* at most this many dlq-* headers */

/* What a dead letter says about its record. */
typedef struct kfk_dlq_info {
    const char *reason; /* NULL or "": "unspecified"                      */
    const char *topic;
    int32_t partition;
    int64_t offset;
    const char *group;
    int64_t time_unix_ms; /* when it was dead-lettered (wall clock)         */
} kfk_dlq_info_t;

/* Text the dlq-* header values point into (numbers, the time). */
typedef struct kfk_dlq_text {
    char partition[16], offset[24], time[32], dropped[24];
} kfk_dlq_text_t;

/*
 * The dead letter's headers: the record's own (in order, without any dlq-*
 * header it carried from an earlier dead-lettering), then dlq-reason,
 * dlq-original-topic, -partition, -offset, dlq-consumer-group and dlq-time
 * (RFC 3339 UTC, ms). When the record has more headers than fit in
 * KFK_MAX_HEADERS, the last ones are left out and dlq-dropped-headers says
 * how many. Values point into orig, info and text (borrowed). Sets *n.
 * SVC_EINVAL when topic or group is missing. Pure; thread-safe.
 */
svc_err_t kfk_dlq_headers(const kfk_header_t *orig, size_t n_orig, const kfk_dlq_info_t *info,
                          kfk_dlq_text_t *text, kfk_header_t out[KFK_MAX_HEADERS], size_t *n,
                          char errbuf[static SVC_ERRBUF_LEN]);

/* The dead-letter topic of a record of `topic`: opts' dlq_topic, or topic +
 * suffix. Writes at most len bytes; false when it does not fit. */
bool kfk_dlq_topic(const char *dlq_topic, const char *topic, char *out, size_t len);

/* The wait before attempt number attempt + 1 of a record that got KFK_RETRY
 * on attempt `attempt` (1-based): equal jitter (uniform in [w/2, w]) over
 * w = min(cap, base * 2^(attempt-1)); `random` is a uniform 64-bit value. */
uint32_t kfk_backoff_ms(int base_ms, int cap_ms, unsigned attempt, uint64_t random);

/* What becomes of a record after a handler call. */
typedef enum kfk_action {
    KFK_ACT_COMMIT,      /* done: store and commit offset + 1                */
    KFK_ACT_DEAD_LETTER, /* copy to the dead-letter topic, then commit       */
    KFK_ACT_BACKOFF,     /* keep it, pause the partition, hand it again      */
} kfk_action_t;

/* The action for verdict v on attempt `attempt` (1-based) with max_attempts
 * (0: unlimited). *exhausted is set when a KFK_RETRY turns into a dead
 * letter because the attempts ran out. Pure. */
kfk_action_t kfk_verdict_action(kfk_verdict_t v, unsigned attempt, unsigned max_attempts,
                                bool *exhausted);

/* ------------------------------------------------------------------------
 * For handlers (src/record.c). Pure; thread-safe.
 * ------------------------------------------------------------------------ */

/* The value of r's last header called name, as text in out (len bytes,
 * NUL-terminated). False (out "") when it is absent, empty, holds a NUL
 * byte, or does not fit. */
bool kfk_record_header(const kfk_record_t *r, const char *name, char *out, size_t len);

/* What a record's ce_type is to a consumer that knows the types known[]
 * (NULL-terminated, each "<domain>.v<N>.<Name>", e.g.
 * "shopmicro.order.v1.OrderCreated"). */
typedef enum kfk_type_match {
    KFK_TYPE_KNOWN,   /* one of known[]: *index says which                  */
    KFK_TYPE_NEWER,   /* a known domain at a higher version: a schema this
                         consumer cannot read yet (poison, not a guess)    */
    KFK_TYPE_UNKNOWN, /* anything else, malformed or NULL included          */
} kfk_type_match_t;

kfk_type_match_t kfk_ce_type_match(const char *ce_type, const char *const *known, size_t *index);

#endif /* KFK_CONSUMER_H */
