/* SPDX-License-Identifier: Apache-2.0 */
/*
 * relay.c - read, publish, confirm, advance (see relay.h).
 *
 * The outbox is append-only; a shard's cursor says how far it is published
 * (services/relay/schema/0007). A batch reads each leased shard's rows after
 * its cursor, publishes them in that order, waits for every delivery report
 * and only then moves each cursor over the rows the broker acknowledged,
 * up to the first that failed. So a crash anywhere loses nothing: the rows
 * after a cursor are read again, at worst published twice with the same
 * ce_id, which is what consumers dedupe on.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "kafka/kafka.h"
#include "lease.h"
#include "listen.h"
#include "relay.h"
#include "rs/resilience.h"
#include "stats.h"
#include "store.h"

#define MOD "relay"
/* The backlog gauges are counted by the relay, never by a scrape: at most
 * this often while busy, and this often while idle. The count's cap keeps
 * each count cheap: it reads the rows it counts (an index range per shard),
 * and during a drain a count of 100,000 held up the loop once a second
 * (docs/bench/history.md, "Reading ahead"). */
#define STATS_EVERY_MS    1000
#define STATS_IDLE_MS     5000
#define STATS_BACKLOG_CAP 10000
/* How often the leases are checked (lease.h): a dead relay's shards are
 * taken over, and a new relay gets its share, within about this long. */
#define LEASE_TICK_MS 1000
/* Rows committed above the horizon (an older transaction still running,
 * maybe in another database, whose end sends no NOTIFY here) are looked for
 * again after this long, doubling up to HELD_MAX_MS while they wait. */
#define HELD_FIRST_MS 4
#define HELD_MAX_MS   64
/* An idle relay learns of Kafka's state from a metadata request
 * (kfk_producer_ping) once it has been idle this long since the last batch
 * or probe. The request blocks the loop a few ms while a broker is up, at
 * most PROBE_TIMEOUT_MS while none answers; a NOTIFY arriving meanwhile
 * waits that long, but only while nothing could be published anyway. */
#define PROBE_IDLE_MS    2000
#define PROBE_TIMEOUT_MS 500
/* Retention deletes at most this many rows per shard a statement: a few
 * ms of the loop. A full chunk means more may wait: the next comes at the
 * next lease tick instead of RELAY_PRUNE_INTERVAL_MS later. */
#define PRUNE_CHUNK 1000

struct rly_relay {
    const rly_config_t *cfg;
    kfk_producer_t *producer;
    rly_store_t *store; /* reads, advances, and holds the leases */
    rly_lease_t *lease;
    rly_batch_t *batch;
    rly_listener_t *listener;
    char reason[SVC_ERRBUF_LEN]; /* why Kafka or the database is down */
    bool stopping, kafka_down, db_down;
    unsigned failures; /* consecutive failed batches: the backoff exponent */
    int held_ms;       /* 0, or the wait before looking at held rows again */
    uint64_t rand_state, stats_at_ms, lease_at_ms, prune_at_ms;
    uint64_t kafka_seen_ms; /* the last batch or probe: Kafka's state is that recent */
    rly_stats_t stats;      /* shared with the admin thread: atomics */
    admin_server_t *admin;  /* NULL when RELAY_ADMIN_LISTEN is 0 or empty */
};

/* librdkafka's own lines (connection refused per attempt, the harmless
 * GETPID retry after a broker start) are detail: state changes are ours. */
static void on_log(void *ctx, int level, const char *facility, const char *text)
{
    svc_log_debug("relay.kafka", "%s: %s", facility, text);
}

/* The admin port, unless disabled. Bound before the loop starts, so a port
 * in use is a start-up error (exit 2), not a silent lack of metrics. */
static svc_err_t admin_start(rly_relay_t *r, char errbuf[static SVC_ERRBUF_LEN])
{
    if (r->cfg->admin_listen[0] == '\0' || strcmp(r->cfg->admin_listen, "0") == 0)
        return SVC_OK;
    return admin_server_start(r->cfg->admin_listen, rly_stats_metrics, rly_stats_ready, &r->stats,
                              &r->admin, errbuf);
}

svc_err_t rly_relay_new(const rly_config_t *cfg, rly_relay_t **out,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    rly_relay_t *r = calloc(1, sizeof *r);
    kfk_producer_opts_t o;
    svc_err_t err = SVC_ENOMEM;

    *out = NULL;
    if (r == NULL)
        goto fail;
    r->cfg = cfg;
    rly_stats_init(&r->stats);
    r->rand_state = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
    kfk_producer_opts_init(&o);
    o.brokers = cfg->kafka_brokers;
    o.client_id = cfg->name;
    o.linger_ms = (int)cfg->kafka_linger_ms;
    o.delivery_timeout_ms = (int)cfg->kafka_delivery_timeout_ms;
    o.on_delivery = rly_batch_on_delivery;
    o.on_log = on_log;
    o.ctx = r;
    err = kfk_producer_new(&o, &r->producer, errbuf);
    if (err == SVC_OK)
        err = rly_store_new(cfg->db_dsn, cfg->name, (int)cfg->db_statement_timeout_ms, &r->store,
                            errbuf);
    if (err == SVC_OK)
        err = rly_lease_new(r->store, &r->lease);
    if (err == SVC_OK)
        err = rly_batch_new(r->producer, (int)cfg->batch_size, &r->batch);
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
    admin_server_free(r->admin);       /* first: its callbacks read r->stats */
    kfk_producer_free(r->producer, 0); /* before the batch its reports write */
    rly_batch_free(r->batch);
    rly_lease_free(r->lease);
    rly_store_free(r->store);
    rly_listener_free(r->listener);
    free(r);
}

static uint64_t next_random(rly_relay_t *r)
{
    /* xorshift64: jitter needs spread, not secrecy. */
    r->rand_state ^= r->rand_state << 13;
    r->rand_state ^= r->rand_state >> 7;
    r->rand_state ^= r->rand_state << 17;
    return r->rand_state;
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

/* The database's state, from any statement: one log line per change. */
static void set_db(rly_relay_t *r, svc_err_t err, const char *why)
{
    if (err != SVC_OK && !r->db_down) {
        svc_errbuf_set(r->reason, "%s", why);
        svc_log_warn(MOD, "database unavailable (%s): %s; backing off", svc_err_name(err), why);
    } else if (err == SVC_OK && r->db_down) {
        svc_log_info(MOD, "database available again");
    }
    r->db_down = err != SVC_OK;
    rly_stats_set(&r->stats, false, !r->db_down, why);
}

/* One log line per change of Kafka's state, never one per row or batch. */
static void note_kafka(rly_relay_t *r, const rly_batch_result_t *res)
{
    if (res->failed > 0 && res->published == 0) {
        char what[SVC_ERRBUF_LEN + 96];
        svc_errbuf_set(r->reason, "%s", res->reason);
        snprintf(what, sizeof what,
                 "%d rows not acknowledged (%s); they stay unpublished, backing off", res->failed,
                 res->reason);
        set_kafka(r, false, what);
    } else if (res->published > 0) {
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
 * an admin port, unless forced. A failure keeps the last values: the
 * batches report the database's state. */
static void refresh_stats(rly_relay_t *r, bool force)
{
    int64_t rows = 0, oldest = 0;

    if (!force && (r->admin == NULL || svc_now_ms() - r->stats_at_ms < STATS_EVERY_MS))
        return;
    r->stats_at_ms = svc_now_ms();
    if (rly_store_stats(r->store, STATS_BACKLOG_CAP, &rows, &oldest, SVC_ERRBUF_SCRATCH) != SVC_OK)
        return;
    atomic_store_explicit(&r->stats.backlog_rows, rows, memory_order_relaxed);
    atomic_store_explicit(&r->stats.oldest_created_ms, oldest, memory_order_relaxed);
}

/* The leases, every LEASE_TICK_MS: shards taken over
 * or given up, and the owned shards' cursors read again from the table, the
 * truth once nothing is in flight (another relay may have moved one while
 * it held the shard). */
static svc_err_t tick_leases(rly_relay_t *r, bool *changed)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    svc_err_t err;

    *changed = false;
    if (svc_now_ms() - r->lease_at_ms < LEASE_TICK_MS)
        return SVC_OK;
    r->lease_at_ms = svc_now_ms();
    err = rly_lease_tick(r->lease, next_random(r), changed, errbuf);
    if (err == SVC_OK)
        err = rly_batch_load_cursors(r->batch, r->store, r->lease, errbuf);
    atomic_store_explicit(&r->stats.shards_owned, rly_lease_owned(r->lease), memory_order_relaxed);
    atomic_store_explicit(&r->stats.shards_total, rly_lease_total(r->lease), memory_order_relaxed);
    atomic_store_explicit(&r->stats.relays, rly_lease_relays(r->lease), memory_order_relaxed);
    set_db(r, err, errbuf);
    return err;
}

/* Retention (RELAY_RETENTION_S), with nothing in flight and at most every
 * RELAY_PRUNE_INTERVAL_MS: the owned shards' rows that their cursors have
 * passed and that are older than that are deleted. A failure is the
 * database's state like any statement's; the next interval tries again. */
static void prune(rly_relay_t *r)
{
    char shards[256], errbuf[SVC_ERRBUF_LEN] = "";
    int n = rly_lease_owned(r->lease), deleted = 0;
    size_t len = 1;
    svc_err_t err;

    if (r->cfg->prune_interval_ms == 0 || n == 0 || svc_now_ms() < r->prune_at_ms)
        return;
    shards[0] = '{';
    for (int i = 0; i < n && len + 8 < sizeof shards; i++)
        len += (size_t)snprintf(shards + len, sizeof shards - len, "%s%d", i > 0 ? "," : "",
                                rly_lease_shard(r->lease, i));
    snprintf(shards + len, sizeof shards - len, "}");
    err = rly_store_prune(r->store, shards, r->cfg->retention_s, PRUNE_CHUNK, &deleted, errbuf);
    set_db(r, err, errbuf);
    r->prune_at_ms = svc_now_ms() + (uint64_t)(err == SVC_OK && deleted >= PRUNE_CHUNK
                                                   ? LEASE_TICK_MS
                                                   : r->cfg->prune_interval_ms);
    if (deleted == 0)
        return;
    atomic_fetch_add_explicit(&r->stats.pruned, (uint64_t)deleted, memory_order_relaxed);
    svc_log_info(MOD, "retention: deleted %d published rows older than %lld s (shards %s)", deleted,
                 (long long)r->cfg->retention_s, shards);
}

static int ms_until(uint64_t at, uint64_t now)
{
    return at > now ? (int)(at - now) : 0;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

typedef enum { WOKE_STOP, WOKE_READ, WOKE_TICK } woke_t;

/* Sleeps until a NOTIFY or the slow poll (or the next look at held rows):
 * WOKE_READ; or the lease tick: WOKE_TICK; meanwhile probes Kafka every
 * PROBE_IDLE_MS and refreshes the gauges every STATS_IDLE_MS. */
static woke_t idle(rly_relay_t *r, int stop_fd)
{
    uint64_t poll_end =
        svc_now_ms() + (uint64_t)(r->held_ms > 0 ? r->held_ms : r->cfg->poll_interval_ms);

    for (;;) {
        uint64_t now = svc_now_ms(), probe_at = r->kafka_seen_ms + PROBE_IDLE_MS,
                 stats_at = r->stats_at_ms + STATS_IDLE_MS,
                 lease_at = r->lease_at_ms + LEASE_TICK_MS;
        uint64_t next = min_u64(min_u64(poll_end, probe_at), lease_at);
        rly_wake_t w;

        if (r->admin != NULL)
            next = min_u64(next, stats_at);
        w = rly_listener_wait(r->listener, stop_fd, ms_until(next, now));
        if (w == RLY_WAKE_FD && svc_stop_requested(stop_fd, 0, MOD))
            return WOKE_STOP;
        now = svc_now_ms();
        if (w == RLY_WAKE_NOTIFY || now >= poll_end)
            return WOKE_READ;
        if (now >= lease_at)
            return WOKE_TICK;
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
    return !svc_stop_requested(stop_fd, (int)ms, MOD);
}

/* Reports overdue: Kafka is down with messages in flight, and the batch
 * waits for them; meanwhile readiness says so and the gauges go on. */
static void on_overdue(void *ctx, int pending, const char *reason)
{
    rly_relay_t *r = ctx;

    if (!r->kafka_down) {
        char what[128];
        if (reason[0] != '\0')
            svc_errbuf_set(r->reason, "%s", reason);
        else
            svc_errbuf_set(r->reason, "%d delivery reports overdue", pending);
        snprintf(what, sizeof what, "%d delivery reports overdue; the batch waits for them",
                 pending);
        set_kafka(r, false, what);
    }
    refresh_stats(r, false);
}

static rly_batch_opts_t batch_opts(rly_relay_t *r, int stop_fd)
{
    return (rly_batch_opts_t){
        .stop_fd = stop_fd,
        .drain_ms = r->cfg->drain_ms,
        .overdue_ms = r->cfg->kafka_delivery_timeout_ms,
        .stopping = &r->stopping,
        .in_flight = &r->stats.rows_in_flight,
        .on_overdue = on_overdue,
        .ctx = r,
    };
}

/* Reads the next batch (rly_batch_start); false when the read failed.
 * *more when a shard filled its share: more may wait. */
static bool start_batch(rly_relay_t *r, int stop_fd, bool *more, int *read)
{
    rly_batch_opts_t o = batch_opts(r, stop_fd);
    rly_batch_result_t res;

    rly_batch_start(r->batch, r->store, &o, &res);
    *more = res.more;
    *read = res.read;
    r->held_ms = !res.held                  ? 0
                 : r->held_ms == 0          ? HELD_FIRST_MS
                 : r->held_ms < HELD_MAX_MS ? r->held_ms * 2
                                            : HELD_MAX_MS;
    set_db(r, res.db_err, res.reason);
    if (res.read > 0)
        rly_stats_batch(&r->stats, res.read);
    else if (res.db_err == SVC_OK)
        refresh_stats(r, false); /* caught up: the gauges say so within a second */
    return res.db_err == SVC_OK;
}

/* Finishes the oldest batch in flight; false when it failed (the caller
 * backs off). */
static bool finish_batch(rly_relay_t *r, int stop_fd)
{
    rly_batch_opts_t o = batch_opts(r, stop_fd);
    rly_batch_result_t res;

    rly_batch_finish(r->batch, r->store, &o, &res);
    set_db(r, res.db_err, res.reason);
    atomic_fetch_add_explicit(&r->stats.published, (uint64_t)res.published, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->stats.produce_errors, (uint64_t)res.failed, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->stats.dead_letters, (uint64_t)res.dead, memory_order_relaxed);
    if (res.db_err != SVC_OK)
        return false;
    note_kafka(r, &res);
    refresh_stats(r, false);
    if (res.failed > 0)
        return false;
    svc_log_debug(MOD,
                  "batch: %d rows read, %d published (read %.1f ms, produce %.1f ms, "
                  "reports %.1f ms, advance %.1f ms)",
                  res.read, res.published, res.read_ms, res.produce_ms, res.reports_ms,
                  res.advance_ms);
    return true;
}

/* With nothing in flight: sleeps unless rows may wait, then the leases.
 * false when there is nothing to read now (a standby, a tick that changed
 * nothing) or the tick failed (*ok false); true to read. */
static bool before_read(rly_relay_t *r, int stop_fd, bool more, bool *ok)
{
    woke_t w = more ? WOKE_READ : idle(r, stop_fd);
    bool changed;

    *ok = true;
    if (w == WOKE_STOP) {
        r->stopping = true;
        return false;
    }
    *ok = tick_leases(r, &changed) == SVC_OK;
    if (*ok)
        prune(r);
    return *ok && rly_lease_owned(r->lease) > 0 && (w != WOKE_TICK || changed);
}

/* Two batches overlap (batch.h): while one is in flight, the next is read
 * and produced (during a backlog, or when a NOTIFY came meanwhile), then
 * the first finished. Only an empty read with nothing left in flight sends
 * the relay to sleep. */
int rly_relay_run(rly_relay_t *r, int stop_fd)
{
    bool more = true; /* a backlog may be waiting from before we started */

    svc_log_info(MOD, "relaying the outbox to %s (batch %lld, poll every %lld ms, admin %s)",
                 r->cfg->kafka_brokers, (long long)r->cfg->batch_size,
                 (long long)r->cfg->poll_interval_ms, r->admin ? r->cfg->admin_listen : "off");
    while (!r->stopping) {
        bool ok = true, read_now = true;
        int read = 0;

        if (rly_batch_flying(r->batch) == 0) {
            read_now = before_read(r, stop_fd, more, &ok);
            more = more && read_now;
        } else if (svc_now_ms() - r->lease_at_ms >= LEASE_TICK_MS) {
            read_now = false; /* a long drain lands, at each tick, for the leases */
        } else if (!more) {
            /* Not a backlog: read beside the flight only if a writer has
             * committed since (a NOTIFY waits); an empty read costs the
             * database as much as a full one. */
            read_now = rly_listener_wait(r->listener, -1, 0) == RLY_WAKE_NOTIFY;
        }
        if (r->stopping)
            break;
        if (ok && read_now)
            ok = start_batch(r, stop_fd, &more, &read);
        if (ok && rly_batch_flying(r->batch) > 0 &&
            (rly_batch_flying(r->batch) == rly_batch_capacity(r->batch) || read == 0))
            ok = finish_batch(r, stop_fd);
        if (ok) {
            r->failures = 0;
            continue;
        }
        /* The batches in flight first, whatever becomes of them: a backoff
         * must not hold their reports. */
        while (rly_batch_flying(r->batch) > 0)
            (void)finish_batch(r, stop_fd);
        more = true;
        r->lease_at_ms = 0; /* after a failure, leases and cursors again first */
        if (r->stopping || !back_off(r, stop_fd))
            break;
    }
    while (rly_batch_flying(r->batch) > 0) /* stopping: within RELAY_DRAIN_MS */
        (void)finish_batch(r, stop_fd);
    svc_log_info(MOD, "stopped: published=%llu produce_errors=%llu",
                 (unsigned long long)atomic_load(&r->stats.published),
                 (unsigned long long)atomic_load(&r->stats.produce_errors));
    return 0;
}
