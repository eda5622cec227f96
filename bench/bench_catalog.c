/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_catalog.c - a closed-loop load generator for CatalogService.GetProduct.
 *
 * N caller threads share one channel (one HTTP/2 connection), each issuing
 * blocking GetProduct calls back to back through pkg/rpc's client, with ids
 * drawn at random from products that exist. The ids are read first with
 * ListProducts; when fewer than --ensure exist, the missing ones are created
 * with CreateProduct (in parallel, by the same threads).
 *
 *   bench_catalog [--target HOST:PORT] [--threads N] [--seconds D]
 *                 [--warmup S] [--deadline-ms MS] [--ensure N]
 *   bench_catalog HOST:PORT [THREADS [SECONDS]]        (positional form)
 *
 * Prints successful calls/s, their latency percentiles (calls that started
 * in the warm-up or ended after the window are not counted) and failed calls
 * by status with an example message, then one line
 * "RESULT calls_per_s=... p50_ms=... ..." for scripts. Exit status 0 when
 * the run completed (errors are reported, not fatal), 1 when it could not
 * start (server unreachable, no products), 2 for bad usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>

#include "rpc/rpc.h"
#include "shopmicro/catalog/v1/catalog.pb-c.h"
#include "bench_pct.h"
#include "bench_util.h"

#define METHOD(name) "/shopmicro.catalog.v1.CatalogService/" name
#define N_STATUS     17
#define MAX_THREADS  1024

typedef Shopmicro__Catalog__V1__Product product_t;
typedef Shopmicro__Catalog__V1__GetProductRequest get_req_t;
typedef Shopmicro__Catalog__V1__CreateProductRequest create_req_t;
typedef Shopmicro__Catalog__V1__ListProductsRequest list_req_t;
typedef Shopmicro__Catalog__V1__ListProductsResponse list_resp_t;

typedef struct opts {
    const char *target;
    int threads; /* concurrent callers: threads, or calls in flight with --async */
    int async;   /* one thread keeps `threads` calls in flight on a completion queue */
    double seconds;
    double warmup;
    int deadline_ms;
    int ensure;
} opts_t;

/* The ids every caller draws from (read-only once the run starts). */
typedef struct idlist {
    char **ids;
    size_t n, cap;
} idlist_t;

typedef struct caller {
    int index;
    pthread_t thread;
    uint64_t rng;
    /* latencies (ns) of calls completed inside the measured window */
    uint64_t *lat;
    size_t n_lat, cap_lat;
    uint64_t by_status[N_STATUS];
    uint64_t warmup_calls;
    char last_error[N_STATUS][SVC_ERRBUF_LEN];
} caller_t;

static grpc_channel *g_ch;
static opts_t g_o;
static idlist_t g_ids;
static uint64_t g_measure_start_ns, g_measure_end_ns;
static pthread_barrier_t g_barrier;

/* For parallel seeding. */
static atomic_int g_to_create;
static pthread_mutex_t g_ids_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_create_errors;

#define die(...) bench_die("bench_catalog", __VA_ARGS__)

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return *s = x;
}

static uint64_t deadline_in(int ms)
{
    return svc_now_ns() + (uint64_t)ms * SVC_NS_PER_MS;
}

static void ids_add(const char *id)
{
    if (g_ids.n == g_ids.cap) {
        size_t cap = g_ids.cap ? g_ids.cap * 2 : 1024;
        char **p = realloc(g_ids.ids, cap * sizeof *p);
        if (p == NULL)
            die("out of memory");
        g_ids.ids = p;
        g_ids.cap = cap;
    }
    g_ids.ids[g_ids.n] = strdup(id);
    if (g_ids.ids[g_ids.n] == NULL)
        die("out of memory");
    g_ids.n++;
}

/* Reads every product id with ListProducts (page_size 200). */
static int fetch_ids(void)
{
    char token[256] = "";
    rpc_call_opts_t co = {0};

    do {
        list_req_t req = SHOPMICRO__CATALOG__V1__LIST_PRODUCTS_REQUEST__INIT;
        ProtobufCMessage *out = NULL;
        rpc_result_t res;
        list_resp_t *resp;

        req.page_size = 200;
        req.page_token = token;
        co.deadline_ns = deadline_in(5000);
        co.wait_for_ready = true; /* the server may have just started */
        if (rpc_call_unary(g_ch, METHOD("ListProducts"), &req.base,
                           &shopmicro__catalog__v1__list_products_response__descriptor, &out, &co,
                           &res) != SVC_OK) {
            fprintf(stderr, "bench_catalog: ListProducts failed: %s (%s)\n",
                    svc_grpc_code_name(res.grpc_status), res.message);
            return -1;
        }
        resp = (list_resp_t *)out;
        for (size_t i = 0; i < resp->n_products; i++)
            ids_add(resp->products[i]->id);
        snprintf(token, sizeof token, "%s", resp->next_page_token);
        protobuf_c_message_free_unpacked(out, NULL);
    } while (token[0] != '\0');
    return 0;
}

static void *seed_main(void *arg)
{
    caller_t *c = arg;
    rpc_call_opts_t co = {0};
    char name[64], desc[] = "created by bench_catalog";

    while (atomic_fetch_sub(&g_to_create, 1) > 0) {
        create_req_t req = SHOPMICRO__CATALOG__V1__CREATE_PRODUCT_REQUEST__INIT;
        ProtobufCMessage *out = NULL;
        rpc_result_t res;

        snprintf(name, sizeof name, "bench product %d-%" PRIu64, c->index,
                 xorshift(&c->rng) % 1000000);
        req.name = name;
        req.description = desc;
        req.price_cents = (int64_t)(xorshift(&c->rng) % 100000);
        req.stock = (int32_t)(xorshift(&c->rng) % 1000);
        co.deadline_ns = deadline_in(5000);
        co.wait_for_ready = true;
        if (rpc_call_unary(g_ch, METHOD("CreateProduct"), &req.base,
                           &shopmicro__catalog__v1__product__descriptor, &out, &co,
                           &res) != SVC_OK) {
            if (atomic_fetch_add(&g_create_errors, 1) == 0)
                fprintf(stderr, "bench_catalog: CreateProduct failed: %s (%s)\n",
                        svc_grpc_code_name(res.grpc_status), res.message);
            continue;
        }
        pthread_mutex_lock(&g_ids_mu);
        ids_add(((product_t *)out)->id);
        pthread_mutex_unlock(&g_ids_mu);
        protobuf_c_message_free_unpacked(out, NULL);
    }
    return NULL;
}

static void lat_add(caller_t *c, uint64_t ns)
{
    if (c->n_lat == c->cap_lat) {
        size_t cap = c->cap_lat ? c->cap_lat * 2 : 65536;
        uint64_t *p = realloc(c->lat, cap * sizeof *p);
        if (p == NULL)
            die("out of memory");
        c->lat = p;
        c->cap_lat = cap;
    }
    c->lat[c->n_lat++] = ns;
}

/* Counts one finished call into caller c (blocking and async alike). */
static void record(caller_t *c, uint64_t t0, uint64_t t1, int st, const char *message)
{
    if (st < 0 || st >= N_STATUS)
        st = 2;
    if (t0 < g_measure_start_ns || t1 > g_measure_end_ns) {
        c->warmup_calls++;
        return;
    }
    c->by_status[st]++;
    if (st != 0)
        snprintf(c->last_error[st], SVC_ERRBUF_LEN, "%s", message);
    else
        lat_add(c, t1 - t0);
}

static void *caller_main(void *arg)
{
    caller_t *c = arg;
    rpc_call_opts_t co = {0};

    pthread_barrier_wait(&g_barrier);
    for (;;) {
        get_req_t req = SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;
        ProtobufCMessage *out = NULL;
        rpc_result_t res;
        uint64_t t0 = svc_now_ns(), t1;
        int st;

        if (t0 >= g_measure_end_ns)
            break;
        req.id = g_ids.ids[xorshift(&c->rng) % g_ids.n];
        co.deadline_ns = t0 + (uint64_t)g_o.deadline_ms * SVC_NS_PER_MS;
        rpc_call_unary(g_ch, METHOD("GetProduct"), &req.base,
                       &shopmicro__catalog__v1__product__descriptor, &out, &co, &res);
        t1 = svc_now_ns();
        if (out != NULL)
            protobuf_c_message_free_unpacked(out, NULL);
        /* A reply that does not decode is counted as INTERNAL (res.err). */
        st = res.err == SVC_OK ? 0 : res.grpc_status != 0 ? res.grpc_status : 13;
        record(c, t0, t1, st, res.message); /* throughput and latency: successes only */
    }
    return NULL;
}

/*
 * --async: one thread keeps g_o.threads GetProducts in flight on one
 * completion queue. The same concurrency as N blocking callers, without N
 * client threads handing work to gRPC's pollers: on a 2-core machine that
 * hand-off costs as much CPU as the server itself, and the server is what
 * is being measured.
 */
typedef struct inflight {
    caller_t *c;
    rpc_unary_t u;
} inflight_t;

static void async_start(inflight_t *f, grpc_completion_queue *cq)
{
    get_req_t req = SHOPMICRO__CATALOG__V1__GET_PRODUCT_REQUEST__INIT;

    req.id = g_ids.ids[xorshift(&f->c->rng) % g_ids.n];
    if (!rpc_unary_start(&f->u, g_ch, NULL, cq, METHOD("GetProduct"), rpc_message_pack(&req.base),
                         NULL, 0, svc_now_ns() + (uint64_t)g_o.deadline_ms * SVC_NS_PER_MS, false,
                         f))
        die("cannot start a call");
}

static void async_done(inflight_t *f)
{
    uint64_t t0 = f->u.started_ns;
    rpc_result_t res;
    /* Decoded, as a real caller would; a reply that does not decode is INTERNAL. */
    ProtobufCMessage *out =
        rpc_unary_finish(&f->u, &shopmicro__catalog__v1__product__descriptor, &res);

    protobuf_c_message_free_unpacked(out, NULL);
    record(f->c, t0, svc_now_ns(),
           res.err == SVC_OK ? 0
           : res.grpc_status ? res.grpc_status
                             : 13,
           res.message);
}

static void run_async(caller_t *callers)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    inflight_t *fl = calloc((size_t)g_o.threads, sizeof *fl);
    int active = g_o.threads;

    if (fl == NULL)
        die("out of memory");
    for (int i = 0; i < g_o.threads; i++) {
        fl[i].c = &callers[i];
        async_start(&fl[i], cq);
    }
    while (active > 0) {
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        inflight_t *f = ev.tag;

        async_done(f);
        if (svc_now_ns() < g_measure_end_ns)
            async_start(f, cq);
        else
            active--;
    }
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    free(fl);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_catalog [--target HOST:PORT] [--threads N] [--seconds D]\n"
               "                     [--warmup S] [--deadline-ms MS] [--ensure N] [--async]\n"
               "       bench_catalog HOST:PORT [THREADS [SECONDS]]\n"
               "  --target       catalog address (default 127.0.0.1:25051)\n"
               "  --threads      concurrent callers sharing one channel (default 16)\n"
               "  --seconds      measured duration (default 10)\n"
               "  --warmup       unmeasured load before it, opens every DB connection (default 1)\n"
               "  --deadline-ms  per-call deadline (default 1000)\n"
               "  --ensure       create products with CreateProduct until N exist (default 0)\n"
               "  --async        one client thread keeps N calls in flight instead of N\n"
               "                 blocking threads (less client CPU on a small machine)\n");
}

static long parse_long(const char *s, const char *what, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "bench_catalog: bad %s '%s' (%ld..%ld)\n", what, s, lo, hi);
        exit(2);
    }
    return v;
}

static double parse_double(const char *s, const char *what, double lo, double hi)
{
    char *end;
    double v = strtod(s, &end);

    if (*s == '\0' || *end != '\0' || !(v >= lo && v <= hi)) {
        fprintf(stderr, "bench_catalog: bad %s '%s'\n", what, s);
        exit(2);
    }
    return v;
}

static void parse_args(int argc, char **argv)
{
    static const struct option longopts[] = {{"target", required_argument, NULL, 't'},
                                             {"threads", required_argument, NULL, 'c'},
                                             {"seconds", required_argument, NULL, 'd'},
                                             {"warmup", required_argument, NULL, 'w'},
                                             {"deadline-ms", required_argument, NULL, 'D'},
                                             {"ensure", required_argument, NULL, 'e'},
                                             {"async", no_argument, NULL, 'a'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int ch, pos;

    g_o = (opts_t){"127.0.0.1:25051", 16, 0, 10, 1, 1000, 0};
    while ((ch = getopt_long(argc, argv, "t:c:d:w:D:e:ah", longopts, NULL)) != -1) {
        switch (ch) {
        case 't':
            g_o.target = optarg;
            break;
        case 'c':
            g_o.threads = (int)parse_long(optarg, "thread count", 1, MAX_THREADS);
            break;
        case 'd':
            g_o.seconds = parse_double(optarg, "duration", 0.1, 86400);
            break;
        case 'w':
            g_o.warmup = parse_double(optarg, "warm-up", 0, 3600);
            break;
        case 'D':
            g_o.deadline_ms = (int)parse_long(optarg, "deadline", 1, 3600000);
            break;
        case 'e':
            g_o.ensure = (int)parse_long(optarg, "product count", 0, 10000000);
            break;
        case 'a':
            g_o.async = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    for (pos = 0; optind < argc; optind++, pos++) {
        switch (pos) {
        case 0:
            g_o.target = argv[optind];
            break;
        case 1:
            g_o.threads = (int)parse_long(argv[optind], "thread count", 1, MAX_THREADS);
            break;
        case 2:
            g_o.seconds = parse_double(argv[optind], "duration", 0.1, 86400);
            break;
        default:
            usage(stderr);
            exit(2);
        }
    }
}

/* Merges every caller's figures and prints them, ending with the RESULT line. */
static void report(const caller_t *callers)
{
    uint64_t *all, ok = 0, errors = 0, warm = 0;
    size_t n_all = 0;
    double sum_ms = 0;

    for (int i = 0; i < g_o.threads; i++)
        n_all += callers[i].n_lat;
    all = malloc((n_all ? n_all : 1) * sizeof *all);
    if (all == NULL)
        die("out of memory");
    n_all = 0;
    for (int i = 0; i < g_o.threads; i++) {
        memcpy(all + n_all, callers[i].lat, callers[i].n_lat * sizeof *all);
        n_all += callers[i].n_lat;
        warm += callers[i].warmup_calls;
        ok += callers[i].by_status[0];
        for (int s = 1; s < N_STATUS; s++)
            errors += callers[i].by_status[s];
    }
    qsort(all, n_all, sizeof *all, bench_cmp_u64);
    for (size_t i = 0; i < n_all; i++)
        sum_ms += (double)all[i] / 1e6;

    {
        double rate = (double)ok / g_o.seconds;
        double p50 = bench_pct_ms(all, n_all, 50), p90 = bench_pct_ms(all, n_all, 90);
        double p99 = bench_pct_ms(all, n_all, 99), mx = n_all ? (double)all[n_all - 1] / 1e6 : 0;
        double mean = n_all ? sum_ms / (double)n_all : 0;

        printf("GetProduct: %" PRIu64 " successful calls in %.1f s = %.0f calls/s "
               "(%" PRIu64 " failed; %" PRIu64 " outside the window not counted)\n",
               ok, g_o.seconds, rate, errors, warm);
        printf("latency ms: mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", mean, p50, p90,
               p99, mx);
        printf("errors: %" PRIu64 "%s\n", errors, errors ? " by status:" : "");
        for (int s = 1; s < N_STATUS; s++) {
            uint64_t n = 0;
            const char *msg = "";
            for (int i = 0; i < g_o.threads; i++) {
                n += callers[i].by_status[s];
                if (callers[i].last_error[s][0] != '\0')
                    msg = callers[i].last_error[s];
            }
            if (n > 0)
                printf("  %-20s %" PRIu64 "  (e.g. \"%s\")\n", svc_grpc_code_name(s), n, msg);
        }
        printf("RESULT calls_per_s=%.0f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f "
               "errors=%" PRIu64 " threads=%d seconds=%.1f\n",
               rate, p50, p90, p99, mx, errors, g_o.threads, g_o.seconds);
    }

    free(all);
}

int main(int argc, char **argv)
{
    caller_t *callers;

    parse_args(argc, argv);
    grpc_init();
    g_ch = rpc_channel_new(g_o.target, NULL);
    if (g_ch == NULL)
        die("cannot create a channel to %s", g_o.target);

    callers = calloc((size_t)g_o.threads, sizeof *callers);
    if (callers == NULL)
        die("out of memory");
    for (int i = 0; i < g_o.threads; i++) {
        callers[i].index = i;
        callers[i].rng = 0x9E3779B97F4A7C15ull ^ (svc_now_ns() * 2654435761u + (uint64_t)i * 7919);
        if (callers[i].rng == 0)
            callers[i].rng = 1;
    }

    if (fetch_ids() != 0)
        die("cannot list products at %s (is the catalog running there?)", g_o.target);
    if ((int)g_ids.n < g_o.ensure) {
        uint64_t t0 = svc_now_ns();
        int want = g_o.ensure - (int)g_ids.n;

        atomic_store(&g_to_create, want);
        for (int i = 0; i < g_o.threads; i++)
            pthread_create(&callers[i].thread, NULL, seed_main, &callers[i]);
        for (int i = 0; i < g_o.threads; i++)
            pthread_join(callers[i].thread, NULL);
        printf("seeded %d products with CreateProduct in %.2f s (%d errors)\n", want,
               (double)(svc_now_ns() - t0) / 1e9, atomic_load(&g_create_errors));
    }
    if (g_ids.n == 0)
        die("no products to read: seed some (--ensure N)");

    printf("target %s, %d callers on one channel (%s), %zu product ids, warm-up %.1f s, "
           "measured %.1f s, deadline %d ms\n",
           g_o.target, g_o.threads, g_o.async ? "async: 1 thread, N calls in flight" : "N threads",
           g_ids.n, g_o.warmup, g_o.seconds, g_o.deadline_ms);
    fflush(stdout);

    if (g_o.async) {
        g_measure_start_ns = svc_now_ns() + (uint64_t)(g_o.warmup * 1e9);
        g_measure_end_ns = g_measure_start_ns + (uint64_t)(g_o.seconds * 1e9);
        run_async(callers);
    } else {
        pthread_barrier_init(&g_barrier, NULL, (unsigned)g_o.threads + 1);
        for (int i = 0; i < g_o.threads; i++)
            if (pthread_create(&callers[i].thread, NULL, caller_main, &callers[i]) != 0)
                die("cannot create threads");
        g_measure_start_ns = svc_now_ns() + (uint64_t)(g_o.warmup * 1e9);
        g_measure_end_ns = g_measure_start_ns + (uint64_t)(g_o.seconds * 1e9);
        pthread_barrier_wait(&g_barrier);
        for (int i = 0; i < g_o.threads; i++)
            pthread_join(callers[i].thread, NULL);
    }

    report(callers);
    for (int i = 0; i < g_o.threads; i++)
        free(callers[i].lat);
    free(callers);
    for (size_t i = 0; i < g_ids.n; i++)
        free(g_ids.ids[i]);
    free(g_ids.ids);
    grpc_channel_destroy(g_ch);
    grpc_shutdown();
    return 0;
}
