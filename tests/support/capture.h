/* SPDX-License-Identifier: Apache-2.0 */
/* Capturing what the code under test writes to stderr (its log lines), so a test can assert on
 * them. Not thread-safe: one capture at a time, begun and ended on the test's thread. */
#ifndef TEST_SUPPORT_CAPTURE_H
#define TEST_SUPPORT_CAPTURE_H

/* Redirects stderr (the file descriptor, so unbuffered writes are caught too) to a temporary
 * file. Fails the test when that cannot be done. */
void tcap_begin(void);

/* Restores stderr and returns what was written meanwhile (at most 64 KiB), NUL-terminated.
 * The text stays valid until the next tcap_end. */
const char *tcap_end(void);

#endif
