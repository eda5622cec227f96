/* SPDX-License-Identifier: Apache-2.0 */
/* The repeated-line limiter from several threads (run under ThreadSanitizer by the test
 * command): every admit is either written or counted, and the counts add up. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/capture.h"
#include "svc/core.h"

#define THREADS 4
#define CALLS   5000

static svc_log_repeats_t *lim;

static void *hammer(void *arg)
{
    uintptr_t written = 0;
    char key[16];

    for (int i = 0; i < CALLS; i++) {
        uint64_t n = 0;
        snprintf(key, sizeof key, "k%d", i % 3);
        if (svc_log_repeats_admit(lim, SVC_LOG_WARN, "t", key, &n))
            written += 1 + (uintptr_t)n; /* this line and those it stands for */
    }
    (void)arg;
    return (void *)written;
}

static void every_admit_is_accounted_for(void **state)
{
    pthread_t t[THREADS];
    uintptr_t accounted = 0;
    const char *out, *p;

    (void)state;
    lim = svc_log_repeats_new(1, NULL); /* 1 ms: windows end while the threads run */
    assert_non_null(lim);
    tcap_begin();
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hammer, NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        void *w;
        assert_int_equal(pthread_join(t[i], &w), 0);
        accounted += (uintptr_t)w;
    }
    svc_log_repeats_free(lim); /* flushes the rest */
    out = tcap_end();
    for (p = out; (p = strstr(p, " repeated=")) != NULL; p++)
        accounted += strtoul(p + 10, NULL, 10);
    assert_int_equal(accounted, THREADS * CALLS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_admit_is_accounted_for),
    };

    return cmocka_run_group_tests_name("core_log_repeat_concurrent", tests, NULL, NULL);
}
