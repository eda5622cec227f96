-- Orders and their items. An order's items are the request's lines merged by
-- product (UNIQUE (order_id, product_id)), in the order they first appeared
-- (position), each with the catalog's price at the moment the order was made.
CREATE TABLE orders (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    customer_id text        NOT NULL CHECK (char_length(customer_id) BETWEEN 1 AND 100),
    status      text        NOT NULL DEFAULT 'PENDING'
                            CHECK (status IN ('PENDING', 'CONFIRMED', 'CANCELLED')),
    total_cents bigint      NOT NULL CHECK (total_cents >= 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE order_items (
    order_id         uuid    NOT NULL REFERENCES orders (id),
    position         integer NOT NULL CHECK (position >= 0),
    product_id       text    NOT NULL CHECK (product_id <> ''),
    quantity         integer NOT NULL CHECK (quantity BETWEEN 1 AND 1000),
    unit_price_cents bigint  NOT NULL CHECK (unit_price_cents >= 0),
    PRIMARY KEY (order_id, position),
    UNIQUE (order_id, product_id)
);
