/* SPDX-License-Identifier: Apache-2.0 */
/* events.c - the order's events as protobuf (see events.h). */
#include <stdlib.h>

#include "events.h"
#include "shopmicro/events/v1/events.pb-c.h"

/* The packed message m; + 1: an empty message is still an allocation. */
static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
    uint8_t *pb;

    *len = protobuf_c_message_get_packed_size(m);
    pb = malloc(*len + 1);
    if (pb != NULL)
        protobuf_c_message_pack(m, pb);
    return pb;
}

uint8_t *ord_event_created_pack(const ord_new_order_t *o, const char *order_id,
                                const char *created_at, size_t *len)
{
    Shopmicro__Events__V1__OrderCreated ev = SHOPMICRO__EVENTS__V1__ORDER_CREATED__INIT;
    Shopmicro__Events__V1__OrderLine lines[ORD_MAX_ITEMS], *items[ORD_MAX_ITEMS];
    size_t n = o->n_lines < ORD_MAX_ITEMS ? o->n_lines : ORD_MAX_ITEMS;

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
    return pack(&ev.base, len);
}

uint8_t *ord_event_confirmed_pack(const char *order_id, const char *at, size_t *len)
{
    Shopmicro__Events__V1__OrderConfirmed ev = SHOPMICRO__EVENTS__V1__ORDER_CONFIRMED__INIT;

    ev.order_id = (char *)order_id;
    ev.confirmed_at = (char *)at;
    return pack(&ev.base, len);
}

uint8_t *ord_event_cancelled_pack(const ord_saga_event_t *e, const char *at, size_t *len)
{
    Shopmicro__Events__V1__OrderCancelled ev = SHOPMICRO__EVENTS__V1__ORDER_CANCELLED__INIT;

    ev.order_id = (char *)e->order_id;
    ev.reason = (char *)e->reason;
    ev.n_shortages = e->n_shortages;
    ev.shortages = e->shortages;
    ev.cancelled_at = (char *)at;
    return pack(&ev.base, len);
}
