/* SPDX-License-Identifier: Apache-2.0 */
/* test_cors.c - gateway/cors.c: GATEWAY_CORS_ORIGINS, what is an origin,
 * and matching the request's Origin against the list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cors.h"

static void settings_that_are_origins(void **state)
{
    static const char *const ok[] = {
        "",
        "none",
        "https://shop.example.com",
        "http://localhost:3000",
        "https://a.example,https://b.example:8443",
        "http://[::1]:8080",
        "http://127.0.0.1:5173",
    };
    static const char *const bad[] = {
        "*",
        "shop.example.com",
        "https://shop.example.com/",
        "https://shop.example.com/app",
        "ftp://x",
        "https://",
        "https://a,,https://b",
        "https://a,",
        "https://a:",
        "https://a:123456",
        "https://a b",
        "https://\"a\"",
        "null",
        "https://a?x",
        "http://[::1",
    };
    char errbuf[SVC_ERRBUF_LEN];

    (void)state;
    for (size_t i = 0; i < SVC_COUNTOF(ok); i++)
        if (gw_cors_check(ok[i], errbuf) != SVC_OK)
            fail_msg("\"%s\" refused: %s", ok[i], errbuf);
    for (size_t i = 0; i < SVC_COUNTOF(bad); i++) {
        errbuf[0] = '\0';
        if (gw_cors_check(bad[i], errbuf) != SVC_EINVAL)
            fail_msg("\"%s\" accepted", bad[i]);
        assert_non_null(strstr(errbuf, "GATEWAY_CORS_ORIGINS"));
    }
}

static bool allowed(const char *spec, const char *origin)
{
    return gw_cors_allowed(spec, origin, strlen(origin));
}

static void origins_match_exactly(void **state)
{
    static const char spec[] = "https://shop.example.com,http://localhost:3000";

    (void)state;
    assert_true(gw_cors_enabled(spec));
    assert_true(allowed(spec, "https://shop.example.com"));
    assert_true(allowed(spec, "http://localhost:3000"));
    assert_false(allowed(spec, "http://shop.example.com"));       /* scheme */
    assert_false(allowed(spec, "https://shop.example.com:443"));  /* port */
    assert_false(allowed(spec, "https://evil.shop.example.com")); /* no suffix match */
    assert_false(allowed(spec, "https://shop.example.co"));       /* no prefix match */
    assert_false(allowed(spec, "http://localhost:30000"));
    assert_false(allowed(spec, "null"));
    assert_false(allowed(spec, ""));
    /* none by default */
    assert_false(gw_cors_enabled(""));
    assert_false(gw_cors_enabled("none"));
    assert_false(allowed("", "https://shop.example.com"));
    assert_false(allowed("none", "none"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(settings_that_are_origins),
        cmocka_unit_test(origins_match_exactly),
    };

    return cmocka_run_group_tests_name("gateway_cors", tests, NULL, NULL);
}
