/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.c - what the live page shows beyond the counters: the last
 * decisions (retry, fail, reject, done after retries) and the last breaker
 * transitions of one upstream, in two small rings.
 *
 * Nothing here is on the happy path: a call that succeeds at once records
 * nothing. A decision alike the newest record (the rejections of an open
 * breaker, the same give-up again and again) is only counted, in the
 * calling thread's shard, with no lock and no shared write, so a fast
 * rejection stays fast with many threads. Any other
 * is recorded with a trylock, so a failing call never waits for another one
 * or for the page: when two threads decide at the same instant, one sample
 * is lost (and counted in `dropped`); the counters of metrics.c stay exact.
 * Transitions are rare and the timeline needs every one, so they take the
 * lock. The lock is only ever held to copy a record in or the rings out, so
 * whoever waits for it waits for one memcpy.
 */
#include <string.h>

#include "internal.h"

svc_err_t rs__journal_init(rs__journal_t *j)
{
    memset(&j->data, 0, sizeof j->data);
    atomic_init(&j->dropped, 0);
    atomic_init(&j->run_key, 0);
    for (unsigned i = 0; i < RS__SHARDS; i++)
        atomic_init(&j->folded[i].v, 0);
    j->lock_ready = pthread_mutex_init(&j->lock, NULL) == 0;
    return j->lock_ready ? SVC_OK : SVC_ENOMEM;
}

void rs__journal_dispose(rs__journal_t *j)
{
    if (j->lock_ready)
        pthread_mutex_destroy(&j->lock);
    j->lock_ready = false;
}

void rs__journal_text(char *out, size_t cap, const char *text)
{
    size_t n = 0;

    if (cap == 0)
        return;
    for (; text != NULL && text[n] != '\0' && n + 1 < cap; n++) {
        unsigned char c = (unsigned char)text[n];
        out[n] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    out[n] = '\0';
}

/* What makes two decisions one row: kind, why, method, attempt and error
 * (each well within its bits); never 0. */
static uint64_t run_key(const rs__decision_rec_t *d)
{
    return 1ull << 63 | (uint64_t)(d->kind & 0x3u) << 40 | (uint64_t)(d->why & 0xffu) << 32 |
           (uint64_t)(d->method & 0xffffu) << 16 | (d->attempt & 0xffu) << 8 |
           ((uint32_t)d->err & 0xffu);
}

static rs__decision_rec_t *newest(rs__journal_data_t *x)
{
    return &x->d[(x->records + RS__JOURNAL_DECISIONS - 1) % RS__JOURNAL_DECISIONS];
}

static uint64_t folded(const rs__journal_t *j)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < RS__SHARDS; i++)
        n += (uint64_t)atomic_load_explicit(&j->folded[i].v, memory_order_relaxed);
    return n;
}

/* The newest record's repeat with the lock-free folds since it was written
 * (`now`: folded() now). A fold that read the key just before it changed
 * may count towards the next record: off by one, in a race only. */
static void settle_repeat(rs__journal_data_t *x, uint64_t now)
{
    rs__decision_rec_t *r = newest(x);
    uint64_t n;

    if (x->records == 0)
        return;
    n = r->repeat + (now - r->folded_base);
    r->repeat = n < UINT32_MAX ? (uint32_t)n : UINT32_MAX;
    r->folded_base = now;
}

void rs__journal_decision(rs__journal_t *j, rs__decision_rec_t *d, const svc_clock_t *clock)
{
    rs__journal_data_t *x = &j->data;
    uint64_t key = run_key(d), now;

    if (atomic_load_explicit(&j->run_key, memory_order_relaxed) == key) {
        atomic_fetch_add_explicit(&j->folded[rs__shard()].v, 1, memory_order_relaxed);
        return;
    }
    if (pthread_mutex_trylock(&j->lock) != 0) {
        atomic_fetch_add_explicit(&j->dropped, 1, memory_order_relaxed);
        return;
    }
    atomic_store_explicit(&j->run_key, 0, memory_order_relaxed); /* folds stop here */
    now = folded(j);
    settle_repeat(x, now);
    x->decisions++;
    if (x->records > 0 && run_key(newest(x)) == key) {
        newest(x)->repeat += newest(x)->repeat < UINT32_MAX;
    } else {
        if (d->at_ns == 0)
            d->at_ns = clock->now_ns(clock->ctx);
        d->seq = ++x->records;
        d->repeat = 1;
        d->folded_base = now;
        *newest(x) = *d;
    }
    atomic_store_explicit(&j->run_key, key, memory_order_relaxed);
    pthread_mutex_unlock(&j->lock);
}

void rs__journal_transition(rs__journal_t *j, rs_breaker_state_t from, rs_breaker_state_t to,
                            const char *why, uint64_t now_ns)
{
    rs__transition_rec_t r = {.at_ns = now_ns, .from = (uint8_t)from, .to = (uint8_t)to};
    rs__journal_data_t *x = &j->data;

    rs__journal_text(r.why, sizeof r.why, why);
    pthread_mutex_lock(&j->lock);
    r.seq = ++x->transitions;
    x->t[(r.seq - 1) % RS__JOURNAL_TRANSITIONS] = r;
    pthread_mutex_unlock(&j->lock);
}

void rs__journal_read(rs__journal_t *j, rs__journal_data_t *out)
{
    uint64_t n;

    pthread_mutex_lock(&j->lock);
    *out = j->data;
    /* With the lock held no record is written, so the lock-free folds since
     * the newest one was are all its own. */
    n = folded(j);
    pthread_mutex_unlock(&j->lock);
    out->decisions += n;
    settle_repeat(out, n);
}
