/* SPDX-License-Identifier: Apache-2.0 */
/* test_mq.c - pkg/mq without a broker: x-death, tiers, header text, options. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "internal.h"

#define TIER_PREFIX "shop.retry."

static amqp_field_value_t utf8(const char *s)
{
    amqp_field_value_t v = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes(s)};
    return v;
}

static amqp_table_entry_t entry(const char *key, amqp_field_value_t v)
{
    amqp_table_entry_t e = {.key = amqp_cstring_bytes(key), .value = v};
    return e;
}

/* One x-death entry as RabbitMQ writes it: count is a long. */
typedef struct death {
    amqp_table_entry_t e[4];
} death_t;

static amqp_field_value_t death(death_t *d, const char *queue, const char *reason, int64_t count)
{
    amqp_field_value_t v = {.kind = AMQP_FIELD_KIND_TABLE};

    d->e[0] = entry("queue", utf8(queue));
    d->e[1] = entry("reason", utf8(reason));
    d->e[2] = entry("count", (amqp_field_value_t){.kind = AMQP_FIELD_KIND_I64, .value.i64 = count});
    d->e[3] = entry("exchange", utf8(""));
    v.value.table.num_entries = 4;
    v.value.table.entries = d->e;
    return v;
}

static amqp_table_t headers_with(amqp_table_entry_t *slot, amqp_field_value_t *arr, int n)
{
    amqp_field_value_t a = {.kind = AMQP_FIELD_KIND_ARRAY};
    amqp_table_t t = {.num_entries = 1, .entries = slot};

    a.value.array.num_entries = n;
    a.value.array.entries = arr;
    *slot = entry("x-death", a);
    return t;
}

static void xdeath_sums_expired_tier_entries(void **state)
{
    death_t d[4];
    amqp_field_value_t arr[4];
    amqp_table_entry_t slot;
    amqp_table_t h;

    (void)state;
    arr[0] = death(&d[0], "shop.retry.2", "expired", 1);
    arr[1] = death(&d[1], "shop.retry.1", "expired", 2);
    /* A rejection from the work queue and another topology's tier: not ours. */
    arr[2] = death(&d[2], "shop.work", "rejected", 5);
    arr[3] = death(&d[3], "other.retry.1", "expired", 7);
    h = headers_with(&slot, arr, 4);
    assert_int_equal(rmq__xdeath_tier_count(&h, TIER_PREFIX), 3);
}

static void xdeath_absent_or_malformed_is_zero(void **state)
{
    death_t d[1];
    amqp_field_value_t arr[1];
    amqp_table_entry_t slot;
    amqp_table_t h, none = {0};

    (void)state;
    assert_int_equal(rmq__xdeath_tier_count(&none, TIER_PREFIX), 0);
    assert_int_equal(rmq__xdeath_tier_count(NULL, TIER_PREFIX), 0);
    /* x-death that is a string, not an array */
    slot = entry("x-death", utf8("garbage"));
    h = (amqp_table_t){.num_entries = 1, .entries = &slot};
    assert_int_equal(rmq__xdeath_tier_count(&h, TIER_PREFIX), 0);
    /* a negative count is no count */
    arr[0] = death(&d[0], "shop.retry.1", "expired", -3);
    h = headers_with(&slot, arr, 1);
    assert_int_equal(rmq__xdeath_tier_count(&h, TIER_PREFIX), 0);
    /* the prefix alone ("shop.retry.") is not a tier queue */
    arr[0] = death(&d[0], "shop.retry.", "expired", 1);
    h = headers_with(&slot, arr, 1);
    assert_int_equal(rmq__xdeath_tier_count(&h, TIER_PREFIX), 0);
}

static void xdeath_count_of_any_int_width(void **state)
{
    death_t d[1];
    amqp_field_value_t arr[1];
    amqp_table_entry_t slot;
    amqp_table_t h;

    (void)state;
    arr[0] = death(&d[0], "shop.retry.3", "expired", 0);
    d[0].e[2].value = (amqp_field_value_t){.kind = AMQP_FIELD_KIND_I32, .value.i32 = 4};
    h = headers_with(&slot, arr, 1);
    assert_int_equal(rmq__xdeath_tier_count(&h, TIER_PREFIX), 4);
}

static void tier_next_walks_the_tiers_then_dead(void **state)
{
    (void)state;
    assert_int_equal(rmq_tier_next(0, 3), 1);
    assert_int_equal(rmq_tier_next(1, 3), 2);
    assert_int_equal(rmq_tier_next(2, 3), 3);
    assert_int_equal(rmq_tier_next(3, 3), 0);
    assert_int_equal(rmq_tier_next(99, 3), 0);
    assert_int_equal(rmq_tier_next(0, 0), 0); /* no tiers: straight to dead */
}

static void field_text_of_each_kind(void **state)
{
    char out[8];
    amqp_field_value_t v;

    (void)state;
    v = utf8("abc");
    assert_true(rmq__field_text(&v, out, sizeof out));
    assert_string_equal(out, "abc");
    v = utf8("0123456789"); /* cut at the buffer, still terminated */
    assert_true(rmq__field_text(&v, out, sizeof out));
    assert_string_equal(out, "0123456");
    v = (amqp_field_value_t){.kind = AMQP_FIELD_KIND_I64, .value.i64 = -503};
    assert_true(rmq__field_text(&v, out, sizeof out));
    assert_string_equal(out, "-503");
    v = (amqp_field_value_t){.kind = AMQP_FIELD_KIND_BOOLEAN, .value.boolean = 1};
    assert_true(rmq__field_text(&v, out, sizeof out));
    assert_string_equal(out, "true");
    v = (amqp_field_value_t){.kind = AMQP_FIELD_KIND_ARRAY};
    assert_false(rmq__field_text(&v, out, sizeof out));
    v = (amqp_field_value_t){.kind = AMQP_FIELD_KIND_U64, .value.u64 = UINT64_MAX};
    assert_false(rmq__field_text(&v, out, sizeof out));
}

static void conn_opts_defaults_validate_and_bad_ones_are_named(void **state)
{
    rmq_conn_opts_t o;
    char err[SVC_ERRBUF_LEN] = "";

    (void)state;
    rmq_conn_opts_init(&o);
    assert_int_equal(o.port, RMQ_DEFAULT_PORT);
    assert_int_equal(o.heartbeat_s, RMQ_DEFAULT_HEARTBEAT_S);
    assert_int_equal(rmq_conn_opts_validate(&o, err), SVC_OK);
    o.io_timeout_ms = 0; /* an unbounded wait is refused */
    assert_int_equal(rmq_conn_opts_validate(&o, err), SVC_EINVAL);
    assert_non_null(strstr(err, "io_timeout_ms"));
    rmq_conn_opts_init(&o);
    o.port = 70000;
    assert_int_equal(rmq_conn_opts_validate(&o, err), SVC_EINVAL);
    assert_non_null(strstr(err, "port"));
}

static void topology_names_and_checks(void **state)
{
    const uint32_t delays[] = {1000, 10000, 60000};
    rmq_topology_t t = {.base = "shop", .tier_delay_ms = delays, .n_tiers = 3};
    char name[RMQ_NAME_MAX], err[SVC_ERRBUF_LEN];
    uint32_t zero = 0;

    (void)state;
    assert_int_equal(rmq_topology_validate(&t, err), SVC_OK);
    rmq_topology_name(&t, RMQ_NAME_EXCHANGE, 0, name);
    assert_string_equal(name, "shop");
    rmq_topology_name(&t, RMQ_NAME_WORK, 0, name);
    assert_string_equal(name, "shop.work");
    rmq_topology_name(&t, RMQ_NAME_TIER, 2, name);
    assert_string_equal(name, "shop.retry.2");
    rmq_topology_name(&t, RMQ_NAME_DEAD, 0, name);
    assert_string_equal(name, "shop.dead");
    t.base = "bad name";
    assert_int_equal(rmq_topology_validate(&t, err), SVC_EINVAL);
    t.base = "shop";
    t.tier_delay_ms = &zero;
    t.n_tiers = 1;
    assert_int_equal(rmq_topology_validate(&t, err), SVC_EINVAL);
    assert_non_null(strstr(err, "tier 1"));
    t.n_tiers = RMQ_MAX_TIERS + 1;
    assert_int_equal(rmq_topology_validate(&t, err), SVC_EINVAL);
}

/* What notify-dlq shows: x-death (an array of tables with a timestamp)
 * readable on one line, scalars as text, a too-long value cut with "...". */
static void field_render_for_people(void **state)
{
    death_t d[1];
    amqp_field_value_t arr[1], xd, ts = {.kind = AMQP_FIELD_KIND_TIMESTAMP, .value.u64 = 0};
    amqp_table_entry_t slot;
    amqp_table_t h;
    char out[256], tiny[12];

    (void)state;
    arr[0] = death(&d[0], "shop.retry.1", "expired", 2);
    h = headers_with(&slot, arr, 1);
    xd = h.entries[0].value;
    rmq__field_render(&xd, out, sizeof out);
    assert_string_equal(out, "[{queue=shop.retry.1, reason=expired, count=2, exchange=}]");
    rmq__field_render(&ts, out, sizeof out);
    assert_string_equal(out, "1970-01-01T00:00:00Z");
    ts.value.u64 = 1700000000;
    rmq__field_render(&ts, out, sizeof out);
    assert_string_equal(out, "2023-11-14T22:13:20Z");
    rmq__field_render(&xd, tiny, sizeof tiny);
    assert_string_equal(tiny, "[{queue=...");
    ts = utf8("attempts_exhausted");
    rmq__field_render(&ts, out, sizeof out);
    assert_string_equal(out, "attempts_exhausted");
    xd = (amqp_field_value_t){.kind = AMQP_FIELD_KIND_BOOLEAN, .value.boolean = 1};
    rmq__field_render(&xd, out, sizeof out);
    assert_string_equal(out, "true");
}

static bool has_key(const amqp_table_entry_t *e, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (rmq__bytes_eq(e[i].key, key))
            return true;
    return false;
}

/* A replayed copy: the dead headers and every x-death* header gone, the
 * retries counter replaced (not doubled), the job's own headers kept. */
static void headers_edit_for_replay(void **state)
{
    const rmq_header_edit_t *r = rmq_header_edit_replay();
    amqp_table_entry_t in[8], set[1], *out;
    amqp_table_t h = {.num_entries = 8, .entries = in};
    int n = -1;

    (void)state;
    in[0] = entry("x-test", utf8("yes"));
    in[1] = entry(RMQ_HDR_RETRIES, utf8("3"));
    in[2] = entry(RMQ_HDR_FINAL_REASON, utf8("attempts_exhausted"));
    in[3] = entry(RMQ_HDR_HTTP_STATUS, utf8("500"));
    in[4] = entry(RMQ_HDR_ATTEMPTS, utf8("12"));
    in[5] = entry("x-death", utf8("(an array)"));
    in[6] = entry("x-first-death-queue", utf8("shop.retry.1"));
    in[7] = entry(RMQ_HDR_DEAD_AT, utf8("2026-01-01T00:00:00.000Z"));
    assert_int_equal(r->n_set, 1);
    set[0] = entry(r->set[0].name, utf8(r->set[0].value));
    out = rmq__headers_edit(&h, r->drop, r->n_drop, set, 1, &n);
    assert_non_null(out);
    assert_int_equal(n, 2);
    assert_true(rmq__bytes_eq(out[0].key, "x-test"));
    assert_true(rmq__bytes_eq(out[1].key, RMQ_HDR_RETRIES));
    assert_true(rmq__bytes_eq(out[1].value.value.bytes, "0"));
    assert_false(has_key(out, n, "x-death"));
    free(out);
    /* No headers at all, nothing dropped: just the set ones. */
    out = rmq__headers_edit(NULL, NULL, 0, set, 1, &n);
    assert_non_null(out);
    assert_int_equal(n, 1);
    free(out);
    /* A prefix pattern drops only what starts with its prefix: "x-death"
     * itself stays. */
    out = rmq__headers_edit(&h, (const char *const[]){"x-first-death-*"}, 1, NULL, 0, &n);
    assert_non_null(out);
    assert_int_equal(n, 7);
    assert_true(has_key(out, n, "x-death"));
    assert_false(has_key(out, n, "x-first-death-queue"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(xdeath_sums_expired_tier_entries),
        cmocka_unit_test(xdeath_absent_or_malformed_is_zero),
        cmocka_unit_test(xdeath_count_of_any_int_width),
        cmocka_unit_test(tier_next_walks_the_tiers_then_dead),
        cmocka_unit_test(field_text_of_each_kind),
        cmocka_unit_test(conn_opts_defaults_validate_and_bad_ones_are_named),
        cmocka_unit_test(topology_names_and_checks),
        cmocka_unit_test(field_render_for_people),
        cmocka_unit_test(headers_edit_for_replay),
    };
    return cmocka_run_group_tests_name("rmq", tests, NULL, NULL);
}
