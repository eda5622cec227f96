/* SPDX-License-Identifier: Apache-2.0 */
/* test_kafka_record.c - kfk_record_header and kfk_ce_type_match. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kafka/consumer.h"

static void header_as_text(void **state)
{
    const kfk_header_t h[] = {
        {"ce_type", "a", 1},        {"ce_type", "shopmicro.order.v1.OrderCreated", 31},
        {"empty", "", 0},           {"nul", "a\0b", 3},
        {"long", "0123456789", 10},
    };
    kfk_record_t r = {.headers = h, .n_headers = SVC_COUNTOF(h)};
    char out[10];
    char big[64];

    (void)state;
    assert_true(kfk_record_header(&r, "ce_type", big, sizeof big));
    assert_string_equal(big, "shopmicro.order.v1.OrderCreated"); /* the last one */
    assert_false(kfk_record_header(&r, "absent", out, sizeof out));
    assert_string_equal(out, "");
    assert_false(kfk_record_header(&r, "empty", out, sizeof out));
    assert_false(kfk_record_header(&r, "nul", out, sizeof out));
    assert_false(kfk_record_header(&r, "long", out, sizeof out)); /* 10 bytes need 11 */
    assert_string_equal(out, "");
}

static void types_known_newer_unknown(void **state)
{
    const char *const known[] = {"shopmicro.order.v1.OrderCreated",
                                 "shopmicro.order.v1.OrderCancelled", NULL};
    size_t i = 99;

    (void)state;
    assert_int_equal(kfk_ce_type_match("shopmicro.order.v1.OrderCancelled", known, &i),
                     KFK_TYPE_KNOWN);
    assert_int_equal(i, 1);
    assert_int_equal(kfk_ce_type_match("shopmicro.order.v2.OrderCreated", known, NULL),
                     KFK_TYPE_NEWER);
    assert_int_equal(kfk_ce_type_match("shopmicro.order.v12.Anything", known, NULL),
                     KFK_TYPE_NEWER);
    /* an unknown name at the known version, an older version, another domain */
    assert_int_equal(kfk_ce_type_match("shopmicro.order.v1.OrderShipped", known, NULL),
                     KFK_TYPE_UNKNOWN);
    assert_int_equal(kfk_ce_type_match("shopmicro.order.v0.OrderCreated", known, NULL),
                     KFK_TYPE_UNKNOWN);
    assert_int_equal(kfk_ce_type_match("shopmicro.inventory.v2.StockReserved", known, NULL),
                     KFK_TYPE_UNKNOWN);
    assert_int_equal(kfk_ce_type_match("shopmicro.orderx.v2.OrderCreated", known, NULL),
                     KFK_TYPE_UNKNOWN);
    /* malformed */
    assert_int_equal(kfk_ce_type_match("OrderCreated", known, NULL), KFK_TYPE_UNKNOWN);
    assert_int_equal(kfk_ce_type_match("shopmicro.order.v2.", known, NULL), KFK_TYPE_UNKNOWN);
    assert_int_equal(kfk_ce_type_match(".v2.OrderCreated", known, NULL), KFK_TYPE_UNKNOWN);
    assert_int_equal(kfk_ce_type_match("", known, NULL), KFK_TYPE_UNKNOWN);
    assert_int_equal(kfk_ce_type_match(NULL, known, NULL), KFK_TYPE_UNKNOWN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_as_text),
        cmocka_unit_test(types_known_newer_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
