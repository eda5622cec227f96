/* SPDX-License-Identifier: Apache-2.0 */
/*
 * saga.h - the catalog's half of the stock reservation saga (docs/events.md
 * §5): a consumer of shopmicro.orders.v1 (group CATALOG_CONSUMER_GROUP)
 * that answers every OrderCreated with StockReserved or StockRejected on
 * shopmicro.inventory.v1, through the catalog's outbox.
 *
 * For each OrderCreated, in the transaction of its batch (stock.h; the
 * consumer begins and commits it: cat_saga_batch_ops, up to
 * CATALOG_CONSUMER_BATCH_MAX records): the event id is claimed (a repeat
 * changes nothing), the products are locked, and either every line's stock
 * is taken or none is; the decision and the outbox row are written. The
 * offsets are committed after the commit (pkg/kafka). Poison
 * (dead-lettered): an unknown or newer ce_type, no ce_id, a value that is no
 * OrderCreated, an order that can never be served (reserve.h). A database
 * that fails is never poison: the record is retried with backoff.
 *
 * Threads: the consumer's own thread (kfk_worker) runs the handler and owns
 * the saga's database connection; start and stop run on the main thread.
 */
#ifndef CAT_SAGA_H
#define CAT_SAGA_H

#include "admin/admin.h"
#include "config.h"
#include "kafka/consumer.h"

#define CAT_SAGA_TOPIC_IN  "shopmicro.orders.v1"
#define CAT_SAGA_TOPIC_OUT "shopmicro.inventory.v1"
#define CAT_SAGA_CE_SOURCE "/shopmicro/catalog"
#define CAT_SAGA_RESERVED  "shopmicro.inventory.v1.StockReserved"
#define CAT_SAGA_REJECTED  "shopmicro.inventory.v1.StockRejected"

typedef struct cat_saga cat_saga_t;

/* Starts the consumer. With cfg->kafka_brokers "none" it starts nothing
 * (*out NULL, one log line says orders then stay PENDING). */
svc_err_t cat_saga_start(const cat_config_t *cfg, cat_saga_t **out,
                         char errbuf[static SVC_ERRBUF_LEN]);
/* Stops the consumer (the record in hand finishes or is handed again
 * later), then frees. NULL-safe. */
void cat_saga_stop(cat_saga_t *s);

/* The admin port's part (pkg/ops; s / ctx a cat_saga_t, NULL when the
 * saga is off): /metrics gets the consumer's metrics under
 * shopmicro_catalog_saga_consumer_* and the decisions under
 * shopmicro_catalog_saga_{reserved,rejected}_total; the check fails while
 * the consumer's last poll failed (broker gone, database down). Run on the
 * admin and health threads: they read only atomics and the worker's
 * guarded state. */
void cat_saga_metrics(void *ctx, admin_buf_t *out);
void cat_saga_check(const cat_saga_t *s, admin_check_t *c);

/* The handler and its transaction, for tests: ctx is a cat_saga_t. The
 * handler writes only inside begin .. commit. */
kfk_verdict_t cat_saga_handle(void *ctx, const kfk_record_t *r, char *reason);
extern const kfk_batch_ops_t cat_saga_batch_ops;

/* A saga without a consumer, its handler driven by a test (dsn: catalog's
 * database, migrated). Free with cat_saga_stop. */
svc_err_t cat_saga_new_detached(const char *dsn, int statement_timeout_ms, cat_saga_t **out,
                                char errbuf[static SVC_ERRBUF_LEN]);

#endif
