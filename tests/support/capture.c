/* SPDX-License-Identifier: Apache-2.0 */
#include "support/capture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

static char capture_buf[65536];
static int saved_stderr = -1;
static FILE *capture_file;

void tcap_begin(void)
{
    fflush(stderr);
    capture_file = tmpfile();
    assert_non_null(capture_file);
    saved_stderr = dup(STDERR_FILENO);
    assert_true(saved_stderr >= 0);
    assert_true(dup2(fileno(capture_file), STDERR_FILENO) >= 0);
}

const char *tcap_end(void)
{
    size_t n;

    fflush(stderr);
    assert_true(dup2(saved_stderr, STDERR_FILENO) >= 0);
    close(saved_stderr);
    saved_stderr = -1;
    rewind(capture_file);
    n = fread(capture_buf, 1, sizeof capture_buf - 1, capture_file);
    capture_buf[n] = '\0';
    fclose(capture_file);
    capture_file = NULL;
    return capture_buf;
}
