/* SPDX-License-Identifier: Apache-2.0 */
/* reserve.c - the catalog's decision for an order (see reserve.h). */
#include <stdio.h>
#include <string.h>

#include "reserve.h"

/* Postgres prints UUIDs in lower case, and an order may name one in upper
 * case: one spelling, so that the lines merge and match the locked rows. */
static void lower(const char *id, char out[37])
{
    size_t i = 0;

    for (; id[i] != '\0' && i < 36; i++)
        out[i] = id[i] >= 'A' && id[i] <= 'Z' ? (char)(id[i] - 'A' + 'a') : id[i];
    out[i] = '\0';
}

static cat_line_t *find_line(cat_line_t *lines, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(lines[i].product_id, id) == 0)
            return &lines[i];
    return NULL;
}

svc_err_t cat_reserve_lines(const cat_order_created_t *ev, cat_line_t *out, size_t *n, char *reason,
                            size_t reason_len)
{
    *n = 0;
    if (ev->order_id == NULL || !svc_is_uuid(ev->order_id)) {
        snprintf(reason, reason_len, "OrderCreated: order_id is not a UUID");
        return SVC_EINVAL;
    }
    if (ev->n_items == 0 || ev->n_items > CAT_RESERVE_MAX_LINES) {
        snprintf(reason, reason_len, "OrderCreated %s: %zu lines (1..%d)", ev->order_id,
                 ev->n_items, CAT_RESERVE_MAX_LINES);
        return SVC_EINVAL;
    }
    for (size_t i = 0; i < ev->n_items; i++) {
        const Shopmicro__Events__V1__OrderLine *it = ev->items[i];
        const char *id = it->product_id != NULL ? it->product_id : "";
        char canon[37];
        cat_line_t *l;

        if (it->quantity < 1 || strlen(id) > 36) {
            snprintf(reason, reason_len, "OrderCreated %s: line %zu: %s", ev->order_id, i + 1,
                     it->quantity < 1 ? "quantity below 1" : "product_id longer than a UUID");
            return SVC_EINVAL;
        }
        lower(id, canon);
        l = find_line(out, *n, canon);
        if (l == NULL) {
            l = &out[(*n)++];
            memcpy(l->product_id, canon, sizeof l->product_id);
            l->quantity = 0;
            l->is_uuid = svc_is_uuid(canon);
        }
        if (it->quantity > CAT_RESERVE_MAX_QUANTITY - l->quantity) {
            snprintf(reason, reason_len, "OrderCreated %s: product %s: quantity above %d",
                     ev->order_id, id, CAT_RESERVE_MAX_QUANTITY);
            return SVC_EINVAL;
        }
        l->quantity += it->quantity;
    }
    return SVC_OK;
}

size_t cat_reserve_assess(const cat_line_t *lines, size_t n, const cat_stock_row_t *rows,
                          size_t n_rows, cat_shortage_t *out)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++) {
        const cat_stock_row_t *row = NULL;

        for (size_t j = 0; lines[i].is_uuid && j < n_rows && row == NULL; j++)
            if (strcmp(rows[j].id, lines[i].product_id) == 0)
                row = &rows[j];
        if (row != NULL && row->stock >= lines[i].quantity)
            continue;
        shopmicro__events__v1__stock_shortage__init(&out[k]);
        out[k].product_id = (char *)lines[i].product_id;
        out[k].wanted = lines[i].quantity;
        out[k].available = row != NULL ? row->stock : 0;
        out[k].unknown_product = row == NULL;
        k++;
    }
    return k;
}
