/* SPDX-License-Identifier: Apache-2.0 */
/*
 * relay.c - claim, publish, confirm, mark (see relay.h).
 *
 * A row is marked published only in the transaction that claimed it, and
 * only after its delivery report said the broker has it (acks=all). So a
 * crash anywhere loses nothing: the claim's row locks die with the session
 * and the rows are claimed again, at worst published twice with the same
 * ce_id, which is what consumers dedupe on.
 */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "kafka/kafka.h"
#include "listen.h"
#include "relay.h"
#include "rs/resilience.h"
#include "stats.h"
#include "store.h"

#define MOD "relay"
/* A full queue empties as the broker acknowledges; how long one row may
 * wait for room before it counts as failed. */
#define QUEUE_FULL_WAIT_MS 5000
#define POLL_SLICE_MS      50
/* The backlog gauges are counted by the relay, never by a scrape: at most
 * this often while busy, and this often while idle. The count's cap keeps
 * each count cheap. */
#define STATS_EVERY_MS     1000
#define STATS_IDLE_MS      5000
#define STATS_BACKLOG_CAP  100000
/* An idle relay learns of Kafka's state from a metadata request
 * (kfk_producer_ping) once it has been idle this long since the last batch
 * or probe. The request blocks the loop a few ms while a broker is up, at
 * most PROBE_TIMEOUT_MS while none answers; a NOTIFY arriving meanwhile
 * waits that long, but only while nothing could be published anyway. */
#define LOCKED_RETRY_MS    1000
#define PROBE_IDLE_MS      2000
#define PROBE_TIMEOUT_MS   500

typedef struct flight flight_t;

typedef struct slot {
    flight_t *f; /* the batch it belongs to */
    bool done;
    svc_err_t err;
} slot_t;

struct rly_relay {
    const rly_config_t *cfg;
    kfk_producer_t *producer;
    flight_t *fl; /* RLY_FLIGHTS */
    rly_listener_t *listener;
    char reason[SVC_ERRBUF_LEN]; /* why Kafka or the database is down */
    bool stopping, kafka_down, db_down;
    uint64_t drain_until_ms; /* once stopping: when to stop waiting for reports */
    unsigned failures; /* consecutive failed batches: the backoff exponent */
    uint64_t rand_state, stats_at_ms;
    uint64_t kafka_seen_ms; /* the last batch or probe: Kafka's state is that recent */
    rly_stats_t stats;     /* shared with the admin thread: atomics */
    admin_server_t *admin; /* NULL when RELAY_ADMIN_LISTEN is 0 or empty */
};

/* One batch's outcome. */
typedef struct batch {
    int claimed, ok, failed;
    svc_err_t db_err;
    /* Where the batch's time went (ms, for the debug line): the claim, the
     * produce calls, the wait for the reports, the mark and commit. */
    double claim_ms, produce_ms, reports_ms, mark_ms;
} batch_t;

/* A claimed batch, from its claim to its commit: its own connection (the
 * claim's transaction stays open until the mark's COMMIT), its rows and
 * each row's outcome. There are two, so that the next batch is claimed and
 * produced while the one before waits for its delivery reports (see
 * rly_relay_run). */
#define RLY_FLIGHTS 2

struct flight {
    rly_store_t *store;
    PGresult *rows;
    slot_t *slots; /* batch_size; outlive the producer: late reports land here */
    int pending;   /* produced, not yet reported */
    uint64_t produced_ms, t_ns;
    char reason[SVC_ERRBUF_LEN]; /* the batch's first failure */
    batch_t b;
};

static double ms_since(uint64_t *t_ns)
{
    uint64_t now = svc_now_ns(), was = *t_ns;

    *t_ns = now;
    return (double)(now - was) / 1e6;
}

static void on_delivery(void *ctx, void *opaque, svc_err_t err, const char *reason)
{
    slot_t *s = opaque;

    (void)ctx;
    s->done = true;
    s->err = err;
    s->f->pending--;
    if (err != SVC_OK && s->f->reason[0] == '\0')
        svc_errbuf_set(s->f->reason, "%s", reason);
}

/* librdkafka's own lines (connection refused per attempt, the harmless
 * GETPID retry after a broker start) are detail: state changes are ours. */
static void on_log(void *ctx, int level, const char *facility, const char *text)
{
    svc_log_debug("relay.kafka", "%s: %s", facility, text);
}

/* The admin port, unless disabled. Bound before the loop starts, so a port
 * in use is a start-up error (exit 2), not a silent lack of metrics. */
static svc_err_t admin_start(rly_relay_t *r, char *errbuf)
{
    if (r->cfg->admin_listen[0] == '\0' || strcmp(r->cfg->admin_listen, "0") == 0)
        return SVC_OK;
    return admin_server_start(r->cfg->admin_listen, rly_stats_metrics, rly_stats_ready,
                              &r->stats, &r->admin, errbuf);
}

svc_err_t rly_relay_new(const rly_config_t *cfg, rly_relay_t **out, char *errbuf)
{
    rly_relay_t *r = calloc(1, sizeof *r);
    kfk_producer_opts_t o;
    svc_err_t err = SVC_ENOMEM;

    *out = NULL;
    if (r == NULL || (r->fl = calloc(RLY_FLIGHTS, sizeof *r->fl)) == NULL)
        goto fail;
    for (int i = 0; i < RLY_FLIGHTS; i++)
        if ((r->fl[i].slots = calloc((size_t)cfg->batch_size, sizeof *r->fl[i].slots)) == NULL)
            goto fail;
    r->cfg = cfg;
    rly_stats_init(&r->stats);
    r->rand_state = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
    kfk_producer_opts_init(&o);
    o.brokers = cfg->kafka_brokers;
    o.client_id = cfg->name;
    o.linger_ms = (int)cfg->kafka_linger_ms;
    o.delivery_timeout_ms = (int)cfg->kafka_delivery_timeout_ms;
    o.on_delivery = on_delivery;
    o.on_log = on_log;
    o.ctx = r;
    err = kfk_producer_new(&o, &r->producer, errbuf);
    for (int i = 0; i < RLY_FLIGHTS && err == SVC_OK; i++)
        err = rly_store_new(cfg->db_dsn, cfg->name, (int)cfg->db_statement_timeout_ms,
                            &r->fl[i].store, errbuf);
    if (err == SVC_OK)
        err = rly_listener_new(cfg->db_dsn, cfg->name, &r->listener, errbuf);
    if (err == SVC_OK)
        err = admin_start(r, errbuf);
    if (err != SVC_OK)
        goto fail;
    *out = r;
    return SVC_OK;
fail:
    rly_relay_free(r);
    return err;
}

void rly_relay_free(rly_relay_t *r)
{
    if (r == NULL)
        return;
    admin_server_free(r->admin); /* first: its callbacks read r->stats */
    kfk_producer_free(r->producer, 0); /* before the slots its reports write */
    for (int i = 0; r->fl != NULL && i < RLY_FLIGHTS; i++) {
        PQclear(r->fl[i].rows);
        rly_store_free(r->fl[i].store);
        free(r->fl[i].slots);
    }
    free(r->fl);
    rly_listener_free(r->listener);
    free(r);
}

/* Consumes a pending stop signal; true once one arrived. */
static bool stop_signalled(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    struct signalfd_siginfo si;

    if (poll(&p, 1, timeout_ms) <= 0 || read(fd, &si, sizeof si) != (ssize_t)sizeof si)
        return false;
    svc_log_info(MOD, "%s: stopping", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
    return true;
}

static uint64_t next_random(rly_relay_t *r)
{
    /* xorshift64: jitter needs spread, not secrecy. */
    r->rand_state ^= r->rand_state << 13;
    r->rand_state ^= r->rand_state >> 7;
    r->rand_state ^= r->rand_state << 17;
    return r->rand_state;
}

/* Publishes row i of f's claim; its slot records the outcome. */
static void produce_row(rly_relay_t *r, flight_t *f, int i)
{
    PGresult *rows = f->rows;
    slot_t *slot = &f->slots[i];
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

    *slot = (slot_t){f, false, SVC_OK};
    f->pending++; /* before the call: its report may fire in the poll below */
    while (err == SVC_OK &&
           (err = kfk_produce(r->producer, &m, errbuf)) == SVC_EEXHAUSTED &&
           svc_now_ms() < give_up) {
        kfk_producer_poll(r->producer, POLL_SLICE_MS);
        err = SVC_OK;
    }
    if (err != SVC_OK) { /* refused: no report will come */
        *slot = (slot_t){f, true, err};
        f->pending--;
        if (f->reason[0] == '\0')
            svc_errbuf_set(f->reason, "%s", errbuf[0] ? errbuf : svc_strerror(err));
    }
    PQfreemem(value);
}

static void set_kafka(rly_relay_t *r, bool up, const char *what);
static void refresh_stats(rly_relay_t *r, bool force);

/* Reports are overdue once the batch has waited RELAY_KAFKA_DELIVERY_TIMEOUT_MS
 * and this much more. */
#define OVERDUE_MARGIN_MS 1000

/* Serves reports until none of f's is outstanding. On a stop signal, waits
 * at most RELAY_DRAIN_MS more: rows still unreported then stay unpublished.
 *
 * Reports can come much later than message.timeout.ms: when the broker
 * dies with requests in flight, the idempotent producer cannot tell
 * whether they were written, and holds those messages (it must not fail
 * one that may be on the log, nor reorder) until it reconnects. The batch
 * then waits, its rows locked, which is right (nothing can be published
 * meanwhile, and their reports will come), but the relay must not look
 * healthy: overdue reports count as Kafka down, and the backlog gauges go
 * on counting (on a claim's connection, a read inside its transaction). */
static void wait_reports(rly_relay_t *r, flight_t *f, int stop_fd)
{
    uint64_t overdue_at =
        f->produced_ms + (uint64_t)r->cfg->kafka_delivery_timeout_ms + OVERDUE_MARGIN_MS;

    while (f->pending > 0 && (!r->stopping || svc_now_ms() < r->drain_until_ms)) {
        /* Flush, not poll: every row of the batch is produced, so waiting
         * for linger.ms to fill a request would only delay it. A flush
         * returns once nothing at all is outstanding; while the next batch
         * is in flight too, short ones, so that this batch's commit does
         * not wait for the next one's reports. */
        kfk_producer_flush(r->producer, kfk_producer_outstanding(r->producer) > f->pending
                                            ? 1 : POLL_SLICE_MS);
        if (!r->stopping && stop_signalled(stop_fd, 0)) {
            r->stopping = true;
            r->drain_until_ms = svc_now_ms() + (uint64_t)r->cfg->drain_ms;
            svc_log_info(MOD, "waiting up to %lld ms for %d delivery reports",
                         (long long)r->cfg->drain_ms, kfk_producer_outstanding(r->producer));
        }
        if (r->stopping || svc_now_ms() < overdue_at)
            continue;
        if (!r->kafka_down) {
            char what[128];
            if (f->reason[0] == '\0')
                svc_errbuf_set(f->reason, "%d delivery reports overdue", f->pending);
            memcpy(r->reason, f->reason, sizeof r->reason);
            snprintf(what, sizeof what, "%d delivery reports overdue by %lld ms; the batch "
                     "waits for them", f->pending,
                     (long long)(svc_now_ms() - overdue_at + OVERDUE_MARGIN_MS));
            set_kafka(r, false, what);
        }
        refresh_stats(r, false);
    }
}

/* "{id,id,...}" of f's acknowledged rows; NULL when out of memory. */
static char *acked_ids(const flight_t *f, int n, int *ok)
{
    char *ids = malloc((size_t)n * 38 + 3), *p = ids;

    *ok = 0;
    if (ids == NULL)
        return NULL;
    *p++ = '{';
    for (int i = 0; i < n; i++) {
        if (!f->slots[i].done || f->slots[i].err != SVC_OK)
            continue;
        p += snprintf(p, 39, "%s%s", *ok ? "," : "", PQgetvalue(f->rows, i, RLY_COL_ID));
        (*ok)++;
    }
    snprintf(p, 2, "}");
    return ids;
}

/* Claims a batch into f (a transaction on f's connection) and produces
 * every row; f->b says how many, or the claim's error (then nothing is
 * open). */
static void start_batch(rly_relay_t *r, flight_t *f)
{
    batch_t *b = &f->b;

    memset(b, 0, sizeof *b);
    f->reason[0] = '\0';
    f->pending = 0;
    f->t_ns = svc_now_ns();
    b->db_err = rly_store_claim(f->store, (int)r->cfg->batch_size, &f->rows, f->reason);
    b->claim_ms = ms_since(&f->t_ns);
    if (b->db_err != SVC_OK)
        return;
    b->claimed = PQntuples(f->rows);
    for (int i = 0; i < b->claimed; i++)
        produce_row(r, f, i);
    b->produce_ms = ms_since(&f->t_ns);
    f->produced_ms = svc_now_ms();
}

/* Waits for f's reports, marks the acknowledged rows and commits (or
 * rolls back when none was); f is free again after. */
static void finish_batch(rly_relay_t *r, flight_t *f, int stop_fd)
{
    batch_t *b = &f->b;
    char *ids;

    wait_reports(r, f, stop_fd);
    b->reports_ms = ms_since(&f->t_ns);
    ids = acked_ids(f, b->claimed, &b->ok);
    b->failed = b->claimed - b->ok;
    if (ids == NULL || b->ok == 0)
        rly_store_rollback(f->store);
    else
        b->db_err = rly_store_mark_commit(f->store, ids, f->reason);
    if (b->db_err != SVC_OK)
        b->ok = 0; /* rolled back: published, but marked on a later claim */
    b->mark_ms = ms_since(&f->t_ns);
    if (b->claimed > 0)
        rly_stats_batch(&r->stats, b->claimed);
    atomic_fetch_add_explicit(&r->stats.published, (uint64_t)b->ok, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->stats.produce_errors, (uint64_t)b->failed,
                              memory_order_relaxed);
    free(ids);
    PQclear(f->rows);
    f->rows = NULL;
}

/* Kafka's state, from a batch or a probe: one log line per change. what
 * says how it was learnt; r->reason is why it is down. */
static void set_kafka(rly_relay_t *r, bool up, const char *what)
{
    if (!up && !r->kafka_down)
        svc_log_warn(MOD, "kafka unavailable: %s", what);
    else if (up && r->kafka_down)
        svc_log_info(MOD, "kafka available again: %s", what);
    r->kafka_down = !up;
    r->kafka_seen_ms = svc_now_ms();
    rly_stats_set(&r->stats, true, up, r->reason);
}

/* One log line per change of state, never one per row or per batch. */
static void note_state(rly_relay_t *r, const batch_t *b)
{
    if (b->db_err != SVC_OK && !r->db_down)
        svc_log_warn(MOD, "database unavailable (%s): %s; backing off", svc_err_name(b->db_err),
                     r->reason);
    else if (b->db_err == SVC_OK && r->db_down)
        svc_log_info(MOD, "database available again");
    r->db_down = b->db_err != SVC_OK;
    rly_stats_set(&r->stats, false, !r->db_down, r->reason);
    if (b->db_err != SVC_OK)
        return;
    if (b->failed > 0 && b->ok == 0) {
        char what[SVC_ERRBUF_LEN + 96];
        snprintf(what, sizeof what,
                 "%d rows not acknowledged (%s); they stay unpublished, backing off", b->failed,
                 r->reason);
        set_kafka(r, false, what);
    } else if (b->ok > 0) {
        set_kafka(r, true, "publishing the backlog");
    }
}

/* While idle: is a broker answering? Also serves librdkafka's queued log
 * lines, which nothing else polls for while no batch runs. */
static void probe_kafka(rly_relay_t *r)
{
    char what[SVC_ERRBUF_LEN + 64];

    r->reason[0] = '\0';
    if (kfk_producer_ping(r->producer, PROBE_TIMEOUT_MS, r->reason) == SVC_OK) {
        set_kafka(r, true, "a broker answers");
    } else {
        snprintf(what, sizeof what, "no broker answers while idle (%s)", r->reason);
        set_kafka(r, false, what);
    }
    kfk_producer_poll(r->producer, 0);
}

/* Refreshes the backlog gauges, at most every STATS_EVERY_MS and only with
 * an admin port, unless forced (after an empty claim: idle() reads the
 * count). A failure keeps the last values: the claim reports the
 * database's state. */
static void refresh_stats(rly_relay_t *r, bool force)
{
    int64_t rows = 0, oldest = 0;

    if (!force && (r->admin == NULL || svc_now_ms() - r->stats_at_ms < STATS_EVERY_MS))
        return;
    r->stats_at_ms = svc_now_ms();
    if (rly_store_stats(r->fl[0].store, STATS_BACKLOG_CAP, &rows, &oldest, NULL) != SVC_OK)
        return;
    atomic_store_explicit(&r->stats.backlog_rows, rows, memory_order_relaxed);
    atomic_store_explicit(&r->stats.oldest_created_ms, oldest, memory_order_relaxed);
}

static int ms_until(uint64_t at, uint64_t now)
{
    return at > now ? (int)(at - now) : 0;
}

/* Sleeps until a NOTIFY or RELAY_POLL_INTERVAL_MS, meanwhile probing Kafka
 * every PROBE_IDLE_MS and refreshing the gauges every STATS_IDLE_MS; false
 * on a stop signal. */
static bool idle(rly_relay_t *r, int stop_fd)
{
    uint64_t poll_ms = (uint64_t)r->cfg->poll_interval_ms, poll_end;

    /* Rows left after an empty claim (counted by it, see end_batch) are
     * locked by another session, another relay's batch or a relay just
     * killed whose session Postgres is ending, or wait behind such a row.
     * Their release sends no NOTIFY: look again soon. */
    if (atomic_load_explicit(&r->stats.backlog_rows, memory_order_relaxed) > 0 &&
        poll_ms > LOCKED_RETRY_MS)
        poll_ms = LOCKED_RETRY_MS;
    poll_end = svc_now_ms() + poll_ms;

    for (;;) {
        uint64_t now = svc_now_ms(), probe_at = r->kafka_seen_ms + PROBE_IDLE_MS,
                 stats_at = r->stats_at_ms + STATS_IDLE_MS;
        int ms = ms_until(poll_end, now);
        rly_wake_t w;

        if (ms_until(probe_at, now) < ms)
            ms = ms_until(probe_at, now);
        if (r->admin != NULL && ms_until(stats_at, now) < ms)
            ms = ms_until(stats_at, now);
        w = rly_listener_wait(r->listener, stop_fd, ms);
        if (w == RLY_WAKE_FD)
            return !stop_signalled(stop_fd, 0);
        if (w == RLY_WAKE_NOTIFY)
            return true;
        now = svc_now_ms();
        if (now >= poll_end)
            return true;
        if (now >= probe_at)
            probe_kafka(r);
        if (r->admin != NULL && now >= stats_at)
            refresh_stats(r, true);
    }
}

/* Sleeps the backoff for the current failure count; false on a stop. */
static bool back_off(rly_relay_t *r, int stop_fd)
{
    uint32_t ms = rs_backoff_ms(RS_JITTER_FULL, (uint32_t)r->cfg->backoff_base_ms,
                                (uint32_t)r->cfg->backoff_cap_ms, r->failures, next_random(r));

    if (r->failures < 30)
        r->failures++;
    return !stop_signalled(stop_fd, (int)ms);
}

/* Finishes f unless its claim failed, and records the outcome: the state
 * lines, the gauges, the debug line. false when the batch failed (the
 * caller backs off). */
static bool end_batch(rly_relay_t *r, flight_t *f, int stop_fd)
{
    const batch_t *b = &f->b;

    if (b->db_err == SVC_OK)
        finish_batch(r, f, stop_fd);
    memcpy(r->reason, f->reason, sizeof r->reason);
    note_state(r, b);
    refresh_stats(r, b->claimed == 0);
    if (b->db_err != SVC_OK || b->failed > 0)
        return false;
    svc_log_debug(MOD, "batch: %d rows published (claim %.1f ms, produce %.1f ms, reports "
                  "%.1f ms, mark and commit %.1f ms)", b->ok, b->claim_ms, b->produce_ms,
                  b->reports_ms, b->mark_ms);
    return true;
}

/* Two batches overlap: batch N+1 is claimed and produced before batch N's
 * reports are awaited, so a row committed while N is in flight goes out
 * without waiting for N's acknowledgement and commit (unless N is full, see
 * below). Per-key order holds as with two relays: N+1 cannot hold a row of
 * an aggregate that has one in N (the claim skips an aggregate with an
 * older unpublished row, and N's rows stay unpublished until N's commit),
 * and a key's next event is claimed only after the commit that follows its
 * predecessor's acknowledgement. */
int rly_relay_run(rly_relay_t *r, int stop_fd)
{
    bool more = true;      /* a backlog may be waiting from before we started */
    flight_t *older = NULL; /* produced, its reports not yet awaited */

    svc_log_info(MOD, "relaying the outbox to %s (batch %lld, poll every %lld ms, admin %s)",
                 r->cfg->kafka_brokers, (long long)r->cfg->batch_size,
                 (long long)r->cfg->poll_interval_ms, r->admin ? r->cfg->admin_listen : "off");
    while (!r->stopping) {
        flight_t *f = older == &r->fl[0] ? &r->fl[1] : &r->fl[0];
        bool ok = true, got = false, committed = older != NULL;

        if (!more && older == NULL && !idle(r, stop_fd))
            break;
        /* A full batch says a backlog waits. The next claim would then
         * first step over the full batch's locked rows, which costs the
         * database more than the overlap saves when the database is what
         * limits the drain (measured: docs/benchmarks.md): finish it
         * first. Below a full batch, overlap. */
        if (older != NULL && older->b.claimed >= (int)r->cfg->batch_size) {
            ok = end_batch(r, older, stop_fd);
            older = NULL;
        }
        if (ok && !r->stopping) {
            start_batch(r, f);
            got = f->b.db_err == SVC_OK && f->b.claimed > 0;
            if (!got) /* nothing produced: end it now (an empty claim rolls back) */
                ok = end_batch(r, f, stop_fd);
            if (older != NULL)
                ok = end_batch(r, older, stop_fd) && ok;
            older = got ? f : NULL;
        }
        if (r->stopping)
            break;
        if (!ok) {
            /* The batch in flight first, whatever becomes of it: a backoff
             * must not hold its rows or its reports. */
            if (older != NULL)
                (void)end_batch(r, older, stop_fd);
            older = NULL;
            more = true;
            if (r->stopping || !back_off(r, stop_fd))
                break;
            continue;
        }
        r->failures = 0;
        /* Rows may remain even after a short batch: one event per order is
         * taken per batch. Only an empty claim made after the last commit
         * means the backlog is gone: one made while a batch was in flight
         * could not take the successors of that batch's rows. */
        more = got || committed;
    }
    if (older != NULL) /* stopping: within RELAY_DRAIN_MS */
        (void)end_batch(r, older, stop_fd);
    svc_log_info(MOD, "stopped: published=%llu produce_errors=%llu",
                 (unsigned long long)atomic_load(&r->stats.published),
                 (unsigned long long)atomic_load(&r->stats.produce_errors));
    return 0;
}
