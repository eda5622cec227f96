/* SPDX-License-Identifier: Apache-2.0 */
/* Repeated log lines: the first of each key at once, then at most one per window with the count
 * of those left out; quiet keys' counts in a summary on flush; a full table never hides a line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/capture.h"
#include "support/fake_clock.h"
#include "svc/core.h"

typedef struct {
    fake_clock_t clock;
    svc_log_repeats_t *r;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);

    assert_non_null(f);
    fake_clock_init(&f->clock, UINT64_C(1) << 40);
    f->r = svc_log_repeats_new(1000, fake_clock_iface(&f->clock));
    assert_non_null(f->r);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;

    tcap_begin(); /* free flushes; its lines are not this test's business */
    svc_log_repeats_free(f->r);
    tcap_end();
    free(f);
    return 0;
}

static bool admit(fixture_t *f, const char *key, uint64_t *n)
{
    return svc_log_repeats_admit(f->r, SVC_LOG_WARN, "t", key, n);
}

static size_t count(const char *text, const char *needle)
{
    size_t n = 0;

    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void first_then_one_per_window_with_the_count(void **state)
{
    fixture_t *f = *state;
    uint64_t n = 99;

    assert_true(admit(f, "GET /v1/products/{id} 503 breaker-open", &n));
    assert_int_equal(n, 0);
    for (int i = 0; i < 9; i++) {
        fake_clock_advance_ms(&f->clock, 100);
        assert_false(admit(f, "GET /v1/products/{id} 503 breaker-open", &n));
    }
    assert_true(admit(f, "POST /v1/orders 503 breaker-open", &n)); /* another key: its own */
    assert_int_equal(n, 0);
    fake_clock_advance_ms(&f->clock, 100); /* 1 s since the first was written */
    assert_true(admit(f, "GET /v1/products/{id} 503 breaker-open", &n));
    assert_int_equal(n, 9);
    assert_false(admit(f, "GET /v1/products/{id} 503 breaker-open", &n));
}

static void a_quiet_keys_count_is_written_on_flush(void **state)
{
    fixture_t *f = *state;
    const char *out;

    assert_true(admit(f, "k1", NULL));
    for (int i = 0; i < 5; i++)
        assert_false(admit(f, "k1", NULL));
    tcap_begin();
    svc_log_repeats_flush(f->r, false); /* the window has not ended: nothing yet */
    out = tcap_end();
    assert_string_equal(out, "");

    fake_clock_advance_ms(&f->clock, 1000);
    tcap_begin();
    svc_log_repeats_flush(f->r, false);
    svc_log_repeats_flush(f->r, false); /* written once */
    out = tcap_end();
    assert_int_equal(count(out, "\n"), 1);
    assert_non_null(strstr(out, "level=warn mod=t msg=\"left out 5 more lines like this key's "
                                "last one in 1.0 s\" repeat_key=\"k1\" repeated=5\n"));
}

static void flush_all_does_not_wait_for_the_window(void **state)
{
    fixture_t *f = *state;
    const char *out;

    assert_true(admit(f, "k \"quoted\"", NULL));
    assert_false(admit(f, "k \"quoted\"", NULL));
    tcap_begin();
    svc_log_repeats_flush(f->r, true);
    out = tcap_end();
    assert_non_null(strstr(out, "repeat_key=\"k _quoted_\" repeated=1\n"));
}

static void admit_flushes_other_keys_once_a_window(void **state)
{
    fixture_t *f = *state;
    const char *out;

    assert_true(admit(f, "a", NULL));
    assert_false(admit(f, "a", NULL));
    assert_false(admit(f, "a", NULL));
    fake_clock_advance_ms(&f->clock, 1500);
    tcap_begin();
    assert_true(admit(f, "b", NULL)); /* a busy process needs no timer */
    out = tcap_end();
    assert_non_null(strstr(out, "repeat_key=\"a\" repeated=2\n"));
}

/* More keys than slots within one window: each admit that left a line out
 * is counted in a summary, and at most the table's 64 keys are ever left out. */
static void a_full_table_never_hides_a_line(void **state)
{
    fixture_t *f = *state;
    size_t left_out = 0, summed = 0;
    const char *out, *p;
    char key[32];

    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 200; i++) {
            snprintf(key, sizeof key, "key-%d", i);
            if (!admit(f, key, NULL))
                left_out++;
        }
    assert_true(left_out > 0);
    assert_true(left_out <= 64);
    tcap_begin();
    svc_log_repeats_flush(f->r, true);
    out = tcap_end();
    for (p = out; (p = strstr(p, " repeated=")) != NULL; p++)
        summed += strtoul(p + 10, NULL, 10);
    assert_int_equal(summed, left_out);
}

static void write_repeat_adds_the_count(void **state)
{
    const char *out;

    (void)state;
    svc_log_set_level(SVC_LOG_INFO);
    tcap_begin();
    for (int i = 0; i < 50; i++)
        svc_log_write_repeat(SVC_LOG_WARN, "t", "test-write-repeat", " k=v", "boom %d", i);
    svc_log_write_repeat(SVC_LOG_INFO, "t", "test-write-repeat-other", NULL, "other");
    svc_log_repeats_flush(svc_log_repeats_default(), true);
    out = tcap_end();
    /* 50 lines within well under a second: the first, then the count. */
    assert_non_null(strstr(out, "level=warn mod=t msg=\"boom 0\" k=v\n"));
    assert_null(strstr(out, "boom 1\""));
    assert_non_null(strstr(out, "repeat_key=\"test-write-repeat\" repeated=49\n"));
    assert_non_null(strstr(out, "level=info mod=t msg=\"other\"\n"));
}

static void write_repeat_below_the_level_is_not_counted(void **state)
{
    const char *out;

    (void)state;
    svc_log_set_level(SVC_LOG_ERROR);
    tcap_begin();
    for (int i = 0; i < 5; i++)
        svc_log_write_repeat(SVC_LOG_WARN, "t", "test-below", NULL, "hidden");
    svc_log_repeats_flush(svc_log_repeats_default(), true);
    out = tcap_end();
    svc_log_set_level(SVC_LOG_INFO);
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(first_then_one_per_window_with_the_count, setup, teardown),
        cmocka_unit_test_setup_teardown(a_quiet_keys_count_is_written_on_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(flush_all_does_not_wait_for_the_window, setup, teardown),
        cmocka_unit_test_setup_teardown(admit_flushes_other_keys_once_a_window, setup, teardown),
        cmocka_unit_test_setup_teardown(a_full_table_never_hides_a_line, setup, teardown),
        cmocka_unit_test(write_repeat_adds_the_count),
        cmocka_unit_test(write_repeat_below_the_level_is_not_counted),
    };

    return cmocka_run_group_tests_name("core_log_repeat", tests, NULL, NULL);
}
