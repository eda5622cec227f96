-- The order's half of the stock reservation saga (issue 13, docs/order.md
-- "Status: the saga"): catalog's StockReserved / StockRejected move an order
-- PENDING -> CONFIRMED or PENDING -> CANCELLED, never back.
--   processed_events  the inventory events this service has handled, by
--                     their CloudEvents id (ce_id): recorded in the same
--                     transaction as the event's effect, so a redelivered
--                     event (the relay publishes at least once, a consumer
--                     may crash before its offset commit) has no effect twice
--   cancel_reason     why a CANCELLED order was cancelled, for people
--                     ("insufficient stock: product … wanted 3, available 1");
--                     '' for every other status. The machine-readable
--                     shortages are in the order's OrderCancelled event.
CREATE TABLE processed_events (
    event_id     text        PRIMARY KEY CHECK (event_id <> ''),
    event_type   text        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE orders ADD COLUMN cancel_reason text NOT NULL DEFAULT '';
