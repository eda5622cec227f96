/* SPDX-License-Identifier: Apache-2.0 */
/* Logging: one key=value line per event, levels, escaping, request ids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "svc/core.h"
#include "support/capture.h"

/* Runs fn with stderr captured; returns its text. */
static const char *capture(void (*fn)(void))
{
    tcap_begin();
    fn();
    return tcap_end();
}

static void emit_levels(void)
{
    svc_log_set_level(SVC_LOG_WARN);
    svc_log_info("t", "hidden");
    svc_log_warn("t", "shown %d", 42);
    svc_log_set_level(SVC_LOG_INFO);
}

static void level_filters(void **state)
{
    const char *out = capture(emit_levels);

    (void)state;
    assert_null(strstr(out, "hidden"));
    assert_non_null(strstr(out, "level=warn mod=t msg=\"shown 42\"\n"));
    assert_int_equal(strncmp(out, "ts=", 3), 0);
}

static void emit_escaped(void)
{
    svc_log_info("t", "a \"quoted\"\nline\\x");
}

static void values_are_escaped_to_one_line(void **state)
{
    const char *out = capture(emit_escaped);

    (void)state;
    assert_non_null(strstr(out, "msg=\"a \\\"quoted\\\"\\nline\\\\x\""));
    assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1);
}

static void emit_with_request(void)
{
    svc_log_set_request_id("abc-1");
    svc_log_write(SVC_LOG_INFO, "t", " k=v", "with kv");
    svc_log_set_request_id(NULL);
    svc_log_info("t", "without");
}

static void request_id_and_kv(void **state)
{
    const char *out = capture(emit_with_request);

    (void)state;
    assert_non_null(strstr(out, "mod=t req=abc-1 msg=\"with kv\" k=v\n"));
    assert_non_null(strstr(out, "mod=t msg=\"without\"\n"));
}

static void level_names(void **state)
{
    (void)state;
    assert_true(svc_log_set_level_name("debug"));
    assert_true(svc_log_enabled(SVC_LOG_DEBUG));
    assert_true(svc_log_set_level_name("ERROR"));
    assert_false(svc_log_enabled(SVC_LOG_WARN));
    assert_false(svc_log_set_level_name("loud"));
    assert_false(svc_log_enabled(SVC_LOG_WARN)); /* unchanged */
    svc_log_set_level(SVC_LOG_INFO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(level_filters),
        cmocka_unit_test(values_are_escaped_to_one_line),
        cmocka_unit_test(request_id_and_kv),
        cmocka_unit_test(level_names),
    };
    return cmocka_run_group_tests_name("svc_log", tests, NULL, NULL);
}
