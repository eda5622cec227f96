/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bulkhead.c - a concurrency limit that rejects at once instead of queueing.
 *
 * A queue in front of a slow dependency only turns its slowness into ours
 * (Little's law: waiting callers pile up). So a full bulkhead says no
 * immediately, and the caller sheds the work with a clear reason.
 *
 * With a limit, one shared counter must be exact, and costs one contended
 * atomic add per acquire and release. Without a limit the counter is only a
 * gauge, so it is sharded per thread like the other hot counters: a slot may
 * be released on another thread's shard, and only the sum is meaningful.
 */
#include "internal.h"

bool rs__bulkhead_acquire(rs__bulkhead_t *b)
{
    int64_t n;

    if (b->limit == 0) {
        atomic_fetch_add_explicit(&b->shard[rs__shard()].v, 1, memory_order_relaxed);
        return true;
    }
    /* CAS rather than add-then-undo: an add that overshoots, even briefly,
     * would make a concurrent caller see "full" while a slot is free. */
    n = atomic_load_explicit(&b->in_use, memory_order_relaxed);
    do {
        if (n >= (int64_t)b->limit)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&b->in_use, &n, n + 1, memory_order_acquire,
                                                    memory_order_relaxed));
    return true;
}

void rs__bulkhead_release(rs__bulkhead_t *b)
{
    if (b->limit == 0)
        atomic_fetch_sub_explicit(&b->shard[rs__shard()].v, 1, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&b->in_use, 1, memory_order_release);
}

int64_t rs__bulkhead_in_flight(const rs__bulkhead_t *b)
{
    int64_t sum = 0;

    if (b->limit != 0)
        return atomic_load_explicit(&b->in_use, memory_order_relaxed);
    for (unsigned i = 0; i < RS__SHARDS; i++)
        sum += atomic_load_explicit(&b->shard[i].v, memory_order_relaxed);
    return sum;
}
