/* SPDX-License-Identifier: Apache-2.0 */
/* group.c - a group teardown that counts (see group.h). */
#include <stdio.h>

#include "support/group.h"

static CMFixtureFunction real_teardown;
static int teardown_failed;

static int counted_teardown(void **state)
{
    int rc = real_teardown(state);

    if (rc != 0)
        teardown_failed = 1;
    return rc;
}

int svc_test_run_group(const char *name, const struct CMUnitTest *tests, size_t n,
                       CMFixtureFunction setup, CMFixtureFunction teardown)
{
    int failed;

    real_teardown = teardown;
    teardown_failed = 0;
    failed =
        _cmocka_run_group_tests(name, tests, n, setup, teardown != NULL ? counted_teardown : NULL);
    if (teardown_failed)
        fprintf(stderr, "%s: the group teardown failed: counted as a failure\n", name);
    return failed + teardown_failed;
}
