/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lines.h - CreateOrder's rules that need neither network nor database:
 * validating a request, merging repeated products into lines, the total,
 * and the request fingerprint behind idempotency keys.
 *
 * Rules (docs/order.md repeats them for users):
 *   customer_id         1-100 characters of UTF-8 text
 *   items               1-100 entries
 *   items[i].product_id 1-100 characters of UTF-8 text, compared byte for byte
 *   items[i].quantity   1-1000
 *   items[i].unit_price_cents is ignored: prices come from the catalog
 * Items naming the same product are merged into one line (quantities added,
 * at the position of the first one); the merged quantity must still be at
 * most 1000, so splitting a product over several items cannot lift the cap.
 * Field names in messages are 0-based ("items[2].quantity must be 1-1000").
 */
#ifndef ORD_LINES_H
#define ORD_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "shopmicro/limits.h" /* the bounds checked here are the OpenAPI document's */
#include "shopmicro/order/v1/order.pb-c.h"
#include "svc/core.h"

#define ORD_CUSTOMER_ID_MAX_CHARS SHOPMICRO_CUSTOMER_ID_MAX_CHARS
#define ORD_PRODUCT_ID_MAX_CHARS  SHOPMICRO_PRODUCT_ID_MAX_CHARS
#define ORD_MAX_ITEMS             SHOPMICRO_ORDER_ITEMS_MAX /* <= BatchGetProducts' 100 ids (catalog.proto) */
#define ORD_QUANTITY_MAX          SHOPMICRO_QUANTITY_MAX
#define ORD_FINGERPRINT_LEN       65 /* 64 lower-case hex digits + NUL */

typedef Shopmicro__Order__V1__OrderItem ord_item_t;

/* One merged line of an order. */
typedef struct ord_line {
    const char *product_id;   /* borrowed from the request */
    int32_t quantity;         /* the sum over the request's items of this product */
    int64_t unit_price_cents; /* from the catalog; -1 until priced */
} ord_line_t;

/*
 * Validates a CreateOrder request and merges its items into lines, in order
 * of first appearance. items borrowed (the lines point into them). On
 * SVC_OK *n_lines (>= 1) lines are filled; SVC_EINVAL names the first bad
 * field in errbuf, whose text starts with it, and puts its path in field
 * ("customer_id", "items", "items[2].quantity": BadRequest's field).
 */
#define ORD_FIELD_PATH_LEN 48
svc_err_t ord_lines_build(const char *customer_id, ord_item_t *const *items, size_t n_items,
                          ord_line_t lines[ORD_MAX_ITEMS], size_t *n_lines,
                          char field[static ORD_FIELD_PATH_LEN],
                          char errbuf[static SVC_ERRBUF_LEN]);

/* Sum of quantity x unit_price_cents. SVC_ERANGE when it does not fit in
 * int64; SVC_EINTERNAL for a line not (correctly) priced. */
svc_err_t ord_lines_total(const ord_line_t *lines, size_t n, int64_t *total,
                          char errbuf[static SVC_ERRBUF_LEN]);

/*
 * The request's fingerprint: SHA-256, in hex, of a length-prefixed canonical
 * form of customer_id and the merged lines sorted by product id. Reordering
 * the items, or splitting a quantity over repeated items, gives the same
 * fingerprint; any other change gives a different one. Prices are not part
 * of it. OpenSSL's SHA-256 (EVP); SVC_ENOMEM when it cannot get memory.
 */
svc_err_t ord_lines_fingerprint(const char *customer_id, const ord_line_t *lines, size_t n,
                                char out[ORD_FINGERPRINT_LEN]);

#endif
