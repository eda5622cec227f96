/* SPDX-License-Identifier: Apache-2.0 */
/* test_resilience.c - GATEWAY_RESILIENCE_PEERS: what is accepted, and the
 * peers as the live page's feed lists them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "resilience.h"

static void check_ok(const char *spec)
{
    char errbuf[SVC_ERRBUF_LEN] = "";

    if (gw_resilience_peers_check(spec, errbuf) != SVC_OK)
        fail_msg("refused \"%s\": %s", spec, errbuf);
}

static void check_bad(const char *spec, const char *part)
{
    char errbuf[SVC_ERRBUF_LEN] = "";

    if (gw_resilience_peers_check(spec, errbuf) != SVC_EINVAL)
        fail_msg("accepted \"%s\"", spec);
    if (strstr(errbuf, part) == NULL)
        fail_msg("\"%s\": the error \"%s\" does not name \"%s\"", spec, errbuf, part);
}

static void what_is_accepted(void **state)
{
    (void)state;
    check_ok("");
    check_ok("none");
    check_ok("order=http://127.0.0.1:9467");
    check_ok("order=http://127.0.0.1:9467,catalog=https://admin.example:9466/");
    check_ok("relay-catalog.2=http://[::1]:9465");
    check_bad("order", "\"order\" is not name=http://host:port");
    check_bad("=http://127.0.0.1:1", "\"=http://127.0.0.1:1\"");
    check_bad("order=127.0.0.1:9467", "order=127.0.0.1:9467");
    check_bad("order=http://", "order=http://");
    check_bad("order=ftp://host:1", "ftp");
    check_bad("order=http://host:1,", "\"\"");
    check_bad("or der=http://host:1", "or der");
    check_bad("order=http://host:1/\"><script>", "order=http");
    check_bad("order=http://host:1/a b", "a b");
    check_bad("order=http://host:1\\x", "order=http");
    check_bad("a=http://h:1,b=http://h:2,c=javascript:alert(1)", "c=javascript");
}

static void as_the_feed_lists_them(void **state)
{
    char buf[512];

    (void)state;
    assert_int_equal(gw_resilience_peers_json("none", buf, sizeof buf), 2);
    assert_string_equal(buf, "[]");
    assert_int_equal(gw_resilience_peers_json("", buf, sizeof buf), 2);
    gw_resilience_peers_json("order=http://127.0.0.1:9467,cat=https://h:1//", buf, sizeof buf);
    assert_string_equal(buf, "[{\"service\":\"order\",\"url\":\"http://127.0.0.1:9467/debug/"
                             "resilience.json\"},{\"service\":\"cat\",\"url\":\"https://h:1/"
                             "debug/resilience.json\"}]");
    /* snprintf's contract: sized with cap 0, cut but terminated. */
    assert_int_equal(
        gw_resilience_peers_json("order=http://h:1", NULL, 0),
        strlen("[{\"service\":\"order\",\"url\":\"http://h:1/debug/resilience.json\"}]"));
    assert_true(gw_resilience_peers_json("order=http://h:1", buf, 8) > 8);
    assert_string_equal(buf, "[{\"serv");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(what_is_accepted),
        cmocka_unit_test(as_the_feed_lists_them),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
