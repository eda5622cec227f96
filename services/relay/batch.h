/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batch.h - one batch of the relay: read the rows after the cursor of every
 * leased shard (store.h), publish each as a CloudEvent (pkg/kafka) in that
 * order, wait for every delivery report, then move each shard's cursor over
 * its rows the broker acknowledged, up to the first that failed.
 *
 * A batch is produced in waves: each shard's rows in order, a wave ending
 * a shard's run at the first row whose key the wave already holds; the
 * wave's reports awaited, the cursors moved, then the next wave. So a key's
 * next event is produced only once its previous one is acknowledged and
 * passed by the cursor: a failed event is never overtaken by its successor
 * (the idempotent producer may drop a timed-out message while later ones
 * of the partition get through), and after a crash only the last wave is
 * published again, a duplicate always before its key's next event. A
 * backlog of distinct orders is one wave; a burst of one order's events
 * costs a broker round trip per event.
 *
 * Batches overlap (two in flight): batch N+1 is read and its first
 * wave produced while N waits for its reports, so a row committed meanwhile
 * goes out without waiting for N's acknowledgement and cursor move, and a
 * backlog's reads and the broker's work go on side by side. N+1's first
 * wave holds back every key of the batches in flight; its cursors move only
 * after theirs.
 *
 * Owns the cursors of the leased shards between batches. Not thread-safe:
 * the relay's thread (the delivery reports run inside its producer polls).
 */
#ifndef RLY_BATCH_H
#define RLY_BATCH_H

#include <stdatomic.h>

#include "kafka/kafka.h"
#include "lease.h"
#include "store.h"

typedef struct rly_batch rly_batch_t;

typedef struct rly_batch_opts {
    int stop_fd;           /* a signalfd: SIGTERM while waiting for reports     */
    int64_t drain_ms;      /* after a stop signal, how long reports may take    */
    int64_t overdue_ms;    /* reports waited longer than this count as overdue  */
    bool *stopping;        /* set once a stop signal arrived                    */
    atomic_int *in_flight; /* the batch's rows while it runs, then 0; for the
                              admin thread (relaxed)                          */
    /* Called about every 50 ms while reports are overdue (Kafka is down
     * with messages in flight): the caller's readiness and gauges must not
     * wait for the batch. */
    void (*on_overdue)(void *ctx, int pending, const char *reason); /* reason: the
                                                                       first failed report's, "" when none failed yet */
    void *ctx;
} rly_batch_opts_t;

typedef struct rly_batch_result {
    int read, published, failed; /* published: rows the cursors passed      */
    int dead;                    /* rows Kafka refused for good, buried and passed        */
    bool more;                   /* a shard returned a full batch: more may wait          */
    bool held;                   /* committed rows wait for an older transaction to end   */
    svc_err_t db_err;
    char reason[SVC_ERRBUF_LEN]; /* the first failure                        */
    double read_ms, produce_ms, reports_ms, advance_ms;
} rly_batch_result_t;

/* rows: the most rows one batch reads (RELAY_BATCH_SIZE). The producer is
 * borrowed; its on_delivery must be rly_batch_on_delivery. *out owned by
 * caller; free it after the producer (late reports write into it). */
svc_err_t rly_batch_new(kfk_producer_t *producer, int rows, rly_batch_t **out);
void rly_batch_free(rly_batch_t *b);
void rly_batch_on_delivery(void *ctx, void *opaque, svc_err_t err, const char *reason);

/* Reads the cursors of the shards the lease holds from the table (only
 * with nothing in flight). */
svc_err_t rly_batch_load_cursors(rly_batch_t *b, rly_store_t *st, const rly_lease_t *l,
                                 char errbuf[static SVC_ERRBUF_LEN]);
/* How many batches are in flight, and how many may be. */
int rly_batch_flying(const rly_batch_t *b);
int rly_batch_capacity(const rly_batch_t *b);
/* Reads a batch after the newest one in flight (or the cursors) and
 * produces its first wave, keys of the batches in flight held back; it is
 * in flight once it read rows. res: read, held, more, db_err, read/produce
 * times. Not at capacity. */
void rly_batch_start(rly_batch_t *b, rly_store_t *st, const rly_batch_opts_t *o,
                     rly_batch_result_t *res);
/* Finishes the oldest batch in flight: its waves to the end, the cursors
 * moved; res is its whole outcome. A row of it left unpublished (failed,
 * a stop) drops the batch after it too (its reports awaited), and reads
 * start from the cursors again. */
void rly_batch_finish(rly_batch_t *b, rly_store_t *st, const rly_batch_opts_t *o,
                      rly_batch_result_t *res);

#endif
