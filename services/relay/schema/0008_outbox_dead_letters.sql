-- Rows Kafka refuses for good (services/relay, docs/events.md §3, "Rows Kafka
-- refuses for good"): larger than the producer or the broker takes, or
-- invalid. Retrying such a row can only fail again, and since a shard's
-- cursor stops before a failed row, every later event of the shard would
-- wait behind it for ever. So the relay copies the row here first, then its
-- cursor passes it. Embedded in order's and catalog's migrations, like 0007.
-- The outbox row itself goes with retention; the copy here stays until
-- someone deals with it (fix and re-insert as a new outbox row, or delete).
CREATE TABLE outbox_dead_letters (
    id           uuid        PRIMARY KEY, -- the outbox row's id (its ce_id)
    shard        smallint    NOT NULL,
    aggregate_id text        NOT NULL,    -- the Kafka key
    event_type   text        NOT NULL,
    topic        text        NOT NULL,
    ce_type      text        NOT NULL,
    payload_pb   bytea       NOT NULL,
    created_at   timestamptz NOT NULL,    -- the outbox row's
    reason       text        NOT NULL,    -- why Kafka refused it
    dead_at      timestamptz NOT NULL DEFAULT now()
);
