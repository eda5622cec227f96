/* SPDX-License-Identifier: Apache-2.0 */
/*
 * events.h - the order's events in their wire form (docs/events.md): the
 * protobuf payload and the CloudEvents attributes the relay copies onto the
 * Kafka record as they are. Pure: no SQL, no network.
 */
#ifndef ORD_EVENTS_H
#define ORD_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define ORD_EVENT_TOPIC          "shopmicro.orders.v1"
#define ORD_EVENT_CE_SOURCE      "/shopmicro/order"
#define ORD_EVENT_CREATED_TYPE   "shopmicro.order.v1.OrderCreated"
#define ORD_EVENT_CONFIRMED_TYPE "shopmicro.order.v1.OrderConfirmed"
#define ORD_EVENT_CANCELLED_TYPE "shopmicro.order.v1.OrderCancelled"

/*
 * OrderCreated for the new order o (its lines as priced), id order_id,
 * created_at in RFC 3339. Returns the packed protobuf (owned by caller,
 * free) and its length in *len; NULL when out of memory.
 */
uint8_t *ord_event_created_pack(const ord_new_order_t *o, const char *order_id,
                                const char *created_at, size_t *len);

/* OrderConfirmed of order_id at `at` (RFC 3339), packed as above. */
uint8_t *ord_event_confirmed_pack(const char *order_id, const char *at, size_t *len);

/* OrderCancelled of ev's order at `at`: ev's reason and shortages. Packed
 * as above. */
uint8_t *ord_event_cancelled_pack(const ord_saga_event_t *ev, const char *at, size_t *len);

#endif
