/* SPDX-License-Identifier: Apache-2.0 */
/* scale.c - see scale.h. */
#include <stdlib.h>

#include "scale.h"

int svc_test_ms(int ms)
{
    const char *s = getenv("SVC_TEST_TIMEOUT_MULTIPLIER");
    int m = s != NULL ? atoi(s) : 1;

    return ms * (m >= 1 ? m : 1);
}
