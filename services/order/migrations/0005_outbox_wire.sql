-- What a relay needs to publish an outbox row as-is, so that one generic relay
-- program serves every service's outbox (order's now, catalog's next): the
-- service that writes the row also encodes its event.
--   seq         the order rows were written in: the relay claims oldest first
--               by it, and per aggregate strictly in it (created_at is the
--               transaction's start, equal for rows of one transaction, and
--               the uuid id is random)
--   topic       the Kafka topic
--   ce_type     the CloudEvents type, e.g. shopmicro.order.v1.OrderCreated
--   ce_source   the CloudEvents source, e.g. /shopmicro/order
--   payload_pb  the event as protobuf binary: the Kafka record's value
--   request_id  x-request-id of the call that caused the event ('' if none)
-- The jsonb payload stays: it is the same event as protojson, for psql.
-- Rows written before this migration have no encoding (payload_pb NULL);
-- the relay leaves them alone (nothing consumed events then).
ALTER TABLE outbox
    ADD COLUMN seq        bigint GENERATED ALWAYS AS IDENTITY,
    ADD COLUMN topic      text,
    ADD COLUMN ce_type    text,
    ADD COLUMN ce_source  text,
    ADD COLUMN payload_pb bytea,
    ADD COLUMN request_id text;
ALTER TABLE outbox ADD CONSTRAINT outbox_wire_complete
    CHECK (payload_pb IS NULL OR (topic <> '' AND ce_type <> '' AND ce_source <> ''
                                  AND request_id IS NOT NULL));
-- The relay's two scans: the queue in seq order, and "has this aggregate an
-- older unpublished row" (its per-aggregate ordering rule).
CREATE INDEX outbox_relay_queue ON outbox (seq) WHERE published_at IS NULL;
CREATE INDEX outbox_relay_aggregate ON outbox (aggregate_id, seq) WHERE published_at IS NULL;
