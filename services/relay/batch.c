/* SPDX-License-Identifier: Apache-2.0 */
/* batch.c - read, publish, confirm, advance (see batch.h). */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "batch.h"

#define MOD "relay"
/* A full queue empties as the broker acknowledges; how long one row may
 * wait for room before it counts as failed. */
#define QUEUE_FULL_WAIT_MS 5000
#define POLL_SLICE_MS      50
/* Reports are overdue once the batch has waited overdue_ms and this much more. */
#define OVERDUE_MARGIN_MS  1000
#define POS_LEN            24 /* a bigint or xid8 in text, with its NUL */

typedef struct slot {
    rly_batch_t *b;
    bool produced, done;
    svc_err_t err;
} slot_t;

/* A shard's rows in the batch: [start, end) of the result; next: the first
 * not yet produced; passed: how many its cursor has passed. */
typedef struct group {
    int start, end, next, passed;
} group_t;

/* A shard's position: the (txid, seq) of its last published row. */
typedef struct pos {
    int shard;
    char txid[POS_LEN], seq[POS_LEN];
} pos_t;

struct rly_batch {
    kfk_producer_t *producer;
    int rows;               /* RELAY_BATCH_SIZE                          */
    pos_t cur[RLY_MAX_SHARDS];
    int n_cur;
    slot_t *slots;          /* rows + RLY_MAX_SHARDS (per-shard rounding) */
    uint64_t *keys;         /* the wave's key hashes, open addressing    */
    group_t group[RLY_MAX_SHARDS];
    int n_groups;
    size_t keys_cap;        /* a power of two >= 2 x slots               */
    int pending;            /* produced, not yet reported                */
    char failure[SVC_ERRBUF_LEN]; /* the first failed report's reason    */
    char *lit;              /* three array literals for the statements   */
    size_t lit_cap;
};

static size_t n_slots(const rly_batch_t *b)
{
    return (size_t)b->rows + RLY_MAX_SHARDS;
}

svc_err_t rly_batch_new(kfk_producer_t *producer, int rows, rly_batch_t **out)
{
    rly_batch_t *b = calloc(1, sizeof *b);

    *out = NULL;
    if (b == NULL)
        return SVC_ENOMEM;
    b->producer = producer;
    b->rows = rows;
    b->keys_cap = 1;
    while (b->keys_cap < 2 * n_slots(b))
        b->keys_cap <<= 1;
    b->lit_cap = 3 * (RLY_MAX_SHARDS * (POS_LEN + 1) + 3);
    b->slots = calloc(n_slots(b), sizeof *b->slots);
    b->keys = calloc(b->keys_cap, sizeof *b->keys);
    b->lit = malloc(b->lit_cap);
    if (b->slots == NULL || b->keys == NULL || b->lit == NULL) {
        rly_batch_free(b);
        return SVC_ENOMEM;
    }
    *out = b;
    return SVC_OK;
}

void rly_batch_free(rly_batch_t *b)
{
    if (b == NULL)
        return;
    free(b->slots);
    free(b->keys);
    free(b->lit);
    free(b);
}

void rly_batch_on_delivery(void *ctx, void *opaque, svc_err_t err, const char *reason)
{
    slot_t *s = opaque;

    (void)ctx;
    s->done = true;
    s->err = err;
    s->b->pending--;
    if (err != SVC_OK && s->b->failure[0] == '\0')
        svc_errbuf_set(s->b->failure, "%s", reason);
}

/* Three array literals, "{a,b}" each, of the positions in p[0..n):
 * shards, txids and seqs, in b->lit. */
static rly_positions_t literals(rly_batch_t *b, const pos_t *p, int n)
{
    char *s = b->lit, *t = s + b->lit_cap / 3, *q = t + b->lit_cap / 3;
    rly_positions_t out = {s, t, q};

    *s++ = *t++ = *q++ = '{';
    for (int i = 0; i < n; i++) {
        const char *sep = i ? "," : "";
        s += sprintf(s, "%s%d", sep, p[i].shard);
        t += sprintf(t, "%s%s", sep, p[i].txid);
        q += sprintf(q, "%s%s", sep, p[i].seq);
    }
    strcpy(s, "}");
    strcpy(t, "}");
    strcpy(q, "}");
    return out;
}

svc_err_t rly_batch_load_cursors(rly_batch_t *b, rly_store_t *st, const rly_lease_t *l,
                                 char *errbuf)
{
    pos_t owned[RLY_MAX_SHARDS];
    int n = rly_lease_owned(l);
    PGresult *r;
    svc_err_t err;

    b->n_cur = 0;
    if (n == 0)
        return SVC_OK;
    for (int i = 0; i < n; i++)
        owned[i].shard = rly_lease_shard(l, i);
    err = rly_store_cursors(st, literals(b, owned, n).shards, &r, errbuf);
    for (int i = 0; err == SVC_OK && i < PQntuples(r); i++) {
        pos_t *p = &b->cur[b->n_cur++];
        p->shard = atoi(PQgetvalue(r, i, 0));
        snprintf(p->txid, sizeof p->txid, "%s", PQgetvalue(r, i, 1));
        snprintf(p->seq, sizeof p->seq, "%s", PQgetvalue(r, i, 2));
    }
    PQclear(r);
    return err;
}

/* FNV-1a: a collision only ends a wave early. */
static uint64_t key_hash(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (; *key; key++)
        h = (h ^ (unsigned char)*key) * 0x100000001b3ull;
    return h | 1; /* 0 marks a free cell */
}

/* Adds key to the wave's set; false when it was there already. */
static bool key_add(rly_batch_t *b, const char *key)
{
    uint64_t h = key_hash(key);

    for (size_t i = h & (b->keys_cap - 1);; i = (i + 1) & (b->keys_cap - 1)) {
        if (b->keys[i] == h)
            return false;
        if (b->keys[i] == 0) {
            b->keys[i] = h;
            return true;
        }
    }
}

static double ms_since(uint64_t *t_ns)
{
    uint64_t now = svc_now_ns(), was = *t_ns;

    *t_ns = now;
    return (double)(now - was) / 1e6;
}

/* Publishes row i; its slot records the outcome. */
static void produce_row(rly_batch_t *b, PGresult *rows, int i, rly_batch_result_t *res)
{
    slot_t *slot = &b->slots[i];
    char errbuf[SVC_ERRBUF_LEN] = "";
    kfk_header_t h[KFK_CE_MAX_HEADERS];
    size_t n_h = 0, len = 0;
    const char *key = PQgetvalue(rows, i, RLY_COL_KEY);
    const kfk_ce_t ce = {
        .id = PQgetvalue(rows, i, RLY_COL_ID),
        .type = PQgetvalue(rows, i, RLY_COL_TYPE),
        .source = PQgetvalue(rows, i, RLY_COL_SOURCE),
        .time = PQgetvalue(rows, i, RLY_COL_TIME),
        .request_id = PQgetvalue(rows, i, RLY_COL_REQUEST_ID),
    };
    unsigned char *value =
        PQunescapeBytea((const unsigned char *)PQgetvalue(rows, i, RLY_COL_PAYLOAD), &len);
    svc_err_t err = value == NULL ? SVC_ENOMEM : kfk_ce_headers(&ce, h, &n_h, errbuf);
    kfk_message_t m = {.topic = PQgetvalue(rows, i, RLY_COL_TOPIC),
                       .key = key, .key_len = strlen(key), .value = value, .value_len = len,
                       .headers = h, .n_headers = n_h, .opaque = slot};
    uint64_t give_up = svc_now_ms() + QUEUE_FULL_WAIT_MS;

    *slot = (slot_t){b, true, false, SVC_OK};
    b->pending++; /* before the call: its report may fire in the poll below */
    while (err == SVC_OK &&
           (err = kfk_produce(b->producer, &m, errbuf)) == SVC_EEXHAUSTED &&
           svc_now_ms() < give_up) {
        kfk_producer_poll(b->producer, POLL_SLICE_MS);
        err = SVC_OK;
    }
    if (err != SVC_OK) { /* refused: no report will come */
        *slot = (slot_t){b, true, true, err};
        b->pending--;
        if (res->reason[0] == '\0')
            svc_errbuf_set(res->reason, "%s", errbuf[0] ? errbuf : svc_strerror(err));
    }
    PQfreemem(value);
}

/* The result's rows by shard (they come sorted by shard). */
static void find_groups(rly_batch_t *b, PGresult *rows, int n)
{
    b->n_groups = 0;
    for (int i = 0; i < n; i++) {
        b->slots[i] = (slot_t){b, false, false, SVC_OK};
        if (i == 0 || strcmp(PQgetvalue(rows, i, RLY_COL_SHARD),
                             PQgetvalue(rows, i - 1, RLY_COL_SHARD)) != 0)
            b->group[b->n_groups++] = (group_t){i, i, i, 0};
        b->group[b->n_groups - 1].end = i + 1;
    }
}

/* Produces the next wave: each shard's next rows, in order, up to the
 * first whose key the wave already holds (batch.h). false when nothing
 * was left to produce. */
static bool produce_wave(rly_batch_t *b, PGresult *rows, rly_batch_result_t *res)
{
    bool any = false;

    memset(b->keys, 0, b->keys_cap * sizeof *b->keys);
    for (int g = 0; g < b->n_groups; g++) {
        group_t *gr = &b->group[g];
        while (gr->next < gr->end && key_add(b, PQgetvalue(rows, gr->next, RLY_COL_KEY))) {
            produce_row(b, rows, gr->next++, res);
            any = true;
        }
    }
    return any;
}
/* Consumes a pending stop signal; true once one arrived. */
static bool stop_signalled(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    struct signalfd_siginfo si;

    if (poll(&p, 1, 0) <= 0 || read(fd, &si, sizeof si) != (ssize_t)sizeof si)
        return false;
    svc_log_info(MOD, "%s: stopping", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
    return true;
}

/* Serves reports until none is outstanding. On a stop signal, waits at
 * most drain_ms more: rows still unreported then stay unpublished.
 *
 * Reports can come much later than message.timeout.ms: when the broker
 * dies with requests in flight, the idempotent producer cannot tell
 * whether they were written, and holds those messages (it must not fail
 * one that may be on the log, nor reorder) until it reconnects. The batch
 * then waits, which is right (nothing can be published meanwhile, and
 * their reports will come), but the relay must not look healthy: overdue
 * reports are told to on_overdue. */
static void wait_reports(rly_batch_t *b, const rly_batch_opts_t *o)
{
    uint64_t overdue_at = svc_now_ms() + (uint64_t)o->overdue_ms + OVERDUE_MARGIN_MS,
             drain_until = 0;

    while (b->pending > 0 && (!*o->stopping || svc_now_ms() < drain_until)) {
        /* Flush, not poll: every row of the batch is produced, so waiting
         * for linger.ms to fill a request would only delay it. */
        kfk_producer_flush(b->producer, POLL_SLICE_MS);
        if (!*o->stopping && stop_signalled(o->stop_fd)) {
            *o->stopping = true;
            drain_until = svc_now_ms() + (uint64_t)o->drain_ms;
            svc_log_info(MOD, "waiting up to %lld ms for %d delivery reports",
                         (long long)o->drain_ms, b->pending);
        }
        if (!*o->stopping && svc_now_ms() >= overdue_at && o->on_overdue != NULL)
            o->on_overdue(o->ctx, b->pending, b->failure);
    }
}

/* Each shard's new position: its last row before the first one not
 * acknowledged (failed, or unreported) or not produced yet. */
static int new_positions(rly_batch_t *b, PGresult *rows, pos_t *out, rly_batch_result_t *res)
{
    int moved = 0;

    for (int g = 0; g < b->n_groups; g++) {
        group_t *gr = &b->group[g];
        int last = gr->start + gr->passed;
        while (last < gr->next && b->slots[last].done && b->slots[last].err == SVC_OK)
            last++;
        if (last == gr->start + gr->passed)
            continue;
        pos_t *p = &out[moved++];
        p->shard = atoi(PQgetvalue(rows, last - 1, RLY_COL_SHARD));
        snprintf(p->txid, sizeof p->txid, "%s", PQgetvalue(rows, last - 1, RLY_COL_TXID));
        snprintf(p->seq, sizeof p->seq, "%s", PQgetvalue(rows, last - 1, RLY_COL_SEQ));
        res->published += last - gr->start - gr->passed;
        gr->passed = last - gr->start;
    }
    return moved;
}

/* Moves the cursors in the table, then in memory. */
static void advance(rly_batch_t *b, rly_store_t *st, const pos_t *moved, int n,
                    rly_batch_result_t *res)
{
    rly_positions_t lit;

    if (n == 0)
        return;
    lit = literals(b, moved, n);
    res->db_err = rly_store_advance(st, &lit, res->reason);
    if (res->db_err != SVC_OK)
        return; /* published, but passed by a later batch's cursor */
    for (int k = 0; k < n; k++)
        for (int c = 0; c < b->n_cur; c++)
            if (b->cur[c].shard == moved[k].shard)
                b->cur[c] = moved[k];
}

/* Waves until every row is produced, one fails, or a stop: each wave's
 * cursors moved before the next wave is produced. */
static void run_waves(rly_batch_t *b, rly_store_t *st, PGresult *rows,
                      const rly_batch_opts_t *o, rly_batch_result_t *res)
{
    pos_t moved[RLY_MAX_SHARDS];
    uint64_t t = svc_now_ns();

    while (produce_wave(b, rows, res)) {
        int published = res->published;
        res->produce_ms += ms_since(&t);
        wait_reports(b, o);
        res->reports_ms += ms_since(&t);
        advance(b, st, moved, new_positions(b, rows, moved, res), res);
        res->advance_ms += ms_since(&t);
        if (res->db_err != SVC_OK)
            res->published = published;
        if (res->db_err != SVC_OK || b->failure[0] != '\0' || res->reason[0] != '\0' ||
            *o->stopping)
            break;
    }
    for (int i = 0; i < res->read; i++)
        if (b->slots[i].produced && b->slots[i].done && b->slots[i].err != SVC_OK)
            res->failed++;
    if (res->reason[0] == '\0' && b->failure[0] != '\0')
        svc_errbuf_set(res->reason, "%s", b->failure);
}

void rly_batch_run(rly_batch_t *b, rly_store_t *st, const rly_batch_opts_t *o,
                   rly_batch_result_t *res)
{
    PGresult *rows = NULL;
    rly_positions_t lit;
    uint64_t t = svc_now_ns();
    int n, per_shard;

    memset(res, 0, sizeof *res);
    if (b->n_cur == 0)
        return;
    per_shard = (b->rows + b->n_cur - 1) / b->n_cur;
    lit = literals(b, b->cur, b->n_cur);
    res->db_err = rly_store_read(st, &lit, per_shard, &rows, res->reason);
    res->read_ms = ms_since(&t);
    if (res->db_err != SVC_OK)
        return;
    n = PQntuples(rows);
    res->held = n > 0 && PQgetvalue(rows, 0, RLY_COL_HELD)[0] == 't';
    if (n > 0 && PQgetisnull(rows, 0, RLY_COL_SHARD))
        n = 0;
    res->read = n;
    atomic_store_explicit(o->in_flight, n, memory_order_relaxed);
    b->failure[0] = '\0';
    b->pending = 0;
    find_groups(b, rows, n);
    for (int g = 0; g < b->n_groups; g++) /* a full shard: more may wait */
        res->more |= b->group[g].end - b->group[g].start >= per_shard;
    run_waves(b, st, rows, o, res);
    atomic_store_explicit(o->in_flight, 0, memory_order_relaxed);
    PQclear(rows);
}
