/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_relay.c - the two halves of bench/run_relay_bench.sh that need C:
 *
 *   bench_relay fill --dsn DSN --rows N --kcat-file PATH [--topic T]
 *     writes N unpublished outbox rows as the order service writes them
 *     (a random order id, OrderCreated encoded by services/order/events.c,
 *     the CloudEvents columns, a jsonb payload of the same order) with COPY,
 *     to be published to topic T (default shopmicro.orders.v1),
 *     and the same keys and values to PATH for `kcat -P -K KEY_DELIM -D
 *     MSG_DELIM -l PATH` (the delimiters below, checked absent from every
 *     key and value).
 *
 *   bench_relay latency --order HOST:PORT --brokers B --product ID
 *                       [--product ID] [--rate R] [--seconds S] [--warmup S]
 *                       [--threads T] [--topic T]
 *     CreateOrder at a constant R calls/s (open loop: call i is sent at
 *     t0 + i/R whatever the earlier calls do, from T threads) while a
 *     consumer, assigned to every partition at its end before the first
 *     call, reads the topic. For each order: the time from CreateOrder's
 *     reply to the consumer reading the record keyed by its id. Prints
 *     p50/p90/p99/max of that and of the calls, and a RESULT line.
 */
#include <getopt.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <grpc/grpc.h>

#include "events.h"
#include "principal/principal.h"
#include "rpc/rpc.h"
#include "shopmicro/order/v1/order.pb-c.h"
#include "bench_pct.h"
#include "bench_util.h"

#define KEY_DELIM        "~~relay-bench-key~~"
#define MSG_DELIM        "~~relay-bench-end~~\n"
#define METHOD           "/shopmicro.order.v1.OrderService/CreateOrder"
#define CALL_DEADLINE_MS 5000
#define MAX_THREADS      256

#define die(...) bench_die("bench_relay", __VA_ARGS__)

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return *s = x;
}

static void uuid4(uint64_t *rng, char out[37])
{
    uint64_t a = xorshift(rng), b = xorshift(rng);

    a = (a & ~0xf000ull) | 0x4000ull;       /* version 4 */
    b = (b & ~(3ull << 62)) | (2ull << 62); /* variant 10 */
    snprintf(out, 37, "%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32),
             (unsigned)((a >> 16) & 0xffff), (unsigned)(a & 0xffff), (unsigned)(b >> 48),
             (unsigned long long)(b & 0xffffffffffffull));
}

static void rfc3339_now(char out[64])
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ts.tv_nsec / 1000));
}

/* ------------------------------------------------------------------------
 * fill
 * ------------------------------------------------------------------------ */
typedef struct buf {
    char *p;
    size_t len, cap;
} buf_t;

static void buf_put(buf_t *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1 << 20;
        while (cap < b->len + n)
            cap *= 2;
        if ((b->p = realloc(b->p, cap)) == NULL)
            die("out of memory");
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(buf_t *b, const char *fmt, ...)
{
    char tmp[2048];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        die("row too long");
    buf_put(b, tmp, (size_t)n);
}

static void copy_flush(PGconn *pg, buf_t *b)
{
    if (b->len > 0 && PQputCopyData(pg, b->p, (int)b->len) != 1)
        die("COPY: %s", PQerrorMessage(pg));
    b->len = 0;
}

static bool contains(const uint8_t *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle);

    for (size_t i = 0; i + k <= n; i++)
        if (hay[i] == (uint8_t)needle[0] && memcmp(hay + i, needle, k) == 0)
            return true;
    return false;
}

static int cmd_fill(const char *dsn, long rows, const char *kcat_path, const char *topic)
{
    static const char hex[] = "0123456789abcdef";
    char product_a[37], product_b[37], order_id[37], event_id[37], request_id[37], now[64];
    uint64_t rng = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20) ^ 0x9e3779b97f4a7c15ull;
    PGconn *pg = PQconnectdb(dsn);
    FILE *kcat = fopen(kcat_path, "w");
    buf_t copy = {0}, pb_hex = {0};
    uint64_t t0 = svc_now_ns();
    PGresult *r;
    size_t bytes = 0;

    if (PQstatus(pg) != CONNECTION_OK)
        die("%s: %s", dsn, PQerrorMessage(pg));
    if (kcat == NULL)
        die("cannot write %s", kcat_path);
    uuid4(&rng, product_a);
    uuid4(&rng, product_b);
    r = PQexec(pg, "COPY outbox (id, aggregate_type, aggregate_id, event_type, payload, "
                   "created_at, topic, ce_type, ce_source, payload_pb, request_id) FROM STDIN");
    if (PQresultStatus(r) != PGRES_COPY_IN)
        die("COPY: %s", PQerrorMessage(pg));
    PQclear(r);
    for (long i = 0; i < rows; i++) {
        ord_line_t lines[2] = {{product_a, 2, 1299}, {product_b, 1, 250}};
        char customer[32];
        ord_new_order_t o = {
            .customer_id = customer, .lines = lines, .n_lines = 2, .total_cents = 2 * 1299 + 250};
        uint8_t *pb;
        size_t len = 0;

        snprintf(customer, sizeof customer, "cust-%ld", i % 1000);
        uuid4(&rng, order_id);
        uuid4(&rng, event_id);
        uuid4(&rng, request_id);
        rfc3339_now(now);
        pb = ord_event_created_pack(&o, order_id, now, &len);
        if (pb == NULL)
            die("out of memory");
        if (contains(pb, len, KEY_DELIM) || contains(pb, len, MSG_DELIM))
            die("a payload holds a kcat delimiter");
        pb_hex.len = 0;
        for (size_t k = 0; k < len; k++)
            buf_put(&pb_hex, (char[]){hex[pb[k] >> 4], hex[pb[k] & 15]}, 2);
        buf_printf(&copy, "%s\torder\t%s\tOrderCreated\t", event_id, order_id);
        buf_printf(&copy,
                   "{\"items\": [{\"quantity\": 2, \"product_id\": \"%s\", \"unit_price_cents\": "
                   "1299}, {\"quantity\": 1, \"product_id\": \"%s\", \"unit_price_cents\": 250}], "
                   "\"order_id\": \"%s\", \"created_at\": \"%s\", \"customer_id\": \"%s\", "
                   "\"total_cents\": %lld}\t%s\t%s\t" ORD_EVENT_CREATED_TYPE
                   "\t" ORD_EVENT_CE_SOURCE "\t\\\\x",
                   product_a, product_b, order_id, now, customer, (long long)o.total_cents, now,
                   topic);
        buf_put(&copy, pb_hex.p, pb_hex.len);
        buf_printf(&copy, "\t%s\n", request_id);
        if (fprintf(kcat, "%s" KEY_DELIM, order_id) < 0 || fwrite(pb, 1, len, kcat) != len ||
            fputs(MSG_DELIM, kcat) < 0)
            die("cannot write %s", kcat_path);
        bytes += len;
        free(pb);
        if (copy.len > (1 << 20))
            copy_flush(pg, &copy);
        if ((i + 1) % 25000 == 0) {
            printf("[fill] %ld of %ld rows\n", i + 1, rows);
            fflush(stdout);
        }
    }
    copy_flush(pg, &copy);
    if (PQputCopyEnd(pg, NULL) != 1)
        die("COPY end: %s", PQerrorMessage(pg));
    r = PQgetResult(pg);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        die("COPY: %s", PQerrorMessage(pg));
    PQclear(r);
    if (fclose(kcat) != 0)
        die("cannot write %s", kcat_path);
    printf("[fill] %ld rows in %.1f s (COPY); payloads %.0f bytes on average (OrderCreated, "
           "2 items, services/order/events.c)\n",
           rows, (double)(svc_now_ns() - t0) / 1e9, rows ? (double)bytes / (double)rows : 0.0);
    free(copy.p);
    free(pb_hex.p);
    PQfinish(pg);
    return 0;
}

/* ------------------------------------------------------------------------
 * latency
 * ------------------------------------------------------------------------ */
typedef struct entry {
    char id[37];
    bool used, measured;
    uint64_t reply_ns, seen_ns; /* 0: not yet */
} entry_t;

typedef struct lat_opts {
    const char *order, *brokers, *topic, *products[2];
    const char *ce_type; /* only records of this ce_type count (NULL: every record) */
    int n_products, threads;
    double rate, seconds, warmup;
} lat_opts_t;

static struct {
    lat_opts_t o;
    grpc_channel *ch;
    entry_t *table;
    size_t mask;
    pthread_mutex_t mu;
    uint64_t t0_ns, n_calls;
    atomic_uint_fast64_t next_call, errors, seen, unmatched;
    atomic_bool stop_consumer;
    uint64_t *call_ns; /* per call: reply - scheduled send, 0 when failed */
    char last_error[SVC_ERRBUF_LEN + 64];
} g;

static uint64_t hash_id(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The entry of id (inserted when absent), under g.mu. */
static entry_t *entry_of(const char *id)
{
    for (size_t i = hash_id(id) & g.mask;; i = (i + 1) & g.mask) {
        entry_t *e = &g.table[i];
        if (!e->used) {
            e->used = true;
            snprintf(e->id, sizeof e->id, "%s", id);
            return e;
        }
        if (strcmp(e->id, id) == 0)
            return e;
    }
}

static void *sender_main(void *arg)
{
    const uint64_t period_ns = (uint64_t)(1e9 / g.o.rate);
    Shopmicro__Order__V1__OrderItem it[2], *ptrs[2];
    Shopmicro__Order__V1__CreateOrderRequest req = SHOPMICRO__ORDER__V1__CREATE_ORDER_REQUEST__INIT;
    uint64_t i;

    (void)arg;
    for (int k = 0; k < g.o.n_products; k++) {
        shopmicro__order__v1__order_item__init(&it[k]);
        it[k].product_id = (char *)g.o.products[k];
        it[k].quantity = k + 1;
        ptrs[k] = &it[k];
    }
    req.customer_id = (char *)"bench-relay";
    req.items = ptrs;
    req.n_items = (size_t)g.o.n_products;
    while ((i = atomic_fetch_add(&g.next_call, 1)) < g.n_calls) {
        uint64_t at = g.t0_ns + i * period_ns;
        struct timespec ts = {.tv_sec = (time_t)(at / 1000000000ull),
                              .tv_nsec = (long)(at % 1000000000ull)};
        /* As the gateway calls it: for the customer, with its scope. */
        static const rpc_md_t caller[2] = {{PR_MD_SUBJECT, "bench-relay"},
                                           {PR_MD_SCOPES, "orders:write"}};
        rpc_call_opts_t co = {.md = caller, .n_md = 2};
        rpc_result_t res;
        ProtobufCMessage *m = NULL;
        uint64_t done;

        /* svc_now_ns is CLOCK_MONOTONIC: sleep to the call's slot. */
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        co.deadline_ns = svc_now_ns() + (uint64_t)CALL_DEADLINE_MS * SVC_NS_PER_MS;
        if (rpc_call_unary(g.ch, METHOD, &req.base,
                           &shopmicro__order__v1__create_order_response__descriptor, &m, &co,
                           &res) != SVC_OK) {
            atomic_fetch_add(&g.errors, 1);
            pthread_mutex_lock(&g.mu);
            snprintf(g.last_error, sizeof g.last_error, "%s: %s", svc_err_name(res.err),
                     res.message);
            pthread_mutex_unlock(&g.mu);
            continue;
        }
        done = svc_now_ns();
        g.call_ns[i] = done - at;
        pthread_mutex_lock(&g.mu);
        entry_t *e = entry_of(((Shopmicro__Order__V1__CreateOrderResponse *)m)->id);
        e->reply_ns = done;
        e->measured = (double)i / g.o.rate >= g.o.warmup;
        pthread_mutex_unlock(&g.mu);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return NULL;
}

static rd_kafka_t *consumer_at_end(void)
{
    char why[512], group[64];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_partition_list_t *l;
    rd_kafka_topic_t *t;
    rd_kafka_t *rk;

    snprintf(group, sizeof group, "bench-relay-%d", (int)getpid());
    if (rd_kafka_conf_set(c, "bootstrap.servers", g.o.brokers, why, sizeof why) ||
        rd_kafka_conf_set(c, "group.id", group, why, sizeof why) ||
        rd_kafka_conf_set(c, "enable.auto.commit", "false", why, sizeof why))
        die("consumer config: %s", why);
    if ((rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, why, sizeof why)) == NULL)
        die("consumer: %s", why);
    t = rd_kafka_topic_new(rk, g.o.topic, NULL);
    if (rd_kafka_metadata(rk, 0, t, &md, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        md->topic_cnt != 1 || md->topics[0].partition_cnt <= 0)
        die("no metadata for topic %s", g.o.topic);
    l = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
    for (int p = 0; p < md->topics[0].partition_cnt; p++) {
        int64_t lo = 0, hi = 0;
        if (rd_kafka_query_watermark_offsets(rk, g.o.topic, p, &lo, &hi, 10000))
            die("watermarks of %s/%d", g.o.topic, p);
        rd_kafka_topic_partition_list_add(l, g.o.topic, p)->offset = hi;
    }
    if (rd_kafka_assign(rk, l) != RD_KAFKA_RESP_ERR_NO_ERROR)
        die("assign");
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
    return rk;
}

/* True when no --ce-type was given, or m's ce_type header is it. */
static bool type_matches(const rd_kafka_message_t *m)
{
    rd_kafka_headers_t *hs = NULL;
    const void *v;
    size_t len;

    if (g.o.ce_type == NULL)
        return true;
    return rd_kafka_message_headers(m, &hs) == RD_KAFKA_RESP_ERR_NO_ERROR &&
           rd_kafka_header_get_last(hs, "ce_type", &v, &len) == RD_KAFKA_RESP_ERR_NO_ERROR &&
           len == strlen(g.o.ce_type) && memcmp(v, g.o.ce_type, len) == 0;
}

static void *consumer_main(void *arg)
{
    rd_kafka_t *rk = arg;

    while (!atomic_load(&g.stop_consumer)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 20);
        uint64_t now = svc_now_ns();
        char key[64];

        if (m == NULL)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->key_len < sizeof key && type_matches(m)) {
            memcpy(key, m->key, m->key_len);
            key[m->key_len] = '\0';
            pthread_mutex_lock(&g.mu);
            entry_t *e = entry_of(key);
            if (e->seen_ns == 0) {
                e->seen_ns = now;
                atomic_fetch_add(&g.seen, 1);
            }
            pthread_mutex_unlock(&g.mu);
        }
        rd_kafka_message_destroy(m);
    }
    return NULL;
}

static int cmd_latency(void)
{
    pthread_t th[MAX_THREADS], cons;
    rd_kafka_t *rk;
    uint64_t *lat, *calls, ok = 0, give_up;
    size_t n_lat = 0, n_calls_ok = 0, early = 0, missing = 0, cap = 1;
    double achieved;

    g.n_calls = (uint64_t)(g.o.rate * (g.o.warmup + g.o.seconds));
    while (cap < 2 * g.n_calls + 1024)
        cap <<= 1;
    g.table = calloc(cap, sizeof *g.table);
    g.call_ns = calloc(g.n_calls + 1, sizeof *g.call_ns);
    lat = calloc(g.n_calls + 1, sizeof *lat);
    calls = calloc(g.n_calls + 1, sizeof *calls);
    if (g.table == NULL || g.call_ns == NULL || lat == NULL || calls == NULL)
        die("out of memory");
    g.mask = cap - 1;
    pthread_mutex_init(&g.mu, NULL);
    grpc_init();
    if ((g.ch = rpc_channel_new(g.o.order, NULL)) == NULL)
        die("cannot create a channel to %s", g.o.order);
    rk = consumer_at_end();
    if (pthread_create(&cons, NULL, consumer_main, rk) != 0)
        die("cannot create threads");
    printf("[latency] CreateOrder at %.0f/s (open loop, %d threads) for %.0f s + %.0f s warm-up "
           "to %s; consumer on %s at the end of %s%s%s\n",
           g.o.rate, g.o.threads, g.o.seconds, g.o.warmup, g.o.order, g.o.brokers, g.o.topic,
           g.o.ce_type ? ", counting only " : "", g.o.ce_type ? g.o.ce_type : "");
    fflush(stdout);
    g.t0_ns = svc_now_ns() + 200 * SVC_NS_PER_MS;
    for (int i = 0; i < g.o.threads; i++)
        if (pthread_create(&th[i], NULL, sender_main, NULL) != 0)
            die("cannot create threads");
    for (int i = 0; i < g.o.threads; i++)
        pthread_join(th[i], NULL);
    achieved = (double)(svc_now_ns() - g.t0_ns) / 1e9;
    ok = g.n_calls - atomic_load(&g.errors);
    /* Every acknowledged order's record, or 10 s more. */
    give_up = svc_now_ns() + 10000 * SVC_NS_PER_MS;
    while (atomic_load(&g.seen) < ok && svc_now_ns() < give_up)
        usleep(10000);
    atomic_store(&g.stop_consumer, true);
    pthread_join(cons, NULL);
    for (size_t i = 0; i <= g.mask; i++) {
        entry_t *e = &g.table[i];
        if (!e->used || !e->measured)
            continue;
        if (e->reply_ns == 0)
            continue; /* a record of an order this run did not make (or failed) */
        if (e->seen_ns == 0) {
            missing++;
            continue;
        }
        if (e->seen_ns < e->reply_ns)
            early++; /* read before the reply was: the record beat the response */
        lat[n_lat++] = e->seen_ns > e->reply_ns ? e->seen_ns - e->reply_ns : 0;
    }
    for (uint64_t i = (uint64_t)(g.o.rate * g.o.warmup); i < g.n_calls; i++)
        if (g.call_ns[i] > 0)
            calls[n_calls_ok++] = g.call_ns[i];
    qsort(lat, n_lat, sizeof *lat, bench_cmp_u64);
    qsort(calls, n_calls_ok, sizeof *calls, bench_cmp_u64);
    printf("[latency] %" PRIu64 " calls in %.1f s (%.0f/s), %" PRIu64 " failed%s%s\n", g.n_calls,
           achieved, (double)g.n_calls / achieved, (uint64_t)atomic_load(&g.errors),
           g.last_error[0] ? ", last: " : "", g.last_error);
    printf("[latency] CreateOrder reply -> record read by the consumer, %zu orders after the "
           "warm-up: p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms  (%zu read before the "
           "reply arrived, counted 0; %zu never read)\n",
           n_lat, bench_pct_ms(lat, n_lat, 50), bench_pct_ms(lat, n_lat, 90),
           bench_pct_ms(lat, n_lat, 99), n_lat ? (double)lat[n_lat - 1] / 1e6 : 0, early, missing);
    printf("[latency] CreateOrder call (from its scheduled send): p50 %.2f ms  p99 %.2f ms  "
           "max %.2f ms\n",
           bench_pct_ms(calls, n_calls_ok, 50), bench_pct_ms(calls, n_calls_ok, 99),
           n_calls_ok ? (double)calls[n_calls_ok - 1] / 1e6 : 0);
    printf("RESULT calls=%" PRIu64 " errors=%" PRIu64 " rate=%.0f measured=%zu missing=%zu "
           "early=%zu p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f call_p50_ms=%.2f "
           "call_p99_ms=%.2f\n",
           g.n_calls, (uint64_t)atomic_load(&g.errors), (double)g.n_calls / achieved, n_lat,
           missing, early, bench_pct_ms(lat, n_lat, 50), bench_pct_ms(lat, n_lat, 90),
           bench_pct_ms(lat, n_lat, 99), n_lat ? (double)lat[n_lat - 1] / 1e6 : 0,
           bench_pct_ms(calls, n_calls_ok, 50), bench_pct_ms(calls, n_calls_ok, 99));
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    grpc_channel_destroy(g.ch);
    grpc_shutdown();
    free(g.table);
    free(g.call_ns);
    free(lat);
    free(calls);
    return atomic_load(&g.errors) == 0 && missing == 0 ? 0 : 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_relay fill --dsn DSN --rows N --kcat-file PATH [--topic T]\n"
            "       bench_relay latency --order HOST:PORT --brokers B --product ID "
            "[--product ID]\n"
            "                   [--rate R] [--seconds S] [--warmup S] [--threads T] "
            "[--topic T] [--ce-type TYPE]\n"
            "kcat delimiters: -K '%s' -D '%s\\n'\n",
            KEY_DELIM, "~~relay-bench-end~~");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"dsn", 1, NULL, 'd'},     {"rows", 1, NULL, 'n'},    {"kcat-file", 1, NULL, 'k'},
        {"order", 1, NULL, 'o'},   {"brokers", 1, NULL, 'b'}, {"product", 1, NULL, 'p'},
        {"rate", 1, NULL, 'r'},    {"seconds", 1, NULL, 's'}, {"warmup", 1, NULL, 'w'},
        {"threads", 1, NULL, 't'}, {"topic", 1, NULL, 'T'},   {"ce-type", 1, NULL, 'c'},
        {"help", 0, NULL, 'h'},    {NULL, 0, NULL, 0},
    };
    const char *dsn = NULL, *kcat = NULL, *cmd = argc > 1 ? argv[1] : "";
    long rows = 0;
    int c;

    g.o = (lat_opts_t){
        .topic = ORD_EVENT_TOPIC, .threads = 32, .rate = 500, .seconds = 20, .warmup = 1};
    optind = 2;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            dsn = optarg;
            break;
        case 'n':
            rows = strtol(optarg, NULL, 10);
            break;
        case 'k':
            kcat = optarg;
            break;
        case 'o':
            g.o.order = optarg;
            break;
        case 'b':
            g.o.brokers = optarg;
            break;
        case 'p':
            if (g.o.n_products == 2)
                die("at most 2 --product");
            g.o.products[g.o.n_products++] = optarg;
            break;
        case 'r':
            g.o.rate = strtod(optarg, NULL);
            break;
        case 's':
            g.o.seconds = strtod(optarg, NULL);
            break;
        case 'w':
            g.o.warmup = strtod(optarg, NULL);
            break;
        case 't':
            g.o.threads = (int)strtol(optarg, NULL, 10);
            break;
        case 'T':
            g.o.topic = optarg;
            break;
        case 'c':
            g.o.ce_type = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(cmd, "fill") == 0 && dsn != NULL && kcat != NULL && rows > 0)
        return cmd_fill(dsn, rows, kcat, g.o.topic);
    if (strcmp(cmd, "latency") == 0 && g.o.order != NULL && g.o.brokers != NULL &&
        g.o.n_products > 0 && g.o.rate > 0 && g.o.seconds > 0 && g.o.threads > 0 &&
        g.o.threads <= MAX_THREADS)
        return cmd_latency();
    usage(stderr);
    return 2;
}
