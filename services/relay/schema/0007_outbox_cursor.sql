-- The relay's cursor (services/relay, docs/events.md §3). One file, embedded
-- in both services that have an outbox (order and catalog: the same version
-- number in each), because the one relay program reads both the same way.
--
-- Before: the relay claimed rows with FOR UPDATE SKIP LOCKED and set each
-- row's published_at: two writes per row (a row lock, a new row version with
-- its index entries) besides the writer's insert. Now the outbox is
-- append-only and a row is published when a cursor has passed it:
--
--   shard  (hash of the aggregate id) & 7: every event of one order in one
--          shard, a shard read by at most one relay at a time (advisory
--          locks, services/relay/lease.c), so per-order order needs no lock
--          per row
--   txid   the writing transaction's id. A row is read only once every
--          transaction with a smaller id has ended (txid below the
--          snapshot's xmin, pg_snapshot_xmin), so a transaction that
--          commits late can never be overtaken by the cursor: rows are read
--          in (txid, seq) order and the cursor only moves forward over rows
--          that can no longer change.
--   outbox_cursor  per shard, the (txid, seq) of the last row the broker
--          acknowledged: one row updated per batch, whatever its size.
--
-- Rows written before this migration get txid 0; each shard's cursor starts
-- just before its oldest unpublished row, so nothing published is lost and
-- at worst a row published out of seq order is published again, with the
-- same ce_id (consumers dedupe on it).
ALTER TABLE outbox ADD COLUMN txid xid8 NOT NULL DEFAULT '0';
ALTER TABLE outbox ALTER COLUMN txid SET DEFAULT pg_current_xact_id();
ALTER TABLE outbox ADD COLUMN shard smallint NOT NULL
    GENERATED ALWAYS AS ((hashtext(aggregate_id) & 7)::smallint) STORED;

CREATE TABLE outbox_cursor (
    shard    smallint    PRIMARY KEY,
    txid     xid8        NOT NULL,
    seq      bigint      NOT NULL,
    moved_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO outbox_cursor (shard, txid, seq)
SELECT s, '0', coalesce(
           (SELECT min(seq) - 1 FROM outbox
             WHERE shard = s AND published_at IS NULL AND payload_pb IS NOT NULL),
           (SELECT max(seq) FROM outbox WHERE shard = s),
           0)
FROM generate_series(0, 7) AS s;

ALTER TABLE outbox DROP COLUMN published_at; -- and with it the partial indexes on it
-- The relay's one scan: a shard's rows after its cursor.
CREATE INDEX outbox_relay_order ON outbox (shard, txid, seq);

-- What is not yet published (for people, tests and the relay's gauges).
-- Rows without a wire encoding (order's, written before 0005) are never
-- relayed.
CREATE VIEW outbox_pending AS
SELECT o.*
  FROM outbox o
  JOIN outbox_cursor c ON c.shard = o.shard
 WHERE (o.txid, o.seq) > (c.txid, c.seq) AND o.payload_pb IS NOT NULL;
