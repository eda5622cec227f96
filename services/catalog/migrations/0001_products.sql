-- Products. `seq` gives ListProducts a stable order and a compact cursor
-- (keyset pagination: no OFFSET, so page N costs the same as page 1).
CREATE TABLE products (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    seq         bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    name        text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    description text        NOT NULL DEFAULT '',
    price_cents bigint      NOT NULL CHECK (price_cents >= 0),
    stock       integer     NOT NULL CHECK (stock >= 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);
