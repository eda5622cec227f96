/* SPDX-License-Identifier: Apache-2.0 */
/*
 * driver.c - rs_call_run(): the blocking way to drive the engine.
 *
 * It is nothing but the loop every caller would write: the engine decides,
 * this file sleeps. An event loop writes the same loop with a timer in place
 * of the sleep (see docs/resilience.md), which is why no policy lives here.
 */
#include <errno.h>
#include <time.h>

#include "internal.h"

void rs__sleep_default(void *ctx, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};

    (void)ctx;
    /* A signal must not shorten a backoff: carry on with what is left. */
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

svc_err_t rs_call_run(rs_upstream_t *u, const char *method, uint64_t deadline_ns, rs_op_fn op,
                      void *arg, rs_result_t *result)
{
    rs_call_t c;
    svc_err_t err;

    err = rs_call_begin(u, method, deadline_ns, &c);
    while (err == SVC_OK) {
        rs_outcome_t o = RS_OUTCOME_INIT;
        rs_attempt_t at;
        rs_decision_t d;

        err = rs_call_attempt(&c, &at.deadline_ns);
        if (err != SVC_OK)
            break;
        at.number = rs_call_attempts(&c);
        at.max = c.max_attempts;
        op(arg, &at, &o);
        d = rs_call_end_attempt(&c, &o);
        if (d.action != RS_RETRY) {
            err = d.err;
            break;
        }
        u->sleep(u->sleep_ctx, (uint64_t)d.delay_ms * SVC_NS_PER_MS);
    }
    rs_call_finish(&c, result);
    return err;
}
