/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deliver.h - the RabbitMQ side of the notification service: a pool of
 * delivery threads, each with its own consumer of B.work (prefetch
 * NOTIFY_PREFETCH, manual ack), that POST each job to NOTIFY_WEBHOOK_URL
 * through pkg/resilience's HTTP binding and then settle it:
 *
 *   2xx                       ack: done
 *   transient, chain gave up  the next retry tier (rmq_tier_next of the
 *                             passes so far), the dead-letter queue after
 *                             the last; the move is confirmed before the ack
 *   4xx but 408/425/429       the dead-letter queue at once
 *   stopping                  not settled: RabbitMQ hands it again
 *
 * A delivery thread whose connection fails frees its consumer (its unacked
 * jobs go back to the queue) and reconnects with backoff; the topology is
 * declared again when it is missing (a broker that lost it).
 *
 * Threads: ntf_pool_start / ntf_pool_stop on main's thread; each delivery
 * thread owns its consumer and deliveries; the HTTP client is shared (it is
 * thread-safe), and so are the stats (atomics).
 */
#ifndef NTF_DELIVER_H
#define NTF_DELIVER_H

#include "config.h"
#include "rs/http.h"
#include "stats.h"
#include "webhook/webhook.h"

typedef struct ntf_pool ntf_pool_t; /* opaque */

/* Starts cfg->workers threads. cfg, http, keys and stats are borrowed and
 * must outlive the pool. SVC_ENOMEM or SVC_EINTERNAL (a thread did not
 * start; none is left running). */
svc_err_t ntf_pool_start(const ntf_config_t *cfg, rs_http_client_t *http, const whk_keyset_t *keys,
                         ntf_stats_t *stats, ntf_pool_t **out, char errbuf[static SVC_ERRBUF_LEN]);
/* Stops taking jobs; a delivery in flight finishes (within its deadline)
 * and is settled; joins the threads and frees. NULL-safe. */
void ntf_pool_stop(ntf_pool_t *p);

#endif
