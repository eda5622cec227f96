/* SPDX-License-Identifier: Apache-2.0 */
/*
 * saga.h - the order service's half of the stock reservation saga (issue 13,
 * docs/order.md "Status: the saga"): the handler of catalog's inventory
 * events on shopmicro.inventory.v1. StockReserved moves its order PENDING ->
 * CONFIRMED, StockRejected PENDING -> CANCELLED with a reason; a status
 * never moves back. The effect, the event id and the order's own event
 * (OrderConfirmed / OrderCancelled, in the outbox) are in one transaction
 * (ord_store_saga), shared by a batch of events (ord_saga_batch_ops, up to
 * ORDER_CONSUMER_BATCH_MAX); pkg/kafka's consumer commits the offsets only
 * after it.
 *
 * Verdicts (kafka/consumer.h): KFK_HANDLED (moved, or the order had already
 * left PENDING: only the event id is recorded), KFK_DUPLICATE (the event id
 * was handled before), KFK_POISON (no ce_id, no / unknown / newer-schema
 * ce_type, an undecodable payload, a malformed order id, no such order),
 * KFK_RETRY (the database is unavailable or slow: never poison).
 *
 * Threads: the handler runs on the consumer's thread (kafka/worker.h), with
 * a store that only that thread uses. The decoding is pure and exposed for
 * tests.
 */
#ifndef ORD_SAGA_H
#define ORD_SAGA_H

#include "kafka/consumer.h"
#include "store.h"

#define ORD_SAGA_TOPIC         "shopmicro.inventory.v1"
#define ORD_SAGA_RESERVED_TYPE "shopmicro.inventory.v1.StockReserved"
#define ORD_SAGA_REJECTED_TYPE "shopmicro.inventory.v1.StockRejected"
#define ORD_SAGA_LOG_MODULE    "order.saga"

/* Bounds of what an event may carry (longer is poison, never cut). */
#define ORD_SAGA_CE_ID_MAX      256 /* bytes of ce_id, NUL included      */
#define ORD_SAGA_CE_TYPE_MAX    256
#define ORD_SAGA_REQUEST_ID_MAX 128 /* longer x-request-id: left out     */
/* The cancel reason: clauses that do not fit are summed up as
 * "; and N more" (the shortages themselves all stay in the event). */
#define ORD_SAGA_REASON_MAX 1024

/* The handler's state (kfk_consumer_opts_t.ctx). */
typedef struct ord_saga {
    ord_store_t *store; /* borrowed; used only by the consumer's thread */
} ord_saga_t;

/* kfk_handler_fn for shopmicro.inventory.v1; ctx is an ord_saga_t. It
 * writes only inside ord_saga_batch_ops' begin .. commit. */
kfk_verdict_t ord_saga_handle(void *ctx, const kfk_record_t *r, char *reason);
extern const kfk_batch_ops_t ord_saga_batch_ops;

/* ------------------------------------------------------------------------
 * Pure parts, exposed for tests.
 * ------------------------------------------------------------------------ */

/* A record decoded into what it asks of its order. */
typedef struct ord_saga_decoded {
    ord_saga_event_t ev; /* points into the fields below  */
    char ce_id[ORD_SAGA_CE_ID_MAX];
    char ce_type[ORD_SAGA_CE_TYPE_MAX];
    char request_id[ORD_SAGA_REQUEST_ID_MAX];
    char reason[ORD_SAGA_REASON_MAX]; /* StockRejected only            */
    ProtobufCMessage *msg;            /* the unpacked payload; owned   */
} ord_saga_decoded_t;

/*
 * Reads r's headers and payload into d. KFK_HANDLED when d holds an event
 * to apply (free it with ord_saga_decoded_free); otherwise KFK_POISON with
 * the reason (KFK_REASON_LEN bytes) and nothing to free. Pure.
 */
kfk_verdict_t ord_saga_decode(const kfk_record_t *r, ord_saga_decoded_t *d, char *reason);
void ord_saga_decoded_free(ord_saga_decoded_t *d);

/*
 * The cancel reason for people, from StockRejected's shortages, in their
 * order: "insufficient stock: product <id> wanted 3, available 1; unknown
 * product <id>"; "stock reservation rejected" when there are none. Whole
 * clauses only (never a cut UTF-8 sequence): those that do not fit in cap
 * bytes are counted as "; and N more". Returns strlen(out). Pure.
 */
size_t ord_saga_cancel_reason(ord_shortage_t *const *shortages, size_t n, char *out, size_t cap);

/* The verdict for a database error of ord_store_saga: KFK_POISON only for
 * SVC_EINVAL (Postgres refused a value: the same record fails every time)
 * of a record alone; KFK_RETRY for everything else (down, timed out,
 * aborted, ...), and for SVC_EINVAL in a batch (the batch is rolled back
 * and its records handed again alone, where this one is poison). Pure. */
kfk_verdict_t ord_saga_db_verdict(svc_err_t err, bool batched);

#endif
