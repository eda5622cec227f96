/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kafka/worker.h - the consumer loop every service shares: a thread of its
 * own that drives one kfk_consumer (kafka/consumer.h) until it is stopped,
 * and says what happens in log lines, one per change of state, not one per
 * failed poll.
 *
 * A service adds only its handler (and the handler's own state, e.g. a
 * database connection that only this thread uses): the worker creates the
 * consumer from the service's options, polls it, logs the consumer's errors
 * (a broker that went away, a handler that asks for a retry, an offset
 * commit that failed) as key=value lines under the service's log module, one
 * per change of state (librdkafka's own lines at debug), and on stop lets
 * the record in hand finish (or give up at kfk_record_cancelled), commits,
 * leaves the group and joins.
 *
 * Threads: kfk_worker_start and kfk_worker_stop from one thread (the
 * service's main); the handler runs on the worker's thread;
 * kfk_worker_metrics_text and kfk_worker_healthy may be called from any thread.
 */
#ifndef KFK_WORKER_H
#define KFK_WORKER_H

#include <stddef.h>

#include "kafka/consumer.h"

typedef struct kfk_worker kfk_worker_t; /* opaque */

/*
 * Creates the consumer from o (validated; on_log must be NULL: the worker
 * sets its own) and starts the thread. log_module names the worker's log
 * lines (e.g. "catalog.saga"); it is copied. On SVC_OK *out is owned by
 * caller: kfk_worker_stop. A broker that is down is not an error here (the
 * thread logs it and keeps trying).
 */
svc_err_t kfk_worker_start(const kfk_consumer_opts_t *o, const char *log_module, kfk_worker_t **out,
                           char errbuf[static SVC_ERRBUF_LEN]);

/* Stops the consumer, joins the thread, closes (commits what is done,
 * leaves the group) and frees. NULL-safe. */
void kfk_worker_stop(kfk_worker_t *w);

/* ------------------------------------------------------------------------
 * The settings every service's consumer has, one way for every service.
 * ------------------------------------------------------------------------ */
typedef struct kfk_worker_cfg {
    char brokers[SVC_CFG_STR_MAX]; /* "none": no consumer                    */
    char group[SVC_CFG_STR_MAX];
    char instance_id[SVC_CFG_STR_MAX]; /* KFK_WORKER_INSTANCE_HOSTNAME, "none"
                                          (dynamic membership) or the static
                                          member's id                            */
    int64_t session_timeout_ms;        /* how long a crashed member keeps its
                                          partitions when it does not come back  */
    int64_t batch_max;                 /* records per poll (and per transaction,
                                          with batch ops)                        */
    int64_t commit_interval_ms;        /* offsets committed at most this often
                                          (0: after every poll, synchronously)   */
} kfk_worker_cfg_t;

/* What a service plugs into its consumer (kafka/consumer.h). */
typedef struct kfk_worker_handler {
    kfk_handler_fn fn;            /* required                               */
    const kfk_batch_ops_t *batch; /* NULL: each call commits its own effect;
                                     borrowed, must outlive the worker      */
    void *ctx;                    /* passed to fn and to batch's functions  */
} kfk_worker_handler_t;

/* <P>_CONSUMER_INSTANCE_ID's default: the host's name (gethostname), which
 * is the pod's name in Kubernetes and the container's in Docker: the same
 * across restarts of the process, and one per replica when each runs on a
 * host of its own. Replicas that share a host (deploy/local's second one)
 * are each given an id. */
#define KFK_WORKER_INSTANCE_HOSTNAME "hostname"

#define KFK__STR1(x) #x
#define KFK__STR(x)  KFK__STR1(x)

/*
 * The six rows of a service's svc_cfg table for its kfk_worker_cfg_t
 * member `m` of config struct `type`, named <P>_KAFKA_BROKERS (default
 * 127.0.0.1:19092; "none": no consumer - an empty value means the default,
 * as for every variable), <P>_CONSUMER_GROUP (default `group_default`),
 * <P>_CONSUMER_INSTANCE_ID (the static member's id, KIP-345: default
 * KFK_WORKER_INSTANCE_HOSTNAME; "none": dynamic membership; else 1..249 of
 * [A-Za-z0-9._-], one per replica, kept across its restarts),
 * <P>_CONSUMER_SESSION_TIMEOUT_MS (KFK_CONSUMER_DEFAULT_SESSION_TIMEOUT_MS;
 * 6000..300000, the broker's group limits), <P>_CONSUMER_BATCH_MAX (100; 1..1000: the most
 * records one transaction handles when records wait) and
 * <P>_CONSUMER_COMMIT_INTERVAL_MS (500; 0..60000: how often the offsets
 * are committed, asynchronously; 0: after every batch). `what` completes
 * the help lines ("the stock saga").
 */
#define KFK_WORKER_CFG_ROWS(P, type, m, group_default, what)                                       \
    {P "_KAFKA_BROKERS",                                                                           \
     SVC_CFG_STR,                                                                                  \
     1,                                                                                            \
     511,                                                                                          \
     "127.0.0.1:19092",                                                                            \
     offsetof(type, m.brokers),                                                                    \
     "Kafka bootstrap servers of " what "; none: no consumer (empty: the default)"},               \
        {P "_CONSUMER_GROUP",                                                                      \
         SVC_CFG_STR,                                                                              \
         1,                                                                                        \
         255,                                                                                      \
         group_default,                                                                            \
         offsetof(type, m.group),                                                                  \
         "Kafka consumer group of " what},                                                         \
        {P "_CONSUMER_INSTANCE_ID",                                                                \
         SVC_CFG_STR,                                                                              \
         1,                                                                                        \
         KFK_CONSUMER_INSTANCE_ID_MAX,                                                             \
         KFK_WORKER_INSTANCE_HOSTNAME,                                                             \
         offsetof(type, m.instance_id),                                                            \
         "static group member id of " what ", one per replica, the same across its restarts "      \
         "(hostname: this host's name; none: dynamic membership)"},                                \
        {P "_CONSUMER_SESSION_TIMEOUT_MS",                                                         \
         SVC_CFG_INT,                                                                              \
         6000,                                                                                     \
         300000,                                                                                   \
         KFK__STR(KFK_CONSUMER_DEFAULT_SESSION_TIMEOUT_MS),                                        \
         offsetof(type, m.session_timeout_ms),                                                     \
         "how long a crashed consumer of " what                                                    \
         " keeps its partitions when it does not come back"},                                      \
        {P "_CONSUMER_BATCH_MAX",                                                                  \
         SVC_CFG_INT,                                                                              \
         1,                                                                                        \
         1000,                                                                                     \
         "100",                                                                                    \
         offsetof(type, m.batch_max),                                                              \
         "most records of " what " handled in one transaction (1: one at a time)"},                \
    {                                                                                              \
        P "_CONSUMER_COMMIT_INTERVAL_MS", SVC_CFG_INT, 0, 60000, "500",                            \
            offsetof(type, m.commit_interval_ms),                                                  \
            "how often the offsets of " what " are committed (0: after every batch)"               \
    }

/*
 * kfk_worker_start for a service: the consumer of `topics` (NULL-terminated)
 * with cfg's brokers, group, instance id (the host's name looked up now for
 * KFK_WORKER_INSTANCE_HOSTNAME; SVC_EINVAL when it is not a valid id),
 * session timeout, batch size and commit interval, client.id
 * client_id, the rest of the defaults, and h. With cfg->brokers "none" it starts
 * nothing: *out NULL, SVC_OK, and the warning line `without` under
 * log_module (which variable said none, and what the service then does not
 * do).
 */
svc_err_t kfk_worker_start_cfg(const kfk_worker_cfg_t *cfg, const char *const *topics,
                               const char *client_id, const kfk_worker_handler_t *h,
                               const char *log_module, const char *without, kfk_worker_t **out,
                               char errbuf[static SVC_ERRBUF_LEN]);

/* The consumer's Prometheus text under prefix (kfk_consumer_metrics), in
 * memory owned by caller (free); NULL when out of memory. Thread-safe. */
char *kfk_worker_metrics_text(kfk_worker_t *w, const char *prefix);

/* Whether the last poll went well; if not, its error in why (len bytes),
 * e.g. for a /readyz body. Thread-safe. */
bool kfk_worker_healthy(kfk_worker_t *w, char *why, size_t len);

#endif /* KFK_WORKER_H */
