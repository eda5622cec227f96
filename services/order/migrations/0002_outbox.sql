-- The transactional outbox: written in the same transaction as the order, so
-- an event exists exactly when its order does. A relay publishes the rows
-- whose published_at is NULL (oldest first) and then sets it; the partial
-- index keeps that scan proportional to the backlog, not to the history.
CREATE TABLE outbox (
    id             uuid        PRIMARY KEY,        -- the event id consumers dedupe on
    aggregate_type text        NOT NULL,           -- 'order'
    aggregate_id   text        NOT NULL,           -- the order id: the Kafka key
    event_type     text        NOT NULL,           -- 'OrderCreated'
    payload        jsonb       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    published_at   timestamptz NULL
);
CREATE INDEX outbox_unpublished ON outbox (created_at, id) WHERE published_at IS NULL;
