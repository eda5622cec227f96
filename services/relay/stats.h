/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.h - the relay's counters and gauges, written by the relay's thread
 * and read by pkg/admin's thread (/metrics, /readyz): every field is an
 * atomic, read and written relaxed (each is exact; a page is not a snapshot).
 */
#ifndef RLY_STATS_H
#define RLY_STATS_H

#include <stdatomic.h>

#include "admin/admin.h"

#define RLY_STATS_BUCKETS 8 /* batch sizes: 1 5 10 50 100 500 1000 5000, then +Inf */

typedef struct rly_stats {
    atomic_uint_fast64_t published, produce_errors, batches, batch_rows;
    atomic_uint_fast64_t pruned;       /* published rows deleted by retention */
    atomic_uint_fast64_t dead_letters; /* rows Kafka refused for good, buried */
    atomic_uint_fast64_t batch_hist[RLY_STATS_BUCKETS + 1];
    atomic_int_fast64_t backlog_rows;              /* -1 until the first count     */
    atomic_int_fast64_t oldest_created_ms;         /* Unix ms; 0 = none unpublished */
    atomic_int shards_owned, shards_total, relays; /* lease.h; relays: 0 unknown */
    atomic_int rows_in_flight; /* read, not yet passed by a cursor (a batch runs) */
    atomic_bool kafka_up, db_up;
    char kafka_detail[SVC_ERRBUF_LEN], db_detail[SVC_ERRBUF_LEN];
    atomic_flag lock; /* guards the two details */
} rly_stats_t;

void rly_stats_init(rly_stats_t *s);
/* One batch of n claimed rows (n > 0). */
void rly_stats_batch(rly_stats_t *s, int n);
/* Records the state of a dependency and the reason it is down ("" if up). */
void rly_stats_set(rly_stats_t *s, bool kafka, bool up, const char *detail);

/* pkg/admin callbacks; ctx is the rly_stats_t. */
void rly_stats_metrics(void *ctx, admin_buf_t *out);
bool rly_stats_ready(void *ctx, admin_buf_t *out);

#endif
