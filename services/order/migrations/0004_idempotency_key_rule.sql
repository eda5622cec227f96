-- Idempotency keys are 1-255 printable ASCII characters without spaces
-- (0x21-0x7E), as Stripe's and the gateway's Idempotency-Key; the service
-- refuses any other key with INVALID_ARGUMENT (rpc.c), and this constraint
-- says the same. NOT VALID: rows written under the old rule (1-200 bytes of
-- anything) stay until they expire; every new row is checked.
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_key_check;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_key_check
    CHECK (octet_length(key) BETWEEN 1 AND 255 AND key ~ '^[!-~]+$') NOT VALID;
