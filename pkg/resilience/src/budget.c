/* SPDX-License-Identifier: Apache-2.0 */
/*
 * budget.c - the retry budget: retries <= percent% of originals + a floor.
 *
 * Both sides are counted over the same sliding window. Every call that makes
 * its first attempt deposits one original (the hot path, so that window is
 * sharded; calls refused at admission earn nothing); every
 * retry withdraws one. When a dependency is down, retries are limited to a
 * tenth of the traffic instead of multiplying it by max_attempts: the load
 * grows ~1.1x, not 3x. The floor keeps a quiet upstream retryable (10% of
 * 2 calls a minute is nothing).
 */
#include "internal.h"

svc_err_t rs__budget_init(rs__budget_t *b, const rs_budget_opts_t *o)
{
    uint64_t window_ns = (uint64_t)o->window_ms * SVC_NS_PER_MS;
    svc_err_t err;

    b->percent = o->percent;
    b->floor = (uint64_t)o->min_per_sec * o->window_ms / 1000;
    err = rs__window_init(&b->originals, window_ns, true);
    if (err == SVC_OK)
        err = rs__window_init(&b->retries, window_ns, false);
    else
        (void)rs__window_init(&b->retries, 0, false); /* disabled: cannot fail */
    return err; /* on failure, rs__budget_dispose() cleans up */
}

void rs__budget_dispose(rs__budget_t *b)
{
    rs__window_dispose(&b->originals);
    rs__window_dispose(&b->retries);
}

void rs__budget_deposit(rs__budget_t *b, uint64_t now_ns)
{
    rs__window_add(&b->originals, now_ns, 1);
}

static uint64_t allowance(const rs__budget_t *b, uint64_t now_ns)
{
    return rs__window_sum(&b->originals, now_ns) * b->percent / 100 + b->floor;
}

bool rs__budget_withdraw(rs__budget_t *b, uint64_t now_ns)
{
    if (b->retries.bucket_ns == 0)
        return true; /* no budget configured */
    /* Reserve first, then check: threads withdrawing together can never
     * overshoot the allowance between them; at worst one is refused that
     * would just have fitted. */
    rs__window_add(&b->retries, now_ns, 1);
    if (rs__window_sum(&b->retries, now_ns) <= allowance(b, now_ns))
        return true;
    rs__window_sub(&b->retries, now_ns, 1);
    return false;
}

bool rs__budget_read(const rs__budget_t *b, uint64_t now_ns, uint64_t *allowance_out,
                     uint64_t *used)
{
    if (b->retries.bucket_ns == 0)
        return false;
    *allowance_out = allowance(b, now_ns);
    *used = rs__window_sum(&b->retries, now_ns);
    return true;
}

uint64_t rs__budget_remaining(const rs__budget_t *b, uint64_t now_ns)
{
    uint64_t allowed, used;

    if (!rs__budget_read(b, now_ns, &allowed, &used))
        return UINT64_MAX;
    return used < allowed ? allowed - used : 0;
}
