/* SPDX-License-Identifier: Apache-2.0 */
/*
 * scale.h - wall-clock waits and bounds in tests, scaled for slow builds.
 *
 * ctest gives every test SVC_TEST_TIMEOUT_MULTIPLIER (pkg/cmake/SvcTest.cmake:
 * 1, or 4 in the ASan+UBSan and TSan trees). A bound that a sanitizer build
 * would miss for being slower, not for being wrong, goes through
 * svc_test_ms. A lower bound ("not before the 900 ms pushback") needs none.
 */
#ifndef SUPPORT_SCALE_H
#define SUPPORT_SCALE_H

/* ms times $SVC_TEST_TIMEOUT_MULTIPLIER (1 when unset or not a number >= 1). */
int svc_test_ms(int ms);

#endif
