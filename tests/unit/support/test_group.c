/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_group.c - svc_test_run_group counts a failed group teardown
 * (tests/support/group.h), where cmocka_run_group_tests does not. Not a
 * cmocka suite of its own: it runs two small groups and checks what each
 * run returned (the groups' cmocka output, FAILED lines included, is
 * expected).
 */
#include <stdio.h>

#include "support/group.h"

static int teardowns;

static void passes(void **state)
{
    (void)state;
}

static int teardown_ok(void **state)
{
    (void)state;
    teardowns++;
    return 0;
}

static int teardown_fails(void **state)
{
    (void)state;
    teardowns++;
    return -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(passes)};
    int good = svc_test_run_group("good_teardown", tests, 1, NULL, teardown_ok);
    int bad = svc_test_run_group("bad_teardown", tests, 1, NULL, teardown_fails);
    int plain = cmocka_run_group_tests_name("cmocka_itself", tests, NULL, teardown_fails);

    printf("test_group: good %d, bad %d (want 0 and 1); cmocka itself returned %d for the bad "
           "teardown; %d teardowns ran (want 3)\n",
           good, bad, plain, teardowns);
    return good == 0 && bad == 1 && teardowns == 3 ? 0 : 1;
}
