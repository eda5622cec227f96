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
 * kfk_worker_consumer's consumer may be read from any thread
 * (kfk_consumer_stats, kfk_consumer_metrics), and kfk_worker_healthy called
 * from any thread.
 */
#ifndef KFK_WORKER_H
#define KFK_WORKER_H

#include "kafka/consumer.h"

typedef struct kfk_worker kfk_worker_t; /* opaque */

/*
 * Creates the consumer from o (validated; on_log must be NULL: the worker
 * sets its own) and starts the thread. log_module names the worker's log
 * lines (e.g. "catalog.saga"); it is copied. On SVC_OK *out is owned by
 * caller: kfk_worker_stop. A broker that is down is not an error here (the
 * thread logs it and keeps trying).
 */
svc_err_t kfk_worker_start(const kfk_consumer_opts_t *o, const char *log_module,
                           kfk_worker_t **out, char *errbuf);

/* Stops the consumer, joins the thread, closes (commits what is done,
 * leaves the group) and frees. NULL-safe. */
void kfk_worker_stop(kfk_worker_t *w);

/* The consumer, for its stats and metrics (borrowed; valid until stop). */
const kfk_consumer_t *kfk_worker_consumer(const kfk_worker_t *w);

/* Whether the last poll went well; if not, its error in why (len bytes),
 * e.g. for a /readyz body. Thread-safe. */
bool kfk_worker_healthy(kfk_worker_t *w, char *why, size_t len);

#endif /* KFK_WORKER_H */
