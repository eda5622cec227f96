/* SPDX-License-Identifier: Apache-2.0 */
/* test_clock.c - svc_rfc3339_now: the shape, UTC, and the wall clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "svc/core.h"

static time_t realtime_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec;
}

static void rfc3339_is_utc_with_milliseconds(void **state)
{
    char s[SVC_RFC3339_LEN];
    struct tm tm;
    time_t before, after, at;
    int tries = 0;

    (void)state;
    /* Bracketed by the clock svc_rfc3339_now reads. Not time(NULL): glibc answers it from the
     * kernel's coarse clock, which can still say the last second when CLOCK_REALTIME has
     * begun the next (a CI run failed so). A wall clock stepped back between the readings
     * (NTP) is read again. */
    do {
        before = realtime_s();
        svc_rfc3339_now(s);
        after = realtime_s();
    } while (after < before && ++tries < 5);
    assert_int_equal(strlen(s), 24);
    /* 2026-12-03T12:34:56.789Z */
    for (int i = 0; i < 24; i++) {
        const char *shape = "dddd-dd-ddTdd:dd:dd.dddZ";
        if (shape[i] == 'd')
            assert_true(s[i] >= '0' && s[i] <= '9');
        else
            assert_int_equal(s[i], shape[i]);
    }
    memset(&tm, 0, sizeof tm);
    assert_int_equal(sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                            &tm.tm_hour, &tm.tm_min, &tm.tm_sec),
                     6);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    at = timegm(&tm);
    assert_true(at >= before && at <= after);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rfc3339_is_utc_with_milliseconds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
