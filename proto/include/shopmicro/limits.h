/* SPDX-License-Identifier: Apache-2.0 */
/*
 * limits.h - the bounds the services put on the fields of the public requests, in one place:
 * catalog (services/catalog/rpc.c) and order (services/order/lines.c) enforce them with
 * INVALID_ARGUMENT, and the gateway's OpenAPI document declares them (gateway/tools/
 * openapi_schema.c: minLength, maximum, minItems, ...), so that what a client may send is
 * written down once and a property-based test (Schemathesis) can tell a valid request from an
 * invalid one. Lengths count characters (Unicode code points), as svc_utf8_chars does and JSON
 * Schema's minLength/maxLength do.
 */
#ifndef SHOPMICRO_LIMITS_H
#define SHOPMICRO_LIMITS_H

#include <stdint.h>

#define SHOPMICRO_PRODUCT_NAME_MAX_CHARS        200
#define SHOPMICRO_PRODUCT_DESCRIPTION_MAX_CHARS 2000
#define SHOPMICRO_PAGE_SIZE_DEFAULT             50  /* page_size 0 */
#define SHOPMICRO_PAGE_SIZE_MAX                 200 /* a larger page_size is this */
#define SHOPMICRO_CUSTOMER_ID_MAX_CHARS         100
#define SHOPMICRO_PRODUCT_ID_MAX_CHARS          100
#define SHOPMICRO_ORDER_ITEMS_MAX               100  /* <= BatchGetProducts' 100 ids */
#define SHOPMICRO_QUANTITY_MAX                  1000 /* per product, items of one product added up */

typedef enum shopmicro_limit_kind {
    SHOPMICRO_LIMIT_CHARS, /* a string's length in characters */
    SHOPMICRO_LIMIT_VALUE, /* a number's value */
    SHOPMICRO_LIMIT_ITEMS, /* a repeated field's number of entries */
} shopmicro_limit_kind_t;

/* One bound of one field: min <= (length | value | entries) <= max. */
typedef struct shopmicro_limit {
    const char *
        message; /* the proto message's full name, e.g. "shopmicro.catalog.v1.CreateProductRequest" */
    const char *field; /* the field's proto name */
    shopmicro_limit_kind_t kind;
    int64_t min, max;
} shopmicro_limit_t;

/* Whether a field left out (or null: its default, "", 0 or no entries) is outside bound l, so
 * that a request must have the field. */
static inline int shopmicro_limit_needs_field(const shopmicro_limit_t *l)
{
    return l->kind == SHOPMICRO_LIMIT_VALUE ? l->min > 0 || l->max < 0 : l->min > 0;
}

/* Every bound above, by field (static data, ended by a row whose message is NULL). */
extern const shopmicro_limit_t shopmicro_limits[];

#endif
