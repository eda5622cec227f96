/* SPDX-License-Identifier: Apache-2.0 */
/* rows.c - a read's binary rows into rly_row_t (see rows.h). */
#include <stdlib.h>
#include <string.h>

#include "rows.h"
#include "store.h"

/* Postgres counts timestamps from 2000-01-01 UTC, in microseconds. */
#define PG_EPOCH_UNIX_US 946684800000000LL

/* The binary width of each fixed-size column; 0: any length (text, bytea). */
static const int widths[RLY_N_COLS] = {
    [RLY_COL_HELD] = 1, [RLY_COL_SHARD] = 2, [RLY_COL_TXID] = 8,
    [RLY_COL_SEQ] = 8,  [RLY_COL_ID] = 16,   [RLY_COL_TIME] = 8,
};

static int be16(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (int16_t)(u[0] << 8 | u[1]);
}

static uint64_t be64(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = v << 8 | u[i];
    return v;
}

static void uuid_text(const char *raw, char out[RLY_ROW_ID_LEN])
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)raw;
    char *o = out;

    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *o++ = '-';
        *o++ = hex[u[i] >> 4];
        *o++ = hex[u[i] & 15];
    }
    *o = '\0';
}

/* Whether row i's fixed-size values have their binary widths. */
static bool widths_ok(const PGresult *r, int i)
{
    for (int c = 0; c < RLY_N_COLS; c++)
        if (widths[c] != 0 && !PQgetisnull(r, i, c) && PQgetlength(r, i, c) != widths[c])
            return false;
    return true;
}

static void decode_row(const PGresult *r, int i, rly_row_t *o)
{
    o->shard = be16(PQgetvalue(r, i, RLY_COL_SHARD));
    o->txid = be64(PQgetvalue(r, i, RLY_COL_TXID));
    o->seq = (int64_t)be64(PQgetvalue(r, i, RLY_COL_SEQ));
    uuid_text(PQgetvalue(r, i, RLY_COL_ID), o->id);
    o->key = PQgetvalue(r, i, RLY_COL_KEY);
    o->key_len = (size_t)PQgetlength(r, i, RLY_COL_KEY);
    o->topic = PQgetvalue(r, i, RLY_COL_TOPIC);
    o->type = PQgetvalue(r, i, RLY_COL_TYPE);
    o->source = PQgetvalue(r, i, RLY_COL_SOURCE);
    o->request_id = PQgetvalue(r, i, RLY_COL_REQUEST_ID);
    o->payload = (const unsigned char *)PQgetvalue(r, i, RLY_COL_PAYLOAD);
    o->payload_len = (size_t)PQgetlength(r, i, RLY_COL_PAYLOAD);
    o->time_us = (int64_t)be64(PQgetvalue(r, i, RLY_COL_TIME)) + PG_EPOCH_UNIX_US;
}

static int row_cmp(const void *pa, const void *pb)
{
    const rly_row_t *a = pa, *b = pb;

    if (a->shard != b->shard)
        return a->shard < b->shard ? -1 : 1;
    if (a->txid != b->txid)
        return a->txid < b->txid ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

svc_err_t rly_rows_decode(const PGresult *r, rly_row_t *out, int cap, int *n, bool *held,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    int rows = PQntuples(r);
    bool sorted = true;

    *n = 0;
    *held = false;
    if (PQnfields(r) != RLY_N_COLS || PQfformat(r, 0) != 1) {
        svc_errbuf_set(errbuf, "relay read: %d columns in format %d, want %d in binary",
                       PQnfields(r), PQnfields(r) > 0 ? PQfformat(r, 0) : -1, RLY_N_COLS);
        return SVC_EINTERNAL;
    }
    if (rows == 0 || (rows == 1 && PQgetisnull(r, 0, RLY_COL_SHARD))) {
        *held = rows == 1 && PQgetvalue(r, 0, RLY_COL_HELD)[0] != 0;
        return SVC_OK;
    }
    if (rows > cap) {
        svc_errbuf_set(errbuf, "relay read: %d rows, room for %d", rows, cap);
        return SVC_ERANGE;
    }
    for (int i = 0; i < rows; i++) {
        if (!widths_ok(r, i) || PQgetisnull(r, i, RLY_COL_SHARD)) {
            svc_errbuf_set(errbuf, "relay read: row %d is not in the read's binary form", i);
            return SVC_EINTERNAL;
        }
        decode_row(r, i, &out[i]);
        sorted = sorted && (i == 0 || row_cmp(&out[i - 1], &out[i]) < 0);
    }
    if (!sorted)
        qsort(out, (size_t)rows, sizeof *out, row_cmp);
    *held = PQgetvalue(r, 0, RLY_COL_HELD)[0] != 0;
    *n = rows;
    return SVC_OK;
}
