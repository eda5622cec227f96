/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.c - what the live page shows beyond the counters: the last
 * decisions (retry, fail, reject, done after retries) and the last breaker
 * transitions of one upstream, in two small rings.
 *
 * Nothing here is on the happy path: a call that succeeds at once records
 * nothing. A decision is recorded with a trylock, so a failing call never
 * waits for another one or for the page: when two threads decide at the
 * same instant, one sample is lost (and counted in `dropped`); the counters
 * of metrics.c stay exact. Transitions are rare and the timeline needs every
 * one, so they take the lock. The lock is only ever held to copy a record in
 * or the rings out, so whoever waits for it waits for one memcpy.
 */
#include <string.h>

#include "internal.h"

svc_err_t rs__journal_init(rs__journal_t *j)
{
    memset(&j->data, 0, sizeof j->data);
    atomic_init(&j->dropped, 0);
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

/* The same decision as the newest record: a run to fold into it. */
static bool same_run(const rs__decision_rec_t *last, const rs__decision_rec_t *d)
{
    return last->seq != 0 && last->kind == d->kind && last->why == d->why &&
           last->method == d->method && last->attempt == d->attempt && last->err == d->err;
}

void rs__journal_decision(rs__journal_t *j, const rs__decision_rec_t *d)
{
    rs__journal_data_t *x = &j->data;
    rs__decision_rec_t *slot;
    uint64_t seq;
    uint32_t repeat = 1;

    if (pthread_mutex_trylock(&j->lock) != 0) {
        atomic_fetch_add_explicit(&j->dropped, 1, memory_order_relaxed);
        return;
    }
    x->decisions++;
    slot = &x->d[(x->records + RS__JOURNAL_DECISIONS - 1) % RS__JOURNAL_DECISIONS];
    if (same_run(slot, d)) {
        seq = slot->seq;
        repeat = slot->repeat < UINT32_MAX ? slot->repeat + 1 : UINT32_MAX;
    } else {
        seq = ++x->records;
        slot = &x->d[(seq - 1) % RS__JOURNAL_DECISIONS];
    }
    *slot = *d;
    slot->seq = seq;
    slot->repeat = repeat;
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
    pthread_mutex_lock(&j->lock);
    *out = j->data;
    pthread_mutex_unlock(&j->lock);
}
