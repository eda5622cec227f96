-- The catalog's half of the stock reservation saga (docs/events.md §5).
--
-- processed_events: every event this service has handled, by its CloudEvents
-- id. Written in the same transaction as the event's effect, so a
-- redelivered event (a crash before the Kafka offset commit, a replay of the
-- topic) finds its row and changes nothing.
CREATE TABLE processed_events (
    event_id     text        PRIMARY KEY CHECK (event_id <> ''),
    event_type   text        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now()
);

-- One decision per order, whatever event carried it: a second OrderCreated
-- for the same order under another event id (a producer bug, a manual
-- re-publish) cannot reserve twice.
CREATE TABLE stock_decisions (
    order_id   uuid        PRIMARY KEY,
    event_id   text        NOT NULL,
    outcome    text        NOT NULL CHECK (outcome IN ('RESERVED', 'REJECTED')),
    decided_at timestamptz NOT NULL DEFAULT now()
);

-- What a reserved order took: the stock went down by exactly these rows.
CREATE TABLE stock_reservations (
    order_id   uuid    NOT NULL REFERENCES stock_decisions (order_id),
    product_id uuid    NOT NULL REFERENCES products (id),
    quantity   integer NOT NULL CHECK (quantity > 0),
    PRIMARY KEY (order_id, product_id)
);

-- The transactional outbox, in the same shape as the order service's
-- (services/order/migrations 0002 and 0005), so that the one relay program
-- publishes either database's events: the row carries its wire form (topic,
-- CloudEvents type and source, protobuf payload, request id), and jsonb the
-- same event as protojson, for psql.
CREATE TABLE outbox (
    id             uuid        PRIMARY KEY,
    seq            bigint      GENERATED ALWAYS AS IDENTITY,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    event_type     text        NOT NULL,
    payload        jsonb       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    published_at   timestamptz NULL,
    topic          text        NOT NULL CHECK (topic <> ''),
    ce_type        text        NOT NULL CHECK (ce_type <> ''),
    ce_source      text        NOT NULL CHECK (ce_source <> ''),
    payload_pb     bytea       NOT NULL,
    request_id     text        NOT NULL
);
CREATE INDEX outbox_relay_queue ON outbox (seq) WHERE published_at IS NULL;
CREATE INDEX outbox_relay_aggregate ON outbox (aggregate_id, seq) WHERE published_at IS NULL;
