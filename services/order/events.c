/* SPDX-License-Identifier: Apache-2.0 */
/* events.c - the order's events as protobuf (see events.h). */
#include <stdlib.h>

#include "events.h"
#include "shopmicro/events/v1/events.pb-c.h"

uint8_t *ord_event_created_pack(const ord_new_order_t *o, const char *order_id,
                                const char *created_at, size_t *len)
{
    Shopmicro__Events__V1__OrderCreated ev = SHOPMICRO__EVENTS__V1__ORDER_CREATED__INIT;
    Shopmicro__Events__V1__OrderLine lines[ORD_MAX_ITEMS], *items[ORD_MAX_ITEMS];
    size_t n = o->n_lines < ORD_MAX_ITEMS ? o->n_lines : ORD_MAX_ITEMS;
    uint8_t *pb;

    for (size_t i = 0; i < n; i++) {
        shopmicro__events__v1__order_line__init(&lines[i]);
        lines[i].product_id = (char *)o->lines[i].product_id;
        lines[i].quantity = o->lines[i].quantity;
        lines[i].unit_price_cents = o->lines[i].unit_price_cents;
        items[i] = &lines[i];
    }
    ev.order_id = (char *)order_id;
    ev.customer_id = (char *)o->customer_id;
    ev.n_items = n;
    ev.items = items;
    ev.total_cents = o->total_cents;
    ev.created_at = (char *)created_at;
    *len = shopmicro__events__v1__order_created__get_packed_size(&ev);
    pb = malloc(*len + 1); /* + 1: an empty message is still an allocation */
    if (pb != NULL)
        shopmicro__events__v1__order_created__pack(&ev, pb);
    return pb;
}
