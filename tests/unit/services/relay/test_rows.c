/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The relay's read rows from Postgres's binary format (services/relay/
 * rows.c), on results built with libpq's own PQsetResultAttrs/PQsetvalue:
 * each column's binary form decoded (the uuid to ce_id text, the timestamp
 * from Postgres's epoch to Unix's), rows that come out of order sorted, the
 * empty read's one row, and results that are not the read's refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rows.h"
#include "store.h"

/* 2026-12-03T08:41:04.126540Z: in Unix microseconds, and from 2000-01-01. */
#define WHEN_UNIX_US 1796287264126540LL
#define WHEN_PG_US   849602464126540LL

static const unsigned char UUID[16] = {0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78,
                                       0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0};

static PGresult *result(int format)
{
    static const char *names[RLY_N_COLS] = {
        "held",  "shard",   "txid",      "seq",        "id",         "aggregate_id",
        "topic", "ce_type", "ce_source", "payload_pb", "request_id", "created_at"};
    PGresAttDesc a[RLY_N_COLS];
    PGresult *r = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);

    assert_non_null(r);
    memset(a, 0, sizeof a);
    for (int c = 0; c < RLY_N_COLS; c++) {
        a[c].name = (char *)names[c];
        a[c].format = format;
        a[c].typlen = -1;
    }
    assert_int_equal(PQsetResultAttrs(r, RLY_N_COLS, a), 1);
    return r;
}

static void set(PGresult *r, int row, int col, const void *v, int len)
{
    assert_int_equal(PQsetvalue(r, row, col, (char *)(uintptr_t)v, len), 1);
}

static void set_be(PGresult *r, int row, int col, uint64_t v, int width)
{
    char b[8];

    for (int i = width - 1; i >= 0; i--, v >>= 8)
        b[i] = (char)(v & 0xff);
    set(r, row, col, b, width);
}

static void set_text(PGresult *r, int row, int col, const char *s)
{
    set(r, row, col, s, s != NULL ? (int)strlen(s) : -1);
}

/* Row `row` of a read: (shard, txid, seq), held false, UUID whose last byte
 * is seq, payload "pb" and a zero byte, created at WHEN. */
static void add_row(PGresult *r, int row, int shard, uint64_t txid, int64_t seq)
{
    unsigned char id[16];
    static const char payload[3] = {'p', 'b', '\0'};

    memcpy(id, UUID, sizeof id);
    id[15] = (unsigned char)seq;
    set_be(r, row, RLY_COL_HELD, 0, 1);
    set_be(r, row, RLY_COL_SHARD, (uint64_t)shard, 2);
    set_be(r, row, RLY_COL_TXID, txid, 8);
    set_be(r, row, RLY_COL_SEQ, (uint64_t)seq, 8);
    set(r, row, RLY_COL_ID, id, 16);
    set_text(r, row, RLY_COL_KEY, "order-key");
    set_text(r, row, RLY_COL_TOPIC, "shopmicro.orders.v1");
    set_text(r, row, RLY_COL_TYPE, "shopmicro.order.v1.OrderCreated");
    set_text(r, row, RLY_COL_SOURCE, "/shopmicro/order");
    set(r, row, RLY_COL_PAYLOAD, payload, sizeof payload);
    set_text(r, row, RLY_COL_REQUEST_ID, "req-1");
    set_be(r, row, RLY_COL_TIME, (uint64_t)WHEN_PG_US, 8);
}

static void every_column_is_decoded(void **state)
{
    PGresult *r = result(1);
    rly_row_t out[2];
    char errbuf[SVC_ERRBUF_LEN] = "";
    int n = -1;
    bool held = true;

    (void)state;
    add_row(r, 0, 3, 0x0102030405060708ull, 7);
    set_text(r, 0, RLY_COL_REQUEST_ID, NULL); /* NULL: "" */
    set(r, 0, RLY_COL_PAYLOAD, "", 0);        /* empty, not NULL */
    assert_int_equal(rly_rows_decode(r, out, 2, &n, &held, errbuf), SVC_OK);
    assert_int_equal(n, 1);
    assert_false(held);
    assert_int_equal(out[0].shard, 3);
    assert_true(out[0].txid == 0x0102030405060708ull);
    assert_int_equal(out[0].seq, 7);
    assert_string_equal(out[0].id, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e107");
    assert_string_equal(out[0].key, "order-key");
    assert_int_equal(out[0].key_len, 9);
    assert_string_equal(out[0].topic, "shopmicro.orders.v1");
    assert_string_equal(out[0].type, "shopmicro.order.v1.OrderCreated");
    assert_string_equal(out[0].source, "/shopmicro/order");
    assert_string_equal(out[0].request_id, "");
    assert_non_null(out[0].payload);
    assert_int_equal(out[0].payload_len, 0);
    assert_true(out[0].time_us == WHEN_UNIX_US);
    PQclear(r);
}

static void a_payload_keeps_its_zero_bytes(void **state)
{
    PGresult *r = result(1);
    rly_row_t out[1];
    char errbuf[SVC_ERRBUF_LEN] = "";
    int n;
    bool held;

    (void)state;
    add_row(r, 0, 0, 10, 1);
    assert_int_equal(rly_rows_decode(r, out, 1, &n, &held, errbuf), SVC_OK);
    assert_int_equal(out[0].payload_len, 3);
    assert_memory_equal(out[0].payload, "pb\0", 3);
    PQclear(r);
}

/* The read has no ORDER BY: whatever order Postgres yields, the relay gets
 * them by shard, then (txid, seq); a seq above 255 and a txid above 2^32
 * compare as numbers, not as bytes or text. */
static void rows_out_of_order_are_sorted(void **state)
{
    static const struct {
        int shard;
        uint64_t txid;
        int64_t seq;
    } in[] =
        {
            {2, 5, 1}, {0, 1ull << 33, 1}, {0, 9, 300}, {2, 4, 2}, {0, 9, 2}, {1, 7, 1},
        },
      want[] = {
          {0, 9, 2}, {0, 9, 300}, {0, 1ull << 33, 1}, {1, 7, 1}, {2, 4, 2}, {2, 5, 1},
      };
    enum { N = sizeof in / sizeof *in };
    PGresult *r = result(1);
    rly_row_t out[N];
    char errbuf[SVC_ERRBUF_LEN] = "";
    int n;
    bool held;

    (void)state;
    for (int i = 0; i < N; i++)
        add_row(r, i, in[i].shard, in[i].txid, in[i].seq);
    assert_int_equal(rly_rows_decode(r, out, N, &n, &held, errbuf), SVC_OK);
    assert_int_equal(n, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(out[i].shard, want[i].shard);
        assert_true(out[i].txid == want[i].txid);
        assert_int_equal(out[i].seq, want[i].seq);
        char last[3]; /* its own uuid came along: the last byte is its seq's */
        snprintf(last, sizeof last, "%02x", (unsigned)(want[i].seq & 0xff));
        assert_string_equal(out[i].id + 34, last);
    }
    PQclear(r);
}

/* An empty read is one row with a NULL shard, carrying held. */
static void an_empty_read_carries_held(void **state)
{
    PGresult *r = result(1);
    rly_row_t out[1];
    char errbuf[SVC_ERRBUF_LEN] = "";
    int n = -1;
    bool held = false;

    (void)state;
    set_be(r, 0, RLY_COL_HELD, 1, 1);
    for (int c = RLY_COL_SHARD; c < RLY_N_COLS; c++)
        set(r, 0, c, NULL, -1);
    assert_int_equal(rly_rows_decode(r, out, 1, &n, &held, errbuf), SVC_OK);
    assert_int_equal(n, 0);
    assert_true(held);
    PQclear(r);
}

static void what_is_not_the_read_is_refused(void **state)
{
    rly_row_t out[1];
    char errbuf[SVC_ERRBUF_LEN] = "";
    int n;
    bool held;
    PGresult *text = result(0), *narrow = result(1), *many = result(1);

    (void)state;
    add_row(text, 0, 0, 1, 1);
    assert_int_equal(rly_rows_decode(text, out, 1, &n, &held, errbuf), SVC_EINTERNAL);
    assert_non_null(strstr(errbuf, "binary"));

    add_row(narrow, 0, 0, 1, 1);
    set_be(narrow, 0, RLY_COL_TXID, 1, 4); /* an xid, not an xid8 */
    assert_int_equal(rly_rows_decode(narrow, out, 1, &n, &held, errbuf), SVC_EINTERNAL);
    assert_non_null(strstr(errbuf, "row 0"));

    add_row(many, 0, 0, 1, 1);
    add_row(many, 1, 0, 1, 2);
    assert_int_equal(rly_rows_decode(many, out, 1, &n, &held, errbuf), SVC_ERANGE);
    assert_int_equal(n, 0);
    PQclear(text);
    PQclear(narrow);
    PQclear(many);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_column_is_decoded),
        cmocka_unit_test(a_payload_keeps_its_zero_bytes),
        cmocka_unit_test(rows_out_of_order_are_sorted),
        cmocka_unit_test(an_empty_read_carries_held),
        cmocka_unit_test(what_is_not_the_read_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
