/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rows.h - a read's rows (store.h's RLY_COL_* columns, in Postgres's binary
 * format) decoded once into plain structs, in the order the relay publishes
 * them: by shard, then (txid, seq).
 *
 * Binary, because text costs the server an output function per value - hex
 * for the payload, the uuid, the xid8, the timestamp - and the relay the
 * parsing back (docs/bench/history.md, "The read in binary").
 */
#ifndef RLY_ROWS_H
#define RLY_ROWS_H

#include <stdint.h>

#include "db/db.h"

#define RLY_ROW_ID_LEN 37 /* a uuid in text, with its NUL */

/* One outbox row. The pointers point into the PGresult it was decoded from
 * (valid until its PQclear); their strings are NUL-terminated (libpq ends
 * every value with a zero byte, in binary format too). */
typedef struct rly_row {
    int shard;
    uint64_t txid; /* the row's position: (txid, seq)        */
    int64_t seq;
    char id[RLY_ROW_ID_LEN]; /* ce_id, the uuid in text                */
    const char *key;         /* aggregate_id: the Kafka key            */
    size_t key_len;
    const char *topic, *type, *source;
    const char *request_id;       /* "" when NULL                           */
    const unsigned char *payload; /* never NULL: an empty payload is an
                                     empty value, not a tombstone       */
    size_t payload_len;
    int64_t time_us; /* created_at, Unix microseconds          */
} rly_row_t;

/* Decodes r into out[0..cap). *n: the rows (0 for the one row of an empty
 * read); *held: the read's RLY_COL_HELD. The rows are sorted by (shard,
 * txid, seq) when they do not come so (the read has no ORDER BY: its
 * nested loop yields them in that order, and a sort in Postgres costs CPU
 * for every row; this checks, and sorts only when it must). SVC_EINTERNAL
 * when a value is not what the read's columns are (e.g. a text result),
 * SVC_ERANGE when r has more than cap rows. */
svc_err_t rly_rows_decode(const PGresult *r, rly_row_t *out, int cap, int *n, bool *held,
                          char errbuf[static SVC_ERRBUF_LEN]);

#endif
