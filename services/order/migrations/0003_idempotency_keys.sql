-- Idempotency keys of CreateOrder: the first response for a key, and the
-- fingerprint of the request that produced it. The key row is inserted first
-- in the order's transaction (ON CONFLICT DO NOTHING), so of two racing calls
-- with one key the second waits for the first to commit and then replays its
-- response. The order row comes later in the same transaction, hence the
-- deferred foreign key. Rows older than ORDER_IDEMPOTENCY_TTL_S are deleted
-- in batches (index on created_at).
CREATE TABLE idempotency_keys (
    key          text        PRIMARY KEY CHECK (octet_length(key) BETWEEN 1 AND 200),
    request_hash text        NOT NULL,
    order_id     uuid        NOT NULL REFERENCES orders (id) DEFERRABLE INITIALLY DEFERRED,
    status       text        NOT NULL
                             CHECK (status IN ('PENDING', 'CONFIRMED', 'CANCELLED')),
    total_cents  bigint      NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
