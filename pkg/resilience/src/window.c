/* SPDX-License-Identifier: Apache-2.0 */
/*
 * window.c - sliding-window counters without locks.
 *
 * The window is RS__WINDOW_BUCKETS buckets of window/RS__WINDOW_BUCKETS
 * each. A cell holds (bucket number << 32 | count) in one atomic word: a
 * writer that finds an old bucket number starts the cell afresh with one CAS,
 * so there is no separate "rotate" step to race with, and a reader simply
 * skips cells whose number has fallen out of the window. Bucket numbers are
 * compared modulo 2^32, which only needs the window to be shorter than 2^32
 * buckets. A bucket number is now / bucket_ns, computed as the high half of
 * now x (2^64-1)/bucket_ns: a multiply instead of a 64-bit division (which
 * cost more than the rest of an add). It can be one less than the exact
 * quotient at a boundary, but it is monotonic and the same for writers and
 * readers, which is all a window needs.
 *
 * Sharded windows give each thread its own row of cells (its own cache
 * lines); the sum reads every row. Adding is the hot path, summing is not.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define COUNT_MASK 0xffffffffull

__extension__ typedef unsigned __int128 u128;

static uint64_t bucket_of(const rs__window_t *w, uint64_t now_ns)
{
    return (uint64_t)(((u128)now_ns * w->magic) >> 64);
}

svc_err_t rs__window_init(rs__window_t *w, uint64_t window_ns, bool sharded)
{
    const uint32_t per_line = RS__CACHELINE / sizeof(uint64_t);
    size_t bytes;

    memset(w, 0, sizeof *w);
    if (window_ns == 0)
        return SVC_OK; /* disabled: add and sum do nothing */
    w->bucket_ns = window_ns / RS__WINDOW_BUCKETS;
    w->magic = UINT64_MAX / w->bucket_ns;
    w->shards = sharded ? RS__SHARDS : 1;
    w->stride = (RS__WINDOW_BUCKETS + per_line - 1) / per_line * per_line;
    bytes = (size_t)w->stride * w->shards * sizeof(uint64_t);
    w->cells = aligned_alloc(RS__CACHELINE, bytes);
    if (w->cells == NULL)
        return SVC_ENOMEM;
    rs__window_reset(w);
    return SVC_OK;
}

void rs__window_dispose(rs__window_t *w)
{
    free(w->cells);
    w->cells = NULL;
}

static _Atomic uint64_t *cell_for(rs__window_t *w, uint64_t bucket)
{
    /* A window has either one row or RS__SHARDS of them. */
    unsigned shard = w->shards > 1 ? rs__shard() : 0;

    return &w->cells[(size_t)shard * w->stride + bucket % RS__WINDOW_BUCKETS];
}

void rs__window_add(rs__window_t *w, uint64_t now_ns, uint32_t n)
{
    uint64_t bucket, old, next;
    _Atomic uint64_t *cell;

    if (w->bucket_ns == 0)
        return;
    bucket = bucket_of(w, now_ns);
    cell = cell_for(w, bucket);
    old = atomic_load_explicit(cell, memory_order_relaxed);
    /* The common case, the bucket is current: a plain add. Should another
     * thread restart the cell meanwhile, the add lands in the newer bucket,
     * which is as good. */
    if ((old >> 32) == (bucket & COUNT_MASK)) {
        atomic_fetch_add_explicit(cell, n, memory_order_relaxed);
        return;
    }
    do {
        if ((old >> 32) == (bucket & COUNT_MASK))
            next = old + n;
        else
            next = (bucket & COUNT_MASK) << 32 | n;
    } while (!atomic_compare_exchange_weak_explicit(cell, &old, next, memory_order_relaxed,
                                                    memory_order_relaxed));
}

/* Takes back an add made in the same bucket (a refused reservation). If the
 * bucket has moved on meanwhile there is nothing left to take back. */
void rs__window_sub(rs__window_t *w, uint64_t now_ns, uint32_t n)
{
    uint64_t bucket, old, next;
    _Atomic uint64_t *cell;

    if (w->bucket_ns == 0)
        return;
    bucket = bucket_of(w, now_ns);
    cell = cell_for(w, bucket);
    old = atomic_load_explicit(cell, memory_order_relaxed);
    do {
        if ((old >> 32) != (bucket & COUNT_MASK) || (old & COUNT_MASK) < n)
            return;
        next = old - n;
    } while (!atomic_compare_exchange_weak_explicit(cell, &old, next, memory_order_relaxed,
                                                    memory_order_relaxed));
}

uint64_t rs__window_sum(const rs__window_t *w, uint64_t now_ns)
{
    uint32_t current;
    uint64_t sum = 0;

    if (w->bucket_ns == 0)
        return 0;
    current = (uint32_t)bucket_of(w, now_ns);
    for (uint32_t s = 0; s < w->shards; s++) {
        for (uint32_t i = 0; i < RS__WINDOW_BUCKETS; i++) {
            uint64_t v =
                atomic_load_explicit(&w->cells[(size_t)s * w->stride + i], memory_order_relaxed);
            if ((uint32_t)(current - (uint32_t)(v >> 32)) < RS__WINDOW_BUCKETS)
                sum += v & COUNT_MASK;
        }
    }
    return sum;
}

void rs__window_reset(rs__window_t *w)
{
    size_t n = (size_t)w->stride * w->shards;

    for (size_t i = 0; i < n && w->cells != NULL; i++)
        atomic_store_explicit(&w->cells[i], 0, memory_order_relaxed);
}
