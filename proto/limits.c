/* SPDX-License-Identifier: Apache-2.0 */
/* limits.c - the table of limits.h. */
#include "shopmicro/limits.h"

#define CATALOG "shopmicro.catalog.v1."
#define ORDER   "shopmicro.order.v1."

const shopmicro_limit_t shopmicro_limits[] = {
    {CATALOG "CreateProductRequest", "name", SHOPMICRO_LIMIT_CHARS, 1,
     SHOPMICRO_PRODUCT_NAME_MAX_CHARS},
    {CATALOG "CreateProductRequest", "description", SHOPMICRO_LIMIT_CHARS, 0,
     SHOPMICRO_PRODUCT_DESCRIPTION_MAX_CHARS},
    {CATALOG "CreateProductRequest", "price_cents", SHOPMICRO_LIMIT_VALUE, 0, INT64_MAX},
    {CATALOG "CreateProductRequest", "stock", SHOPMICRO_LIMIT_VALUE, 0, INT32_MAX},
    {CATALOG "ListProductsRequest", "page_size", SHOPMICRO_LIMIT_VALUE, 0, INT32_MAX},
    /* empty: the caller (the token's subject); another one than the caller is refused */
    {ORDER "CreateOrderRequest", "customer_id", SHOPMICRO_LIMIT_CHARS, 0,
     SHOPMICRO_CUSTOMER_ID_MAX_CHARS},
    {ORDER "CreateOrderRequest", "items", SHOPMICRO_LIMIT_ITEMS, 1, SHOPMICRO_ORDER_ITEMS_MAX},
    {ORDER "OrderItem", "product_id", SHOPMICRO_LIMIT_CHARS, 1, SHOPMICRO_PRODUCT_ID_MAX_CHARS},
    {ORDER "OrderItem", "quantity", SHOPMICRO_LIMIT_VALUE, 1, SHOPMICRO_QUANTITY_MAX},
    {0},
};
