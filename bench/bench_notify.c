/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_notify.c - the notification benchmark's tools (issue 14), driven by
 * bench/run_notify_bench.sh. Every job body is the real one: an
 * OrderConfirmed record made into a job by the service's own
 * ntf_job_from_record (a CloudEvent JSON, ~290 bytes).
 *
 *   bench_notify bare --port P [--base B] [--jobs N] [--workers W] [--prefetch K]
 *       The bare loop on pkg/mq alone, on its own topology base B (default
 *       bench.bare, no retry tiers): (1) publish N jobs, each confirmed before
 *       the next (rmq_publish, one thread); (2) consume and ack them with W
 *       threads, each an rmq_consumer with prefetch K; (3) both at once: the
 *       W consumers wait, then N more jobs are published and consumed while
 *       they arrive. Prints one RESULT line.
 *   bench_notify enqueue --jobs N
 *       N jobs into the notification service's own work queue, as its
 *       publisher writes them (message-id, content type, the event-type and
 *       x-request-id headers), with the service's NOTIFY_* settings
 *       (ntf_config_load: NOTIFY_RABBITMQ_PORT, NOTIFY_QUEUE_BASE, ...).
 *   bench_notify produce --brokers B [--topic T] --events N
 *       N OrderConfirmed records to T (default shopmicro.orders.v1) as the
 *       relay writes them: key = order id, CloudEvents binary headers,
 *       protobuf value; waits for every delivery report.
 *   bench_notify orders --url http://HOST:PORT --product ID --rate R --seconds S --out FILE
 *                       [--header "Name: value"]... [--customer ID]
 *       Open loop: a CreateOrder (POST /v1/orders, one item) every 1/R s for
 *       S s through the gateway (libcurl multi, no limit on requests in
 *       flight); FILE gets "order_id unix_ms_of_the_200 call_ms" per order
 *       answered 200. Every --header goes on every request: the gateway's
 *       bearer token is --header "Authorization: Bearer TOKEN" (bench/lib.sh's
 *       bench_auth); the order names customer ID, or none (the token's
 *       subject places it for itself).
 *   bench_notify sinklog --log FILE
 *       The sink's accepted deliveries in its log: count, first and last
 *       time (ms), and the delivery rate between them.
 *   bench_notify e2e --orders FILE --outbox FILE --log FILE
 *       Joins the orders (from `orders`), the order service's outbox rows
 *       ("order_id event_id created_ms published_ms" of OrderConfirmed) and
 *       the sink's log (event_id, ms timestamp): per order the time from its
 *       CreateOrder 200 to its webhook at the sink, with the stages on the
 *       way; p50/p90/p99/max.
 *
 * Every mode ends with one "RESULT key=value ..." line. Exit 0 when the run
 * completed, 1 on a failure, 2 for bad usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "bench_notify.h"
#include "bench_pct.h"
#include "config.h"
#include "job.h"
#include "kafka/kafka.h"
#include "mq/mq.h"
#include "shopmicro/events/v1/events.pb-c.h"

void bn_die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, "bench_notify: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t rng_state;

static uint64_t xorshift(void)
{
    uint64_t x = rng_state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static void uuid4(char out[37])
{
    static const char hex[] = "0123456789abcdef";
    uint64_t a = xorshift(), b = xorshift();
    int k = 0;

    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            out[i] = '-';
            continue;
        }
        uint64_t *src = k < 16 ? &a : &b;
        int nib = (int)((*src >> ((k % 16) * 4)) & 15);
        if (i == 14)
            nib = 4;
        else if (i == 19)
            nib = 8 | (nib & 3);
        out[i] = hex[nib];
        k++;
    }
    out[36] = '\0';
}

static void rfc3339_now(char out[64])
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ts.tv_nsec / 1000000));
}

/* ------------------------------------------------------------------------
 * An OrderConfirmed event: its protobuf value and CloudEvents headers, and
 * the job the service makes of it.
 * ------------------------------------------------------------------------ */
typedef struct event {
    char id[37], order_id[37], time[64];
    uint8_t value[256];
    size_t value_len;
    kfk_header_t h[KFK_CE_MAX_HEADERS];
    size_t n_h;
} event_t;

static void event_make(event_t *e)
{
    Shopmicro__Events__V1__OrderConfirmed m = SHOPMICRO__EVENTS__V1__ORDER_CONFIRMED__INIT;
    kfk_ce_t ce = {.type = NTF_TYPE_CONFIRMED, .source = "/shopmicro/order"};
    char errbuf[SVC_ERRBUF_LEN] = "";

    uuid4(e->id);
    uuid4(e->order_id);
    rfc3339_now(e->time);
    m.order_id = e->order_id;
    m.confirmed_at = e->time;
    if (shopmicro__events__v1__order_confirmed__get_packed_size(&m) > sizeof e->value)
        bn_die("OrderConfirmed too large");
    e->value_len = shopmicro__events__v1__order_confirmed__pack(&m, e->value);
    ce.id = e->id;
    ce.time = e->time;
    ce.request_id = e->order_id; /* any request id of the same size */
    if (kfk_ce_headers(&ce, e->h, &e->n_h, errbuf) != SVC_OK)
        bn_die("kfk_ce_headers: %s", errbuf);
}

/* The job's body, by the service's own code (malloc'd). */
static char *job_body(const event_t *e, size_t *len)
{
    kfk_record_t r = {.topic = NTF_TOPIC,
                      .key = e->order_id,
                      .key_len = 36,
                      .value = e->value,
                      .value_len = e->value_len,
                      .headers = e->h,
                      .n_headers = e->n_h,
                      .ce_id = e->id,
                      .attempt = 1,
                      .timestamp_ms = -1};
    char reason[KFK_REASON_LEN] = "", *body = NULL;

    if (ntf_job_from_record(&r, &body, len, reason) != NTF_JOB)
        bn_die("ntf_job_from_record: %s", reason);
    return body;
}

/* Publishes n jobs like the service's publisher, one confirm at a time. */
static double publish_jobs(rmq_conn_t *c, const rmq_topology_t *t, long n)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    double t0 = now_s();

    for (long i = 0; i < n; i++) {
        event_t e;
        size_t len = 0;
        char *body;
        rmq_header_t h[2] = {{NTF_HDR_TYPE, NTF_TYPE_CONFIRMED}, {"x-request-id", NULL}};
        rmq_message_t m = {.content_type = NTF_CONTENT_TYPE, .headers = h, .n_headers = 2};
        svc_err_t err;

        event_make(&e);
        body = job_body(&e, &len);
        h[1].value = e.order_id;
        m.body = body;
        m.body_len = len;
        m.message_id = e.id;
        err = rmq_publish(c, t, &m, errbuf);
        free(body);
        if (err != SVC_OK)
            bn_die("rmq_publish (job %ld): %s", i + 1, errbuf);
    }
    return now_s() - t0;
}

static size_t sample_body_len(void)
{
    event_t e;
    size_t len = 0;

    event_make(&e);
    free(job_body(&e, &len));
    return len;
}

/* ------------------------------------------------------------------------
 * bare
 * ------------------------------------------------------------------------ */
typedef struct bare {
    rmq_consumer_opts_t co;
    long target; /* acks to reach in this phase */
    atomic_long acked;
    atomic_int ready; /* consumers connected */
    atomic_bool go;   /* consume (phase 2: start together) */
    _Atomic double last_ack;
    char err[SVC_ERRBUF_LEN + 32]; /* "rmq_consumer_...: " + the error */
    atomic_bool failed;
} bare_t;

static void *bare_consumer(void *arg)
{
    bare_t *b = arg;
    char errbuf[SVC_ERRBUF_LEN] = "";
    rmq_consumer_t *c = NULL;

    while (!atomic_load(&b->go)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (rmq_consumer_new(&b->co, &c, errbuf) != SVC_OK) {
        snprintf(b->err, sizeof b->err, "rmq_consumer_new: %s", errbuf);
        atomic_store(&b->failed, true);
        atomic_fetch_add(&b->ready, 1);
        return NULL;
    }
    atomic_fetch_add(&b->ready, 1);
    while (atomic_load(&b->acked) < b->target && !atomic_load(&b->failed)) {
        rmq_delivery_t *d = NULL;
        svc_err_t err = rmq_consumer_next(c, 100, &d, errbuf);

        if (err == SVC_ETIMEDOUT)
            continue;
        if (err != SVC_OK) {
            snprintf(b->err, sizeof b->err, "rmq_consumer_next: %s", errbuf);
            atomic_store(&b->failed, true);
            break;
        }
        err = rmq_consumer_ack(c, d, errbuf);
        rmq_delivery_free(d);
        if (err != SVC_OK) {
            snprintf(b->err, sizeof b->err, "rmq_consumer_ack: %s", errbuf);
            atomic_store(&b->failed, true);
            break;
        }
        if (atomic_fetch_add(&b->acked, 1) + 1 == b->target)
            atomic_store(&b->last_ack, now_s());
    }
    rmq_consumer_free(c);
    return NULL;
}

/* Starts w consumers of b (they connect at once when go, else wait). */
static void bare_start(bare_t *b, pthread_t *th, int w)
{
    for (int i = 0; i < w; i++)
        if (pthread_create(&th[i], NULL, bare_consumer, b) != 0)
            bn_die("pthread_create");
}

static void bare_join(bare_t *b, pthread_t *th, int w)
{
    for (int i = 0; i < w; i++)
        pthread_join(th[i], NULL);
    if (atomic_load(&b->failed))
        bn_die("%s", b->err);
}

static int cmd_bare(int port, const char *base, long n, int w, int prefetch)
{
    char errbuf[SVC_ERRBUF_LEN] = "", work[RMQ_NAME_MAX];
    rmq_topology_t t = {.base = base};
    rmq_conn_opts_t o;
    rmq_conn_t *c = NULL;
    pthread_t th[64];
    uint32_t depth = 0;
    double pub_s, cons_s, comb_s, comb_pub_s, t0, cpu0;
    static bare_t b1, b2;

    if (w < 1 || w > 64)
        bn_die("--workers 1..64");
    rmq_conn_opts_init(&o);
    o.port = port;
    o.name = "bench-bare-publisher";
    if (rmq_conn_new(&o, &c, errbuf) != SVC_OK)
        bn_die("connect: %s", errbuf);
    if (rmq_topology_declare(c, &t, errbuf) != SVC_OK)
        bn_die("declare %s: %s", base, errbuf);
    rmq_topology_name(&t, RMQ_NAME_WORK, 0, work);
    if (rmq_queue_purge(c, work, NULL, errbuf) != SVC_OK)
        bn_die("purge %s: %s", work, errbuf);
    printf("bare: %ld jobs of %zu bytes, %d consumers with prefetch %d, queue %s\n", n,
           sample_body_len(), w, prefetch, work);
    fflush(stdout);

    /* 1. publish only */
    cpu0 = cpu_s();
    pub_s = publish_jobs(c, &t, n);
    if (rmq_queue_depth(c, work, &depth, NULL, errbuf) != SVC_OK || depth != (uint32_t)n)
        bn_die("after publishing %ld: %s holds %u (%s)", n, work, depth, errbuf);
    printf(
        "bare publish: %ld jobs in %.3f s: %.0f jobs/s (one confirm per job; bench CPU %.2f s)\n",
        n, pub_s, (double)n / pub_s, cpu_s() - cpu0);
    fflush(stdout);

    /* 2. consume + ack what is queued (the clock starts before the consumers connect) */
    rmq_consumer_opts_init(&b1.co);
    b1.co.conn = o;
    b1.co.conn.name = "bench-bare-consumer";
    b1.co.topology = &t;
    b1.co.prefetch = prefetch;
    b1.target = n;
    cpu0 = cpu_s();
    bare_start(&b1, th, w);
    t0 = now_s();
    atomic_store(&b1.go, true);
    bare_join(&b1, th, w);
    cons_s = atomic_load(&b1.last_ack) - t0;
    printf("bare consume+ack (pre-queued): %ld jobs in %.3f s: %.0f jobs/s (bench CPU %.2f s)\n", n,
           cons_s, (double)n / cons_s, cpu_s() - cpu0);
    fflush(stdout);

    /* 3. both at once: consumers connected and waiting, then publish */
    b2.co = b1.co;
    b2.target = n;
    cpu0 = cpu_s();
    bare_start(&b2, th, w);
    atomic_store(&b2.go, true);
    while (atomic_load(&b2.ready) < w && !atomic_load(&b2.failed)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    t0 = now_s();
    comb_pub_s = publish_jobs(c, &t, n);
    bare_join(&b2, th, w);
    comb_s = atomic_load(&b2.last_ack) - t0;
    printf("bare combined (publish while consuming): %ld jobs in %.3f s: %.0f jobs/s "
           "(its publish side %.0f jobs/s; bench CPU %.2f s)\n",
           n, comb_s, (double)n / comb_s, (double)n / comb_pub_s, cpu_s() - cpu0);
    rmq_conn_free(c);
    printf("RESULT bare_publish_per_s=%.0f bare_consume_per_s=%.0f bare_combined_per_s=%.0f "
           "bare_combined_publish_per_s=%.0f jobs=%ld workers=%d prefetch=%d body_bytes=%zu\n",
           (double)n / pub_s, (double)n / cons_s, (double)n / comb_s, (double)n / comb_pub_s, n, w,
           prefetch, sample_body_len());
    return 0;
}

/* ------------------------------------------------------------------------
 * enqueue: into the service's own work queue, with its settings
 * ------------------------------------------------------------------------ */
static int cmd_enqueue(long n)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ntf_config_t cfg;
    rmq_conn_opts_t o;
    rmq_topology_t t;
    rmq_conn_t *c = NULL;
    double s;

    if (ntf_config_load(&cfg, errbuf) != SVC_OK)
        bn_die("NOTIFY_* settings: %s", errbuf);
    ntf_config_conn_opts(&cfg, "bench-enqueue", &o);
    ntf_config_topology(&cfg, &t);
    if (rmq_conn_new(&o, &c, errbuf) != SVC_OK)
        bn_die("connect: %s", errbuf);
    if (rmq_topology_declare(c, &t, errbuf) != SVC_OK)
        bn_die("declare %s: %s", cfg.queue_base, errbuf);
    s = publish_jobs(c, &t, n);
    rmq_conn_free(c);
    printf("enqueue: %ld jobs into %s.work in %.3f s: %.0f jobs/s\n", n, cfg.queue_base, s,
           (double)n / s);
    printf("RESULT enqueue_per_s=%.0f jobs=%ld\n", (double)n / s, n);
    return 0;
}

/* ------------------------------------------------------------------------
 * produce: OrderConfirmed records to Kafka
 * ------------------------------------------------------------------------ */
static atomic_long produce_failed;

static void on_delivery(void *ctx, void *msg_opaque, svc_err_t err, const char *reason)
{
    (void)ctx;
    (void)msg_opaque;
    if (err != SVC_OK && atomic_fetch_add(&produce_failed, 1) == 0)
        fprintf(stderr, "bench_notify: produce: %s\n", reason);
}

static int cmd_produce(const char *brokers, const char *topic, long n)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    kfk_producer_opts_t o;
    kfk_producer_t *p = NULL;
    double t0;
    int left;

    kfk_producer_opts_init(&o);
    o.brokers = brokers;
    o.client_id = "bench-notify";
    o.on_delivery = on_delivery;
    if (kfk_producer_new(&o, &p, errbuf) != SVC_OK)
        bn_die("producer: %s", errbuf);
    t0 = now_s();
    for (long i = 0; i < n; i++) {
        event_t e;
        kfk_message_t m;
        svc_err_t err;

        event_make(&e);
        m = (kfk_message_t){.topic = topic,
                            .key = e.order_id,
                            .key_len = 36,
                            .value = e.value,
                            .value_len = e.value_len,
                            .headers = e.h,
                            .n_headers = e.n_h};
        while ((err = kfk_produce(p, &m, errbuf)) == SVC_EEXHAUSTED)
            kfk_producer_poll(p, 10);
        if (err != SVC_OK)
            bn_die("kfk_produce: %s", errbuf);
        kfk_producer_poll(p, 0);
    }
    left = kfk_producer_flush(p, 30000);
    kfk_producer_free(p, 5000);
    if (left > 0 || atomic_load(&produce_failed) > 0)
        bn_die("%d records not delivered, %ld failed", left, atomic_load(&produce_failed));
    printf("RESULT produced=%ld produce_s=%.3f\n", n, now_s() - t0);
    return 0;
}

/* ------------------------------------------------------------------------
 * orders: open-loop CreateOrder through the gateway
 * ------------------------------------------------------------------------ */
typedef struct req {
    CURL *easy;
    char resp[4096];
    size_t len;
    double t0;
} req_t;

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    req_t *r = ud;
    size_t n = size * nmemb, room = sizeof r->resp - 1 - r->len;

    memcpy(r->resp + r->len, data, n < room ? n : room);
    r->len += n < room ? n : room;
    r->resp[r->len] = '\0';
    return n;
}

#define ORDERS_MAX_HEADERS 8

static int cmd_orders(const char *url, const char *product, double rate, double seconds,
                      const char *out_path, const char *const *headers, int n_headers,
                      const char *customer)
{
    long total = (long)(rate * seconds + 0.5), sent = 0, ok = 0, failed = 0;
    char endpoint[512], body[256];
    CURLM *multi;
    FILE *out = fopen(out_path, "w");
    double t0, *lat = calloc((size_t)total + 1, sizeof *lat);
    int running = 0;
    struct curl_slist *hdrs = NULL;

    if (out == NULL || lat == NULL)
        bn_die("cannot write %s", out_path);
    snprintf(endpoint, sizeof endpoint, "%s/v1/orders", url);
    if (customer != NULL)
        snprintf(body, sizeof body,
                 "{\"customer_id\":\"%s\",\"items\":[{\"product_id\":\"%s\",\"quantity\":1}]}",
                 customer, product);
    else
        snprintf(body, sizeof body, "{\"items\":[{\"product_id\":\"%s\",\"quantity\":1}]}",
                 product);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 256L);
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    for (int i = 0; i < n_headers; i++)
        hdrs = curl_slist_append(hdrs, headers[i]);
    if (hdrs == NULL)
        bn_die("out of memory");
    t0 = now_s();
    while (sent < total || running > 0) {
        double now = now_s(), next_at = t0 + (double)sent / rate, wait;
        CURLMsg *msg;
        int left;

        while (sent < total && now >= t0 + (double)sent / rate) {
            req_t *r = calloc(1, sizeof *r);

            if (r == NULL || (r->easy = curl_easy_init()) == NULL)
                bn_die("out of memory");
            curl_easy_setopt(r->easy, CURLOPT_URL, endpoint);
            curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, hdrs);
            curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_body);
            curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
            curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
            curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, 10000L);
            curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
            r->t0 = now_s();
            curl_multi_add_handle(multi, r->easy);
            sent++;
        }
        curl_multi_perform(multi, &running);
        while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
            req_t *r = NULL;
            long status = 0;
            const char *id;

            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
            if (msg->data.result == CURLE_OK && status == 200 &&
                (id = strstr(r->resp, "\"id\":\"")) != NULL && strlen(id + 6) >= 36) {
                double ms = (now_s() - r->t0) * 1000.0;
                fprintf(out, "%.36s %" PRId64 " %.3f\n", id + 6, wall_ms(), ms);
                lat[ok++] = ms;
            } else {
                if (failed++ < 3)
                    fprintf(stderr, "bench_notify: CreateOrder: curl %d, HTTP %ld: %.200s\n",
                            (int)msg->data.result, status, r->resp);
            }
            curl_multi_remove_handle(multi, msg->easy_handle);
            curl_easy_cleanup(msg->easy_handle);
            free(r);
        }
        if (sent >= total && running == 0)
            break;
        next_at = sent < total ? t0 + (double)sent / rate : now + 0.05;
        wait = (next_at - now_s()) * 1000.0;
        curl_multi_poll(multi, NULL, 0, wait < 1 ? 1 : wait > 50 ? 50 : (int)wait, NULL);
    }
    fclose(out);
    qsort(lat, (size_t)ok, sizeof *lat, bench_cmp_double);
    printf("orders: %ld CreateOrder at %.0f/s over %.1f s: %ld answered 200, %ld failed; call p50 "
           "%.1f ms p99 %.1f ms\n",
           sent, rate, now_s() - t0, ok, failed, bench_pct(lat, (size_t)ok, 50),
           bench_pct(lat, (size_t)ok, 99));
    printf("RESULT orders=%ld ok=%ld failed=%ld call_p50_ms=%.1f call_p99_ms=%.1f\n", sent, ok,
           failed, bench_pct(lat, (size_t)ok, 50), bench_pct(lat, (size_t)ok, 99));
    curl_slist_free_all(hdrs);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    free(lat);
    return 0;
}

/* ------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------ */
static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_notify bare --port P [--base B] [--jobs N] [--workers W] [--prefetch K]\n"
            "       bench_notify enqueue --jobs N            (NOTIFY_* from the environment)\n"
            "       bench_notify produce --brokers B [--topic T] --events N\n"
            "       bench_notify orders --url URL --product ID --rate R --seconds S --out FILE\n"
            "                           [--header \"Name: value\"]... [--customer ID]\n"
            "       bench_notify sinklog --log FILE\n"
            "       bench_notify e2e --orders FILE --outbox FILE --log FILE\n");
}

static long num(const char *s, const char *what)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (*s == '\0' || *end != '\0' || v <= 0) {
        fprintf(stderr, "bench_notify: %s: '%s' is not a positive integer\n", what, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", 1, NULL, 'p'},    {"base", 1, NULL, 'b'},    {"jobs", 1, NULL, 'n'},
        {"events", 1, NULL, 'n'},  {"workers", 1, NULL, 'w'}, {"prefetch", 1, NULL, 'k'},
        {"brokers", 1, NULL, 'B'}, {"topic", 1, NULL, 't'},   {"url", 1, NULL, 'u'},
        {"product", 1, NULL, 'P'}, {"rate", 1, NULL, 'r'},    {"seconds", 1, NULL, 's'},
        {"out", 1, NULL, 'o'},     {"orders", 1, NULL, 'O'},  {"outbox", 1, NULL, 'X'},
        {"log", 1, NULL, 'l'},     {"header", 1, NULL, 'H'},  {"customer", 1, NULL, 'C'},
        {"help", 0, NULL, 'h'},    {NULL, 0, NULL, 0}};
    const char *mode, *base = "bench.bare", *brokers = NULL, *topic = NTF_TOPIC, *url = NULL,
                      *product = NULL, *out = NULL, *orders = NULL, *outbox = NULL, *log = NULL,
                      *customer = NULL, *headers[ORDERS_MAX_HEADERS];
    int n_headers = 0;
    long port = 0, n = 1000, w = 4, k = 4, rate = 20, seconds = 15;
    int c;

    rng_state = (uint64_t)wall_ms() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    mode = argv[1];
    optind = 2;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            port = num(optarg, "--port");
            break;
        case 'b':
            base = optarg;
            break;
        case 'n':
            n = num(optarg, "--jobs");
            break;
        case 'w':
            w = num(optarg, "--workers");
            break;
        case 'k':
            k = num(optarg, "--prefetch");
            break;
        case 'B':
            brokers = optarg;
            break;
        case 't':
            topic = optarg;
            break;
        case 'u':
            url = optarg;
            break;
        case 'P':
            product = optarg;
            break;
        case 'r':
            rate = num(optarg, "--rate");
            break;
        case 's':
            seconds = num(optarg, "--seconds");
            break;
        case 'o':
            out = optarg;
            break;
        case 'O':
            orders = optarg;
            break;
        case 'X':
            outbox = optarg;
            break;
        case 'l':
            log = optarg;
            break;
        case 'H':
            if (n_headers == ORDERS_MAX_HEADERS || strchr(optarg, ':') == NULL ||
                strpbrk(optarg, "\r\n") != NULL) {
                fprintf(stderr,
                        "bench_notify: --header wants \"Name: value\" on one line, at "
                        "most %d of them\n",
                        ORDERS_MAX_HEADERS);
                return 2;
            }
            headers[n_headers++] = optarg;
            break;
        case 'C':
            if (*optarg == '\0' || strlen(optarg) > 100 || strpbrk(optarg, "\"\\") != NULL) {
                fprintf(stderr,
                        "bench_notify: --customer: 1..100 characters, no quote or backslash\n");
                return 2;
            }
            customer = optarg;
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
    svc_log_set_level(SVC_LOG_WARN); /* pkg/mq's "connected" line per connection */
    if (strcmp(mode, "bare") == 0 && port > 0 && port < 65536)
        return cmd_bare((int)port, base, n, (int)w, (int)k);
    if (strcmp(mode, "enqueue") == 0)
        return cmd_enqueue(n);
    if (strcmp(mode, "produce") == 0 && brokers != NULL)
        return cmd_produce(brokers, topic, n);
    if (strcmp(mode, "orders") == 0 && url && product && out)
        return cmd_orders(url, product, (double)rate, (double)seconds, out, headers, n_headers,
                          customer);
    if (strcmp(mode, "sinklog") == 0 && log)
        return bn_cmd_sinklog(log);
    if (strcmp(mode, "e2e") == 0 && orders && outbox && log)
        return bn_cmd_e2e(orders, outbox, log);
    usage(stderr);
    return 2;
}
