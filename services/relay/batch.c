/* SPDX-License-Identifier: Apache-2.0 */
/* batch.c - read, publish, confirm, advance, two flights at a time (see batch.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "rows.h"

#define MOD "relay"
/* A full queue empties as the broker acknowledges; how long one row may
 * wait for room before it counts as failed. */
#define QUEUE_FULL_WAIT_MS 5000
#define POLL_SLICE_MS      50
/* Reports are overdue once the batch has waited overdue_ms and this much more. */
#define OVERDUE_MARGIN_MS 1000
#define POS_LEN           21 /* a bigint or xid8 in text */
#define WHEN_LEN          64 /* ce_time up to its second, with room     */
/* Batches in flight at most. Two let one batch's read overlap the other's
 * wait for the broker; a third adds nothing, because the stages then wait
 * on the cores and on each other, not on a free flight (docs/benchmarks.md,
 * "Results: the outbox relay"; what was tried: docs/bench/history.md). */
#define FLIGHTS 2

typedef struct flight flight_t;

/* err SVC_EINVAL: Kafka refused the row for good (too large, invalid);
 * dead once it is copied to outbox_dead_letters, which lets its cursor
 * pass it. */
typedef struct slot {
    flight_t *f;
    bool produced, done;
    svc_err_t err;
    bool dead;
} slot_t;

/* A shard's rows in a flight: [start, end) of its result; next: the first
 * not yet produced; passed: how many its cursor has passed. */
typedef struct group {
    int start, end, next, passed;
} group_t;

/* A shard's position: the (txid, seq) of a row. */
typedef struct pos {
    int shard;
    uint64_t txid;
    int64_t seq;
} pos_t;

/* One read and what became of its rows. */
struct flight {
    rly_batch_t *b; /* its batch (for its producer, in reports)    */
    PGresult *rows; /* what row[] points into                      */
    rly_row_t *row; /* the read's rows, decoded: n of them         */
    int n;
    slot_t *slots; /* rows + RLY_MAX_SHARDS (per-shard rounding) */
    group_t group[RLY_MAX_SHARDS];
    int n_groups, pending;        /* pending: produced, not yet reported       */
    char failure[SVC_ERRBUF_LEN]; /* the first failed report's reason    */
    char refused[SVC_ERRBUF_LEN]; /* the first refusal for good's (every
                                     dead row of the flight gets it)    */
    rly_batch_result_t res;
};

struct rly_batch {
    kfk_producer_t *producer;
    int rows;                  /* RELAY_BATCH_SIZE                     */
    pos_t cur[RLY_MAX_SHARDS]; /* the cursors, as in the table         */
    pos_t rd[RLY_MAX_SHARDS];  /* where the next read starts           */
    int n_cur;
    flight_t fl[FLIGHTS];
    int oldest, flying; /* fl[oldest] .. flying of them         */
    uint64_t *keys;     /* a wave's key hashes, open addressing */
    size_t keys_cap;    /* a power of two >= 4 x slots          */
    char *lit;          /* three array literals for statements  */
    size_t lit_cap;
    long long when_s;         /* the second of when_date (a backlog's */
    char when_date[WHEN_LEN]; /* rows share it): "YYYY-MM-DDTHH:MM:SS."*/
};

static size_t n_slots(const rly_batch_t *b)
{
    return (size_t)b->rows + RLY_MAX_SHARDS;
}

svc_err_t rly_batch_new(kfk_producer_t *producer, int rows, rly_batch_t **out)
{
    rly_batch_t *b = calloc(1, sizeof *b);
    bool ok = b != NULL;

    *out = NULL;
    if (!ok)
        return SVC_ENOMEM;
    b->producer = producer;
    b->rows = rows;
    b->keys_cap = 1;
    while (b->keys_cap < 2 * FLIGHTS * n_slots(b)) /* every flight's keys, half full */
        b->keys_cap <<= 1;
    b->lit_cap = 3 * (RLY_MAX_SHARDS * (POS_LEN + 1) + 3);
    b->keys = calloc(b->keys_cap, sizeof *b->keys);
    b->lit = malloc(b->lit_cap);
    for (int i = 0; i < FLIGHTS; i++) {
        b->fl[i].b = b;
        ok = ok && (b->fl[i].slots = calloc(n_slots(b), sizeof *b->fl[i].slots)) != NULL &&
             (b->fl[i].row = calloc(n_slots(b), sizeof *b->fl[i].row)) != NULL;
    }
    if (!ok || b->keys == NULL || b->lit == NULL) {
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
    for (int i = 0; i < FLIGHTS; i++) {
        PQclear(b->fl[i].rows);
        free(b->fl[i].slots);
        free(b->fl[i].row);
    }
    free(b->keys);
    free(b->lit);
    free(b);
}

/* A failure's reason: a refusal for good (SVC_EINVAL: the message is too
 * large or invalid, and will be again) is not the batch's failure - its row
 * is buried and the batch goes on - any other is. */
static void note_failure(flight_t *f, svc_err_t err, const char *reason)
{
    char *into = err == SVC_EINVAL ? f->refused : f->failure;

    if (err != SVC_OK && into[0] == '\0')
        svc_errbuf_set(into, "%s", reason);
}

void rly_batch_on_delivery(void *ctx, void *opaque, svc_err_t err, const char *reason)
{
    slot_t *s = opaque;

    (void)ctx;
    s->done = true;
    s->err = err;
    note_failure(s->f, err, reason);
    /* The flight's last report: wait_reports' flush returns now. Without
     * this it served the next flight's reports until its 1 ms slice ended,
     * and the cursor move waited with the broker's acknowledgements already
     * in (docs/bench/history.md, "Where the drain waits, traced"). */
    if (--s->f->pending == 0)
        kfk_producer_yield(s->f->b->producer);
}

int rly_batch_flying(const rly_batch_t *b)
{
    return b->flying;
}

int rly_batch_capacity(const rly_batch_t *b)
{
    (void)b;
    return FLIGHTS;
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
        t += sprintf(t, "%s%llu", sep, (unsigned long long)p[i].txid);
        q += sprintf(q, "%s%lld", sep, (long long)p[i].seq);
    }
    strcpy(s, "}");
    strcpy(t, "}");
    strcpy(q, "}");
    return out;
}

svc_err_t rly_batch_load_cursors(rly_batch_t *b, rly_store_t *st, const rly_lease_t *l,
                                 char errbuf[static SVC_ERRBUF_LEN])
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
        p->txid = strtoull(PQgetvalue(r, i, 1), NULL, 10);
        p->seq = strtoll(PQgetvalue(r, i, 2), NULL, 10);
    }
    memcpy(b->rd, b->cur, sizeof b->rd);
    PQclear(r);
    return err;
}

static pos_t *find_pos(pos_t *set, int n, int shard)
{
    for (int c = 0; c < n; c++)
        if (set[c].shard == shard)
            return &set[c];
    return NULL;
}

static pos_t pos_of_row(const rly_row_t *r)
{
    return (pos_t){r->shard, r->txid, r->seq};
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

/* Unix microseconds as RFC 3339 in UTC with 6 decimals, the form of ce_time
 * (docs/events.md §2): 2026-12-03T08:41:04.126540Z. The date and time up to
 * the second are formatted once per second: gmtime_r and snprintf for each
 * row showed in the relay's profile of a drain (docs/bench/history.md,
 * "Less CPU per row in the relay"). */
static void rfc3339_us(rly_batch_t *b, int64_t us, char out[WHEN_LEN + 8])
{
    long long s = us >= 0 ? us / 1000000 : (us - 999999) / 1000000;
    int frac = (int)(us - s * 1000000); /* 0..999999 */

    if (s != b->when_s || b->when_date[0] == '\0') {
        time_t t = (time_t)s;
        struct tm tm;

        gmtime_r(&t, &tm);
        snprintf(b->when_date, sizeof b->when_date, "%04d-%02d-%02dT%02d:%02d:%02d.",
                 (tm.tm_year + 1900) % 10000, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                 tm.tm_sec);
        b->when_s = s;
    }
    size_t n = strlen(b->when_date);
    memcpy(out, b->when_date, n);
    for (int d = 5; d >= 0; d--, frac /= 10)
        out[n + (size_t)d] = (char)('0' + frac % 10);
    memcpy(out + n + 6, "Z", 2);
}

/* Publishes row i of f; its slot records the outcome. */
static void produce_row(rly_batch_t *b, flight_t *f, int i)
{
    const rly_row_t *r = &f->row[i];
    slot_t *slot = &f->slots[i];
    char errbuf[SVC_ERRBUF_LEN] = "", when[WHEN_LEN + 8];
    kfk_header_t h[KFK_CE_MAX_HEADERS];
    size_t n_h = 0;
    const kfk_ce_t ce = {
        .id = r->id,
        .type = r->type,
        .source = r->source,
        .time = when,
        .request_id = r->request_id,
    };
    svc_err_t err;
    kfk_message_t m;
    uint64_t give_up = 0; /* set once the queue is first full */

    rfc3339_us(b, r->time_us, when); /* before the headers */
    err = kfk_ce_headers(&ce, h, &n_h, errbuf);
    m = (kfk_message_t){.topic = r->topic,
                        .key = r->key,
                        .key_len = r->key_len,
                        .value = r->payload,
                        .value_len = r->payload_len,
                        .headers = h,
                        .n_headers = n_h,
                        .opaque = slot};
    *slot = (slot_t){f, true, false, SVC_OK, false};
    f->pending++; /* before the call: its report may fire in the poll below */
    while (err == SVC_OK && (err = kfk_produce(b->producer, &m, errbuf)) == SVC_EEXHAUSTED) {
        uint64_t now = svc_now_ms();
        if (give_up == 0)
            give_up = now + QUEUE_FULL_WAIT_MS;
        if (now >= give_up)
            break;
        kfk_producer_poll(b->producer, POLL_SLICE_MS);
        err = SVC_OK;
    }
    if (err != SVC_OK) { /* refused: no report will come */
        *slot = (slot_t){f, true, true, err, false};
        f->pending--;
        note_failure(f, err, errbuf[0] ? errbuf : svc_strerror(err));
    }
}

/* The read's rows by shard (rly_rows_decode sorts them by shard). */
static void find_groups(flight_t *f)
{
    f->n_groups = 0;
    for (int i = 0; i < f->n; i++) {
        f->slots[i] = (slot_t){f, false, false, SVC_OK, false};
        if (i == 0 || f->row[i].shard != f->row[i - 1].shard)
            f->group[f->n_groups++] = (group_t){i, i, i, 0};
        f->group[f->n_groups - 1].end = i + 1;
    }
}

/* Produces f's next wave: each shard's next rows, in order, up to the first
 * whose key the wave already holds, or a flight before it still holds
 * (hold_back: how many flights before f are in flight; batch.h). false
 * when nothing was produced. */
static bool produce_wave(rly_batch_t *b, flight_t *f, int hold_back)
{
    bool any = false;

    memset(b->keys, 0, b->keys_cap * sizeof *b->keys);
    for (int k = 0; k < hold_back; k++) {
        const flight_t *o = &b->fl[(b->oldest + k) % FLIGHTS];
        for (int i = 0; i < o->n; i++)
            (void)key_add(b, o->row[i].key);
    }
    for (int g = 0; g < f->n_groups; g++) {
        group_t *gr = &f->group[g];
        while (gr->next < gr->end && key_add(b, f->row[gr->next].key)) {
            produce_row(b, f, gr->next++);
            any = true;
        }
    }
    return any;
}

/* Serves reports until none of f's is outstanding. On a stop signal, waits
 * at most drain_ms more: rows still unreported then stay unpublished.
 * Meanwhile the next batch's read, if one was sent ahead, is taken in as it
 * arrives (rly_store_pump): parsed only when the cursor move needed the
 * connection, its rows held up the move while the broker had nothing to
 * do (docs/bench/history.md, "The next read parsed while waiting").
 *
 * Reports can come much later than message.timeout.ms: when the broker
 * dies with requests in flight, the idempotent producer cannot tell
 * whether they were written, and holds those messages (it must not fail
 * one that may be on the log, nor reorder) until it reconnects. The flight
 * then waits, which is right (nothing can be published meanwhile, and
 * their reports will come), but the relay must not look healthy: overdue
 * reports are told to on_overdue. */
static void wait_reports(rly_batch_t *b, rly_store_t *st, flight_t *f, const rly_batch_opts_t *o)
{
    uint64_t overdue_at = svc_now_ms() + (uint64_t)o->overdue_ms + OVERDUE_MARGIN_MS,
             drain_until = svc_now_ms() + (uint64_t)o->drain_ms;

    while (f->pending > 0 && (!*o->stopping || svc_now_ms() < drain_until)) {
        /* Flush, not poll: the wave is all produced, so waiting for
         * linger.ms to fill a request would only delay it. A flush returns
         * once nothing at all is outstanding, or at f's last report
         * (rly_batch_on_delivery yields); while the other flight has
         * messages out too, short slices all the same, to take in the read
         * sent ahead between them. */
        kfk_producer_flush(b->producer,
                           kfk_producer_outstanding(b->producer) > f->pending ? 1 : POLL_SLICE_MS);
        rly_store_pump(st);
        if (!*o->stopping && svc_stop_requested(o->stop_fd, 0, MOD)) {
            *o->stopping = true;
            drain_until = svc_now_ms() + (uint64_t)o->drain_ms;
            svc_log_info(MOD, "waiting up to %lld ms for %d delivery reports",
                         (long long)o->drain_ms, kfk_producer_outstanding(b->producer));
        }
        if (!*o->stopping && svc_now_ms() >= overdue_at && o->on_overdue != NULL)
            o->on_overdue(o->ctx, f->pending, f->failure);
    }
}

/* Each shard's new position: its last row before the first one not
 * acknowledged (failed, or unreported) or not produced yet. */
static int new_positions(flight_t *f, pos_t *out)
{
    int moved = 0;

    for (int g = 0; g < f->n_groups; g++) {
        group_t *gr = &f->group[g];
        int last = gr->start + gr->passed;
        while (last < gr->next && f->slots[last].done && f->slots[last].err == SVC_OK)
            (*(f->slots[last++].dead ? &f->res.dead : &f->res.published))++;
        if (last == gr->start + gr->passed)
            continue;
        out[moved++] = pos_of_row(&f->row[last - 1]);
        gr->passed = last - gr->start;
    }
    return moved;
}

/* Copies f's rows that Kafka refused for good to outbox_dead_letters and
 * marks them dead, so that the cursor passes them (committed first: a
 * crash before the cursor moves buries them again, a no-op). One warning
 * per row: each is an event somebody must look at. */
static svc_err_t bury(rly_store_t *st, flight_t *f)
{
    for (int i = 0; i < f->n; i++) {
        slot_t *s = &f->slots[i];
        const char *id = f->row[i].id;
        svc_err_t err;

        if (!s->produced || !s->done || s->err != SVC_EINVAL || s->dead)
            continue;
        if ((err = rly_store_bury(st, id, f->refused, f->res.reason)) != SVC_OK)
            return err;
        s->err = SVC_OK;
        s->dead = true;
        svc_log_warn(MOD,
                     "outbox row %s (key %s, topic %s) refused by Kafka for good: %s; "
                     "copied to outbox_dead_letters, the cursor passes it",
                     id, f->row[i].key, f->row[i].topic, f->refused);
    }
    return SVC_OK;
}

/* Moves the cursors over f's acknowledged (or buried) rows, in the table,
 * then in memory. */
static void advance(rly_batch_t *b, rly_store_t *st, flight_t *f)
{
    pos_t moved[RLY_MAX_SHARDS];
    int before = f->res.published, dead = f->res.dead, n;
    rly_positions_t lit;

    if ((f->res.db_err = bury(st, f)) != SVC_OK)
        return;
    if ((n = new_positions(f, moved)) == 0)
        return;
    lit = literals(b, moved, n);
    f->res.db_err = rly_store_advance(st, &lit, f->res.reason);
    if (f->res.db_err != SVC_OK) {
        f->res.published = before; /* published, but passed by a later read's cursor */
        f->res.dead = dead;
        return;
    }
    for (int k = 0; k < n; k++) {
        pos_t *c = find_pos(b->cur, b->n_cur, moved[k].shard);
        if (c != NULL)
            *c = moved[k];
    }
}

/* Every row of f passed by its shard's cursor. */
static bool all_passed(const flight_t *f)
{
    for (int g = 0; g < f->n_groups; g++)
        if (f->group[g].passed < f->group[g].end - f->group[g].start)
            return false;
    return true;
}

void rly_batch_start(rly_batch_t *b, rly_store_t *st, const rly_batch_opts_t *o,
                     rly_batch_result_t *res)
{
    flight_t *f;
    uint64_t t = svc_now_ns();
    int per_shard;
    rly_positions_t lit;

    memset(res, 0, sizeof *res);
    if (b->n_cur == 0 || b->flying == FLIGHTS)
        return;
    f = &b->fl[(b->oldest + b->flying) % FLIGHTS];
    memset(&f->res, 0, sizeof f->res);
    f->failure[0] = f->refused[0] = '\0';
    f->pending = 0;
    per_shard = (b->rows + b->n_cur - 1) / b->n_cur;
    lit = literals(b, b->rd, b->n_cur);
    res->db_err = rly_store_read(st, &lit, per_shard, &f->rows, res->reason);
    res->read_ms = ms_since(&t);
    if (res->db_err != SVC_OK)
        return;
    res->db_err = rly_rows_decode(f->rows, f->row, (int)n_slots(b), &f->n, &res->held, res->reason);
    res->read = f->n;
    if (res->db_err != SVC_OK || f->n == 0) {
        PQclear(f->rows);
        f->rows = NULL;
        return;
    }
    find_groups(f);
    for (int g = 0; g < f->n_groups; g++) { /* the next read starts after these rows */
        group_t *gr = &f->group[g];
        pos_t *p = find_pos(b->rd, b->n_cur, f->row[gr->start].shard);
        res->more |= gr->end - gr->start >= per_shard; /* a full shard: more may wait */
        if (p != NULL)
            *p = pos_of_row(&f->row[gr->end - 1]);
    }
    b->flying++;
    atomic_fetch_add_explicit(o->in_flight, f->n, memory_order_relaxed);
    if (res->more) { /* a backlog: Postgres reads the next batch while this one is produced */
        lit = literals(b, b->rd, b->n_cur);
        rly_store_read_ahead(st, &lit, per_shard);
    }
    (void)produce_wave(b, f, b->flying - 1);
    res->produce_ms = ms_since(&t);
    f->res.read = res->read;
    f->res.read_ms = res->read_ms;
    f->res.produce_ms = res->produce_ms;
}

/* Waits for the reports of a flight that will not be advanced, so that no
 * report lands in its slots once they are reused. */
static void abandon(rly_batch_t *b, rly_store_t *st, flight_t *f, const rly_batch_opts_t *o)
{
    wait_reports(b, st, f, o);
    atomic_fetch_sub_explicit(o->in_flight, f->n, memory_order_relaxed);
    PQclear(f->rows);
    f->rows = NULL;
}

/* Counts f's failed rows and its first failure's reason into its result. */
static void tally(flight_t *f)
{
    for (int i = 0; i < f->n; i++)
        if (f->slots[i].produced && f->slots[i].done && f->slots[i].err != SVC_OK)
            f->res.failed++;
    if (f->res.reason[0] == '\0' && f->failure[0] != '\0')
        svc_errbuf_set(f->res.reason, "%s", f->failure);
}

void rly_batch_finish(rly_batch_t *b, rly_store_t *st, const rly_batch_opts_t *o,
                      rly_batch_result_t *res)
{
    flight_t *f = &b->fl[b->oldest];
    uint64_t t = svc_now_ns();
    bool first = true;

    memset(res, 0, sizeof *res);
    if (b->flying == 0)
        return;
    /* Wave by wave (batch.h); the first was produced by the start. */
    while (first || produce_wave(b, f, 0)) {
        if (!first)
            f->res.produce_ms += ms_since(&t);
        first = false;
        wait_reports(b, st, f, o);
        f->res.reports_ms += ms_since(&t);
        advance(b, st, f);
        f->res.advance_ms += ms_since(&t);
        if (f->res.db_err != SVC_OK || f->failure[0] != '\0' || *o->stopping)
            break;
    }
    tally(f);
    *res = f->res;
    atomic_fetch_sub_explicit(o->in_flight, f->n, memory_order_relaxed);
    PQclear(f->rows);
    f->rows = NULL;
    b->oldest = (b->oldest + 1) % FLIGHTS;
    b->flying--;
    if (all_passed(f))
        return;
    /* A row of f stays unpublished: the flight after it read rows beyond
     * it that no cursor may pass yet. It is dropped, and the next read
     * starts from the cursors again (its published rows come again, with
     * their ce_id). */
    while (b->flying > 0) {
        abandon(b, st, &b->fl[b->oldest], o);
        b->oldest = (b->oldest + 1) % FLIGHTS;
        b->flying--;
    }
    memcpy(b->rd, b->cur, sizeof b->rd);
}
