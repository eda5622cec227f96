/* SPDX-License-Identifier: Apache-2.0 */
/* stats.c - the relay's /metrics page and /readyz body (see stats.h). */
#include <string.h>
#include <time.h>

#include "stats.h"

#define P         "shopmicro_relay_"
#define LOAD(x)   atomic_load_explicit(&(x), memory_order_relaxed)
#define ADD(x, n) atomic_fetch_add_explicit(&(x), (n), memory_order_relaxed)

static const int bounds[RLY_STATS_BUCKETS] = {1, 5, 10, 50, 100, 500, 1000, 5000};

void rly_stats_init(rly_stats_t *s)
{
    memset(s, 0, sizeof *s);
    atomic_init(&s->backlog_rows, -1);
    /* Up until a batch says otherwise: nothing has failed yet. */
    atomic_init(&s->kafka_up, true);
    atomic_init(&s->db_up, true);
    atomic_flag_clear(&s->lock);
}

void rly_stats_batch(rly_stats_t *s, int n)
{
    unsigned i = 0;

    while (i < RLY_STATS_BUCKETS && n > bounds[i])
        i++;
    ADD(s->batch_hist[i], 1);
    ADD(s->batches, 1);
    ADD(s->batch_rows, (uint64_t)n);
}

/* The details are short strings: a spin lock held for one copy, or while
 * /readyz writes them (a few hundred bytes), never across a wait. */
static void lock(rly_stats_t *s)
{
    while (atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire))
        ;
}

void rly_stats_set(rly_stats_t *s, bool kafka, bool up, const char *detail)
{
    lock(s);
    snprintf(kafka ? s->kafka_detail : s->db_detail, SVC_ERRBUF_LEN, "%s", up ? "" : detail);
    atomic_store_explicit(kafka ? &s->kafka_up : &s->db_up, up, memory_order_relaxed);
    atomic_flag_clear_explicit(&s->lock, memory_order_release);
}

static void family(admin_buf_t *o, const char *name, const char *type, const char *help)
{
    admin_buf_printf(o, "# HELP " P "%s %s\n# TYPE " P "%s %s\n", name, help, name, type);
}

static void put_histogram(rly_stats_t *s, admin_buf_t *o)
{
    uint64_t cum = 0;

    family(o, "batch_size", "histogram", "Rows read per non-empty batch.");
    for (unsigned i = 0; i <= RLY_STATS_BUCKETS; i++) {
        cum += LOAD(s->batch_hist[i]);
        if (i < RLY_STATS_BUCKETS)
            admin_buf_printf(o, P "batch_size_bucket{le=\"%d\"} %llu\n", bounds[i],
                             (unsigned long long)cum);
        else
            admin_buf_printf(o, P "batch_size_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
    admin_buf_printf(o, P "batch_size_sum %llu\n" P "batch_size_count %llu\n",
                     (unsigned long long)LOAD(s->batch_rows), (unsigned long long)cum);
}

static double oldest_age_s(rly_stats_t *s)
{
    int64_t created = LOAD(s->oldest_created_ms);
    struct timespec ts;
    int64_t now;

    if (created <= 0)
        return 0;
    clock_gettime(CLOCK_REALTIME, &ts);
    now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return now > created ? (double)(now - created) / 1000.0 : 0;
}

void rly_stats_metrics(void *ctx, admin_buf_t *o)
{
    rly_stats_t *s = ctx;

    family(o, "published_total", "counter", "Outbox rows published and passed by the cursor.");
    admin_buf_printf(o, P "published_total %llu\n", (unsigned long long)LOAD(s->published));
    family(o, "produce_errors_total", "counter", "Rows whose produce or delivery failed.");
    admin_buf_printf(o, P "produce_errors_total %llu\n",
                     (unsigned long long)LOAD(s->produce_errors));
    family(o, "dead_letters_total", "counter",
           "Outbox rows Kafka refused for good, copied to outbox_dead_letters and passed.");
    admin_buf_printf(o, P "dead_letters_total %llu\n", (unsigned long long)LOAD(s->dead_letters));
    family(o, "pruned_total", "counter",
           "Published outbox rows deleted as older than RELAY_RETENTION_S.");
    admin_buf_printf(o, P "pruned_total %llu\n", (unsigned long long)LOAD(s->pruned));
    family(o, "batches_total", "counter", "Non-empty batches read.");
    admin_buf_printf(o, P "batches_total %llu\n", (unsigned long long)LOAD(s->batches));
    put_histogram(s, o);
    family(o, "backlog_rows", "gauge",
           "Unpublished outbox rows (counted up to a cap, refreshed by the relay; -1 unknown).");
    admin_buf_printf(o, P "backlog_rows %lld\n", (long long)LOAD(s->backlog_rows));
    family(o, "oldest_unpublished_age_seconds", "gauge",
           "Age of the oldest unpublished row (0 when none).");
    admin_buf_printf(o, P "oldest_unpublished_age_seconds %.3f\n", oldest_age_s(s));
    family(o, "rows_in_flight", "gauge",
           "Rows of the batch running: read, not yet passed by a cursor (0 between batches).");
    admin_buf_printf(o, P "rows_in_flight %d\n", LOAD(s->rows_in_flight));
    family(o, "shards_owned", "gauge", "Outbox shards this relay holds the lease of.");
    admin_buf_printf(o, P "shards_owned %d\n", LOAD(s->shards_owned));
    family(o, "shards", "gauge", "Outbox shards of the database (rows of outbox_cursor).");
    admin_buf_printf(o, P "shards %d\n", LOAD(s->shards_total));
    family(o, "relays", "gauge", "Relays of this database sharing the shards (0 unknown).");
    admin_buf_printf(o, P "relays %d\n", LOAD(s->relays));
    family(o, "kafka_up", "gauge", "1 unless the last batch failed on Kafka.");
    admin_buf_printf(o, P "kafka_up %d\n", LOAD(s->kafka_up) ? 1 : 0);
    family(o, "db_up", "gauge", "1 unless the last database statement failed.");
    admin_buf_printf(o, P "db_up %d\n", LOAD(s->db_up) ? 1 : 0);
}

static void put_check(rly_stats_t *s, admin_buf_t *o, const char *name, bool up, const char *detail)
{
    admin_buf_printf(o, "{\"name\":\"%s\",\"ok\":%s,\"detail\":", name, up ? "true" : "false");
    admin_buf_json_str(o, detail);
    admin_buf_printf(o, "}");
}

bool rly_stats_ready(void *ctx, admin_buf_t *o)
{
    rly_stats_t *s = ctx;
    bool kafka, db;

    lock(s);
    kafka = LOAD(s->kafka_up);
    db = LOAD(s->db_up);
    admin_buf_printf(o, "{\"status\":\"%s\",\"checks\":[", kafka && db ? "ok" : "unavailable");
    put_check(s, o, "kafka", kafka, s->kafka_detail);
    admin_buf_printf(o, ",");
    put_check(s, o, "database", db, s->db_detail);
    atomic_flag_clear_explicit(&s->lock, memory_order_release);
    admin_buf_printf(o, "]}\n");
    return kafka && db;
}
