/* SPDX-License-Identifier: Apache-2.0 */
/*
 * group.h - cmocka's group run, with a group teardown that counts.
 *
 * cmocka 1.1.5 (Debian 12) prints "[  FAILED  ] GROUP TEARDOWN" when a
 * group teardown returns non-zero and still returns 0 from
 * cmocka_run_group_tests, so a check made there - "the service exited 0 on
 * SIGTERM", which under ASan is also the leak check - passed whatever it
 * found (seen: every service of test_saga_burst killed by PR_SET_PDEATHSIG,
 * and the test green). A per-test teardown does fail its test; only the
 * group's does not. svc_test_run_group adds a failed group teardown to the
 * count it returns.
 */
#ifndef SUPPORT_GROUP_H
#define SUPPORT_GROUP_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* Not reentrant: one group run at a time (as cmocka's own). */
int svc_test_run_group(const char *name, const struct CMUnitTest *tests, size_t n,
                       CMFixtureFunction setup, CMFixtureFunction teardown);

#define svc_test_run_group_tests(tests, setup, teardown)                                           \
    svc_test_run_group(#tests, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)
/* The same, named (as cmocka_run_group_tests_name). */
#define svc_test_run_group_tests_name(name, tests, setup, teardown)                                \
    svc_test_run_group(name, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)

#endif
