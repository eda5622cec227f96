/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reserve.h - what the catalog decides for an order, as pure functions (no
 * SQL, no Kafka): which lines an OrderCreated asks for, and which of them
 * the locked stock cannot serve. saga.c runs them inside the reservation's
 * transaction (stock.h).
 */
#ifndef CAT_RESERVE_H
#define CAT_RESERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shopmicro/events/v1/events.pb-c.h"
#include "stock.h"
#include "svc/core.h"

typedef Shopmicro__Events__V1__OrderCreated cat_order_created_t;
typedef Shopmicro__Events__V1__StockShortage cat_shortage_t;

/* The order service allows 100 lines per order; a little room above it,
 * so that a future limit change does not turn every big order into poison. */
#define CAT_RESERVE_MAX_LINES 256
/* The order service allows at most 1,000 of a product per line. */
#define CAT_RESERVE_MAX_QUANTITY 1000000

/* One product an order asks for. */
typedef struct cat_line {
    char product_id[37];
    int32_t quantity;
    bool is_uuid; /* false: not a canonical UUID, so certainly no product */
} cat_line_t;

/*
 * The lines of ev, merged by product (quantities summed, first appearance
 * order kept), into out (CAT_RESERVE_MAX_LINES entries) and *n. SVC_EINVAL,
 * with why in reason (reason_len bytes), for an event that can never be
 * served: an order id that is not a UUID, no line, too many lines, a
 * quantity below 1 or a sum above CAT_RESERVE_MAX_QUANTITY, a product id
 * longer than a UUID. A product id that is no UUID is not an error: it is
 * an unknown product, and the order is rejected for it.
 */
svc_err_t cat_reserve_lines(const cat_order_created_t *ev, cat_line_t *out, size_t *n, char *reason,
                            size_t reason_len);

/*
 * The shortages of lines[0..n) against the locked rows: a line whose
 * product is not among rows is unknown (available 0), one whose stock is
 * below its quantity is short. Writes them into out (n entries, each
 * initialised here; product_id points into lines) and returns how many;
 * 0 means every line can be reserved.
 */
size_t cat_reserve_assess(const cat_line_t *lines, size_t n, const cat_stock_row_t *rows,
                          size_t n_rows, cat_shortage_t *out);

#endif
