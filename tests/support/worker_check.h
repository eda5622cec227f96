/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker_check.h - checks made on worker threads, asserted on the main one.
 *
 * A cmocka assertion that fails longjmps to the test's frame, which lives on
 * the main thread's stack: called on another thread, it jumps across threads
 * (undefined behaviour; in practice a crash or a hang, not a failed test).
 * Workers record instead, with WORKER_CHECK(&chk, condition): the first
 * failure's place and text are kept, every failure is counted. After the
 * join, worker_check_assert(&chk) fails the test on the main thread.
 * Thread-safe; no allocation.
 */
#ifndef SUPPORT_WORKER_CHECK_H
#define SUPPORT_WORKER_CHECK_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

typedef struct worker_check {
    atomic_uint failures;
    atomic_flag claimed; /* the first failure writes `first` */
    atomic_bool written; /* ... and says it has */
    char first[256];
} worker_check_t;

#define WORKER_CHECK_INIT                                                                          \
    {                                                                                              \
        0, ATOMIC_FLAG_INIT, false, ""                                                             \
    }

static inline void worker_check_fail(worker_check_t *c, const char *file, int line,
                                     const char *expr)
{
    atomic_fetch_add(&c->failures, 1);
    if (!atomic_flag_test_and_set(&c->claimed)) {
        snprintf(c->first, sizeof c->first, "%s:%d: %s", file, line, expr);
        atomic_store(&c->written, true);
    }
}

/* On a worker: records a failure of cond, and goes on. */
#define WORKER_CHECK(c, cond)                                                                      \
    do {                                                                                           \
        if (!(cond))                                                                               \
            worker_check_fail((c), __FILE__, __LINE__, #cond);                                     \
    } while (0)

/* On the main thread, after every worker has been joined. */
static inline void worker_check_assert(worker_check_t *c)
{
    unsigned n = atomic_load(&c->failures);

    if (n > 0)
        fail_msg("%u checks failed on worker threads; the first: %s", n,
                 atomic_load(&c->written) ? c->first : "?");
}

#endif /* SUPPORT_WORKER_CHECK_H */
