/* SPDX-License-Identifier: Apache-2.0 */
/* test_message.c - gateway/message.c: the client message of a failed call
 * names the dependency and the request id, keeps the project's phrases and
 * nothing else of the failure's texts; the log text is one quoted value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "message.h"
#include "svc/core.h"

static const char *msg(int code, const char *dep, const char *id, const char *text)
{
    static char buf[512];
    const char *texts[] = {text};

    gw_client_message(code, dep, id, texts, 1, buf, sizeof buf);
    return buf;
}

static void server_side_codes_are_scrubbed(void **state)
{
    static const int scrubbed[] = {2, 4, 12, 13, 14, 15};
    static const int passed[] = {0, 1, 3, 5, 6, 7, 8, 9, 10, 11, 16};

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(scrubbed); i++)
        assert_true(gw_message_is_scrubbed(scrubbed[i]));
    for (size_t i = 0; i < SVC_COUNTOF(passed); i++)
        assert_false(gw_message_is_scrubbed(passed[i]));
}

/* What libpq and gRPC core say, through a service or not: none of it. */
static void library_text_never_comes_through(void **state)
{
    static const char *const texts[] = {
        "database unavailable: connection to server at \"db.internal\" (10.1.2.3), port 5432 "
        "failed: Connection refused",
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:25051: "
        "Failed to connect to remote host: Connection refused",
        "Socket closed",
        "recvmsg:Connection reset by peer",
    };

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(texts); i++) {
        const char *m = msg(14, "catalog", "3f2a9c", texts[i]);
        assert_string_equal(m, "catalog is unavailable (request 3f2a9c)");
    }
    assert_string_equal(msg(4, "order", "r-1", "Deadline Exceeded"),
                        "order did not answer in time (request r-1)");
    assert_string_equal(msg(13, "order", "r-1", "pq: relation \"orders\" does not exist"),
                        "order failed (request r-1)");
    assert_string_equal(msg(14, "order", NULL, "x"), "order is unavailable");
}

/* The project's phrases stay, once each, in a fixed order. */
static void the_projects_phrases_stay(void **state)
{
    const char *texts[2];
    char buf[512];

    (void)state;
    assert_string_equal(
        msg(14, "order", "ab12",
            "the database did not confirm the order: the order may have been placed: retry "
            "with the same Idempotency-Key"),
        "order is unavailable (request ab12): the database did not confirm the order: the "
        "order may have been placed: retry with the same Idempotency-Key");
    assert_string_equal(
        msg(14, "order", "ab12",
            "pricing: catalog unavailable: circuit open (reason=breaker-open attempts=0)"),
        "order is unavailable (request ab12): catalog unavailable: circuit open");
    /* order's message with gRPC core's text inside: the phrase, not the text */
    assert_string_equal(
        msg(14, "order", "ab12",
            "pricing: catalog unavailable: failed to connect to all addresses; last error: "
            "ipv4:10.0.0.9:25051 (reason=attempts-exhausted attempts=3)"),
        "order is unavailable (request ab12): catalog unavailable");
    texts[0] = "the gateway is shutting down";
    texts[1] = "circuit open";
    gw_client_message(14, "catalog", "z", texts, 2, buf, sizeof buf);
    assert_string_equal(buf, "catalog is unavailable (request z): the gateway is shutting down: "
                             "circuit open");
    /* "ok" of a success reason is not a phrase: it is in many words */
    assert_string_equal(msg(14, "catalog", "z", "broken pipe"),
                        "catalog is unavailable (request z)");
}

static void sized_like_snprintf(void **state)
{
    const char *texts[] = {"circuit open"};
    char small[8];
    size_t need = gw_client_message(14, "catalog", "id", texts, 1, NULL, 0);

    (void)state;
    assert_int_equal(need, strlen("catalog is unavailable (request id): circuit open"));
    assert_int_equal(gw_client_message(14, "catalog", "id", texts, 1, small, sizeof small), need);
    assert_string_equal(small, "catalog");
}

static void log_text_is_one_value(void **state)
{
    char out[64];

    (void)state;
    gw_log_text("at \"db\" \\ port 5432\n\x01\xc3\xa9", out, sizeof out);
    assert_string_equal(out, "at 'db' ' port 5432????");
    gw_log_text("abcdef", out, 4);
    assert_string_equal(out, "abc");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(server_side_codes_are_scrubbed),
        cmocka_unit_test(library_text_never_comes_through),
        cmocka_unit_test(the_projects_phrases_stay),
        cmocka_unit_test(sized_like_snprintf),
        cmocka_unit_test(log_text_is_one_value),
    };

    return cmocka_run_group_tests_name("gateway_message", tests, NULL, NULL);
}
