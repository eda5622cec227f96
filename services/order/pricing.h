/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pricing.h - live prices from the catalog, through pkg/resilience.
 *
 * One guarded client (rs_grpc_client_t) serves the whole process: it is
 * thread-safe, and one breaker and one retry budget per upstream is the point
 * (per-worker clients would each need five failures to open).
 */
#ifndef ORD_PRICING_H
#define ORD_PRICING_H

#include "config.h"
#include "lines.h"
#include "rs/grpc.h"

#define ORD_CATALOG_BATCH_GET "/shopmicro.catalog.v1.CatalogService/BatchGetProducts"

/*
 * The catalog client from the ORDER_CATALOG_* settings: upstream "catalog",
 * method table {BatchGetProducts: RS_IDEMPOTENT}. Call after rpc_init() (it starts
 * a thread). On SVC_OK *out is owned by caller (rs_grpc_client_free, after
 * the server has stopped). SVC_EINVAL names a bad setting in errbuf.
 */
svc_err_t ord_catalog_new(const ord_config_t *cfg, rs_grpc_client_t **out,
                          char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Sets unit_price_cents of every line (distinct products) from one catalog
 * BatchGetProducts call through the resilience chain (retried as a whole;
 * deadline_ns, the incoming call's, is its overall deadline). The calling
 * thread blocks until it is over. Since an order is one call, a half-open
 * breaker's trial is a whole order: the first order after a catalog outage
 * is priced like any other, whatever its number of lines. Result:
 *
 *   SVC_EINVAL     "unknown product <id>" (the first line the catalog does
 *                  not know)
 *   SVC_ETIMEDOUT  the deadline passed
 *   SVC_EUNAVAIL   catalog unavailable: breaker open, retries spent, budget
 *                  exhausted, bulkhead full, any other catalog failure
 *   SVC_EINTERNAL  the catalog answered with a negative price, or not one
 *                  product per id, or refused the call (INVALID_ARGUMENT,
 *                  UNIMPLEMENTED: a catalog older than BatchGetProducts)
 *
 * with a message naming the product, or the resilience reason and the
 * number of attempts, in errbuf, and what the answer's details say in
 * *fault. lines borrowed. Thread-safe.
 */
typedef struct ord_price_fault {
    /* When to come back (our breaker's cooldown, a full bulkhead, catalog's
     * own pushback), or 0. */
    uint32_t retry_after_ms;
    /* ErrorInfo.reason (rpc.h, "Error details"), static: PRODUCT_NOT_FOUND,
     * CATALOG_MISMATCH (INTERNAL), or the catalog call's resilience verdict
     * (BREAKER_OPEN, DEADLINE, ATTEMPTS_EXHAUSTED, ...: rs_reason_constant). */
    const char *reason;
    int line; /* PRODUCT_NOT_FOUND: the line whose product is unknown; else -1 */
} ord_price_fault_t;

svc_err_t ord_price_lines(rs_grpc_client_t *cl, ord_line_t *lines, size_t n, uint64_t deadline_ns,
                          ord_price_fault_t *fault, char errbuf[static SVC_ERRBUF_LEN]);

#endif
