/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_http.c - a closed-loop HTTP load generator for the gateway's
 * POST /v1/orders (CreateOrder), on libcurl's multi interface.
 *
 * One thread keeps --connections requests in flight on as many keep-alive
 * connections (HTTP/1.1, one request per connection at a time): when a
 * response arrives, the next request goes out at once. Each request is a
 * CreateOrder of --items distinct products drawn at random from the products
 * the catalog has; the ids are read first with GET /v1/products, and when
 * fewer than --ensure exist the missing ones are created with
 * POST /v1/products.
 *
 *   bench_http --url http://HOST:PORT [--connections N] [--seconds D]
 *              [--warmup S] [--timeout-ms MS] [--items K] [--ensure N]
 *              [--seed-only] [--idempotency-keys] [--ids-out FILE]
 *              [--customer ID] [--header "Name: value"]...
 *
 * The gateway checks a bearer token on every call (docs/gateway.md): give it
 * with --header "Authorization: Bearer TOKEN" (bench/lib.sh's bench_auth; every
 * --header goes on every request, set-up included). Each order names
 * --customer (default none: the token's subject places it for itself).
 *
 * A response counts as a success when it is HTTP 200 with a JSON body that has
 * an "id" and "status":"ORDER_STATUS_PENDING". Throughput and latency count the
 * successes that started after the warm-up and ended inside the measured
 * window; every response is also counted by HTTP status (0 = no response, by
 * libcurl error), for the window and for the whole run (warm-up and the
 * requests still in flight at the end included: the run waits for them), so a
 * script can check the database against the exact number of orders made.
 * --ids-out writes the id of every successful order, one per line.
 * Last line: "RESULT orders_per_s=... p50_ms=... ok_total=... ..." for scripts.
 * Exit status 0 when the run completed (failed requests are reported, not
 * fatal), 1 when it could not start (gateway unreachable, too few products),
 * 2 for bad usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include "bench_pct.h"
#include "bench_util.h"

#define MAX_CONNS   4096
#define N_HTTP      600         /* HTTP statuses 0..599; 0 = no response */
#define N_CURL      128         /* CURLcode values counted separately */
#define RESP_MAX    (64 * 1024) /* response bytes kept per request */
#define SAMPLE_LEN  160
#define BAD_BODY    1  /* pseudo-status: 200 whose body is not an order */
#define MAX_HEADERS 16 /* --header options */

typedef struct opts {
    const char *url; /* base, e.g. http://127.0.0.1:8080 */
    int conns;
    double seconds;
    double warmup;
    long timeout_ms;
    int items;
    int ensure;
    bool seed_only;
    bool idem;
    const char *ids_out;
    const char *customer; /* NULL: no customerId, the token's subject */
} opts_t;

typedef struct buf {
    char *p;
    size_t len, cap;
} buf_t;

typedef struct conn {
    int index;
    CURL *h;
    uint64_t rng;
    uint64_t t0;
    uint64_t seq;
    char body[8192];
    buf_t resp;
    struct curl_slist *hdrs; /* own list only with --idempotency-keys */
} conn_t;

/* Counters for one scope: the measured window or the whole run. */
typedef struct counts {
    uint64_t requests;
    uint64_t by_http[N_HTTP]; /* [0] no response, [BAD_BODY] 200 with a bad body */
    uint64_t by_curl[N_CURL];
    char sample_http[N_HTTP][SAMPLE_LEN];
    char sample_curl[N_CURL][SAMPLE_LEN];
} counts_t;

static opts_t g_o;
static char **g_ids;
static size_t g_n_ids, g_cap_ids;
static uint64_t g_start_ns, g_end_ns;
static counts_t g_win, g_all;
static uint64_t *g_lat;
static size_t g_n_lat, g_cap_lat;
static uint64_t g_conns_total, g_conns_window;
static FILE *g_ids_file;
static struct curl_slist *g_hdrs;
static const char *g_headers[MAX_HEADERS]; /* --header, on every request */
static int g_n_headers;
static uint64_t g_run_id;

#define die(...) bench_die("bench_http", __VA_ARGS__)

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return *s = x;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);

    if (q == NULL)
        die("out of memory");
    return q;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    buf_t *b = arg;
    size_t len = size * n, keep = len;

    if (b->len + keep > RESP_MAX)
        keep = b->len < RESP_MAX ? RESP_MAX - b->len : 0;
    if (keep > 0) {
        if (b->len + keep + 1 > b->cap) {
            b->cap = b->len + keep + 1 > 2 * b->cap ? b->len + keep + 1 : 2 * b->cap;
            b->p = xrealloc(b->p, b->cap);
        }
        memcpy(b->p + b->len, data, keep);
        b->len += keep;
        b->p[b->len] = '\0';
    }
    return len;
}

static void buf_reset(buf_t *b)
{
    b->len = 0;
    if (b->p != NULL)
        b->p[0] = '\0';
}

/*
 * The string value of the next "key":"..." after *from in a JSON text (ours:
 * compact pbj_encode output), unescaped into out; *from moves past it. Inside
 * a JSON string a quote is always escaped, so "key":" can only be a key.
 */
static bool json_next_string(const char **from, const char *key, char *out, size_t out_len)
{
    char pat[64];
    const char *p;
    size_t n = 0;

    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    p = strstr(*from, pat);
    if (p == NULL)
        return false;
    for (p += strlen(pat); *p != '\0' && *p != '"'; p++) {
        if (*p == '\\' && p[1] != '\0')
            p++; /* \" \\ \/: the next character itself (no \u in our ids and tokens) */
        if (n + 1 < out_len)
            out[n++] = *p;
    }
    if (*p != '"')
        return false;
    out[n] = '\0';
    *from = p + 1;
    return true;
}

static void ids_add(const char *id)
{
    if (g_n_ids == g_cap_ids) {
        g_cap_ids = g_cap_ids ? 2 * g_cap_ids : 1024;
        g_ids = xrealloc(g_ids, g_cap_ids * sizeof *g_ids);
    }
    g_ids[g_n_ids] = strdup(id);
    if (g_ids[g_n_ids] == NULL)
        die("out of memory");
    g_n_ids++;
}

/* One blocking request on h (keep-alive between calls); returns the HTTP status. */
static long easy_request(CURL *h, const char *url, const char *post, buf_t *resp)
{
    long code = 0;
    CURLcode rc;

    buf_reset(resp);
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (post != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, post);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(post));
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
        fprintf(stderr, "bench_http: %s %s: %s\n", post ? "POST" : "GET", url,
                curl_easy_strerror(rc));
        return 0;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

static CURL *easy_new(buf_t *resp, long timeout_ms)
{
    CURL *h = curl_easy_init();

    if (h == NULL)
        die("curl_easy_init failed");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, g_hdrs);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    return h;
}

/* Reads the product ids (GET /v1/products, pages of 200), creates the missing
 * ones up to --ensure (POST /v1/products). */
static void load_products(void)
{
    buf_t resp = {0};
    CURL *h = easy_new(&resp, 30000); /* set-up: not --timeout-ms */
    char url[2048], token[1024] = "", id[128];
    size_t existed;
    int created = 0, failed = 0;
    uint64_t t0, rng = bench_now_ns() | 1;

    do {
        char *esc = curl_easy_escape(h, token, 0);
        long code;
        const char *p;

        snprintf(url, sizeof url, "%s/v1/products?page_size=200&page_token=%s", g_o.url,
                 esc ? esc : "");
        curl_free(esc);
        code = easy_request(h, url, NULL, &resp);
        if (code != 200)
            die("GET /v1/products answered %ld: %.200s (is the gateway at %s, with the catalog "
                "behind it?)",
                code, resp.p ? resp.p : "", g_o.url);
        for (p = resp.p; json_next_string(&p, "id", id, sizeof id);)
            ids_add(id);
        p = resp.p;
        if (!json_next_string(&p, "nextPageToken", token, sizeof token))
            token[0] = '\0';
    } while (token[0] != '\0');
    existed = g_n_ids;

    t0 = bench_now_ns();
    snprintf(url, sizeof url, "%s/v1/products", g_o.url);
    while ((int)g_n_ids < g_o.ensure) {
        char body[512];
        const char *p;
        long code;

        snprintf(body, sizeof body,
                 "{\"name\":\"bench product %zu-%" PRIu64 "\",\"description\":\"created by "
                 "bench_http\",\"priceCents\":\"%" PRIu64 "\",\"stock\":%" PRIu64 "}",
                 g_n_ids, xorshift(&rng) % 1000000, 100 + xorshift(&rng) % 99900,
                 xorshift(&rng) % 1000);
        code = easy_request(h, url, body, &resp);
        p = resp.p ? resp.p : "";
        if (code != 200 || !json_next_string(&p, "id", id, sizeof id)) {
            if (failed++ == 0)
                fprintf(stderr, "bench_http: POST /v1/products answered %ld: %.200s\n", code,
                        resp.p ? resp.p : "");
            if (failed > 100)
                die("too many failed CreateProduct calls");
            continue;
        }
        ids_add(id);
        created++;
    }
    if (created > 0 || failed > 0)
        printf("seeded %d products with POST /v1/products in %.2f s (%d errors)\n", created,
               (double)(bench_now_ns() - t0) / 1e9, failed);
    printf("products: %zu existed, %zu now\n", existed, g_n_ids);
    curl_easy_cleanup(h);
    free(resp.p);
}

static void conn_start(conn_t *c, CURLM *m)
{
    char *b = c->body;
    size_t cap = sizeof c->body, n;
    size_t pick[100];

    /* --items distinct products: merging would turn them into fewer lines. */
    if (g_o.customer != NULL)
        n = (size_t)snprintf(b, cap, "{\"customerId\":\"%s\",\"items\":[", g_o.customer);
    else
        n = (size_t)snprintf(b, cap, "{\"items\":[");
    for (int i = 0; i < g_o.items; i++) {
        size_t k;
        bool dup;

        do {
            k = (size_t)(xorshift(&c->rng) % g_n_ids);
            dup = false;
            for (int j = 0; j < i; j++)
                dup |= pick[j] == k;
        } while (dup);
        pick[i] = k;
        n += (size_t)snprintf(b + n, cap - n, "%s{\"productId\":\"%s\",\"quantity\":%d}",
                              i ? "," : "", g_ids[k], 1 + (int)(xorshift(&c->rng) % 3));
        if (n >= cap)
            die("request body too long");
    }
    n += (size_t)snprintf(b + n, cap - n, "]}");
    if (n >= cap)
        die("request body too long");

    if (g_o.idem) {
        char hdr[128];

        curl_slist_free_all(c->hdrs);
        c->hdrs = NULL;
        for (struct curl_slist *s = g_hdrs; s != NULL; s = s->next)
            c->hdrs = curl_slist_append(c->hdrs, s->data);
        snprintf(hdr, sizeof hdr, "Idempotency-Key: bench-%" PRIx64 "-%d-%" PRIu64, g_run_id,
                 c->index, c->seq);
        c->hdrs = curl_slist_append(c->hdrs, hdr);
        if (c->hdrs == NULL)
            die("out of memory");
        curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hdrs);
    }
    c->seq++;
    buf_reset(&c->resp);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, c->body);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE, (long)n);
    c->t0 = bench_now_ns();
    if (curl_multi_add_handle(m, c->h) != CURLM_OK)
        die("curl_multi_add_handle failed");
}

/* Keeps the first SAMPLE_LEN - 1 bytes of src on one line. */
static void sample_set(char *dst, const char *src)
{
    size_t i;

    for (i = 0; i + 1 < SAMPLE_LEN && src[i] != '\0'; i++)
        dst[i] = (unsigned char)src[i] < 0x20 ? ' ' : src[i];
    dst[i] = '\0';
}

static void count(counts_t *k, long code, CURLcode rc, const char *sample)
{
    k->requests++;
    if (code < 0 || code >= N_HTTP)
        code = 0;
    k->by_http[code]++;
    if (code == 0) {
        int r = (int)rc < N_CURL ? (int)rc : N_CURL - 1;
        k->by_curl[r]++;
        sample_set(k->sample_curl[r], sample);
    } else if (code != 200) {
        sample_set(k->sample_http[code], sample);
    }
}

static void conn_done(conn_t *c, CURLcode rc)
{
    uint64_t t1 = bench_now_ns();
    long code = 0, nconn = 0;
    bool in_window = c->t0 >= g_start_ns && t1 <= g_end_ns;
    const char *sample = c->resp.p ? c->resp.p : "";
    char id[128] = "", status[64] = "";

    if (rc == CURLE_OK)
        curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &code);
    else
        sample = curl_easy_strerror(rc);
    curl_easy_getinfo(c->h, CURLINFO_NUM_CONNECTS, &nconn);
    g_conns_total += (uint64_t)nconn;
    if (c->t0 >= g_start_ns && c->t0 <= g_end_ns)
        g_conns_window += (uint64_t)nconn;

    if (code == 200) {
        const char *p = sample, *q = sample;
        if (!json_next_string(&p, "id", id, sizeof id) || strlen(id) != 36 ||
            !json_next_string(&q, "status", status, sizeof status) ||
            strcmp(status, "ORDER_STATUS_PENDING") != 0)
            code = BAD_BODY;
    }
    if (code == 200 && g_ids_file != NULL)
        fprintf(g_ids_file, "%s\n", id);
    count(&g_all, code, rc, sample);
    if (!in_window)
        return;
    count(&g_win, code, rc, sample);
    if (code == 200) {
        if (g_n_lat == g_cap_lat) {
            g_cap_lat = g_cap_lat ? 2 * g_cap_lat : 65536;
            g_lat = xrealloc(g_lat, g_cap_lat * sizeof *g_lat);
        }
        g_lat[g_n_lat++] = t1 - c->t0;
    }
}

static void run(void)
{
    CURLM *m = curl_multi_init();
    conn_t *cs = calloc((size_t)g_o.conns, sizeof *cs);
    int active = g_o.conns, running;

    if (m == NULL || cs == NULL)
        die("cannot set up libcurl multi");
    /* Never more than one connection per client: a request waits for a free one. */
    curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)g_o.conns);
    curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)g_o.conns);
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)g_o.conns);
    curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
    {
        char url[1024];
        snprintf(url, sizeof url, "%s/v1/orders", g_o.url);
        for (int i = 0; i < g_o.conns; i++) {
            cs[i].index = i;
            cs[i].rng =
                (0x9E3779B97F4A7C15ull ^ (bench_now_ns() * 2654435761u + (uint64_t)i * 7919)) | 1;
            cs[i].h = easy_new(&cs[i].resp, g_o.timeout_ms);
            curl_easy_setopt(cs[i].h, CURLOPT_URL, url);
            curl_easy_setopt(cs[i].h, CURLOPT_PRIVATE, &cs[i]);
        }
    }
    g_start_ns = bench_now_ns() + (uint64_t)(g_o.warmup * 1e9);
    g_end_ns = g_start_ns + (uint64_t)(g_o.seconds * 1e9);
    for (int i = 0; i < g_o.conns; i++)
        conn_start(&cs[i], m);

    while (active > 0) {
        CURLMsg *msg;
        int left;
        bool restarted = false;

        if (curl_multi_perform(m, &running) != CURLM_OK)
            die("curl_multi_perform failed");
        while ((msg = curl_multi_info_read(m, &left)) != NULL) {
            conn_t *c;
            char *priv = NULL;

            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
            c = (conn_t *)(void *)priv;
            conn_done(c, msg->data.result);
            curl_multi_remove_handle(m, c->h);
            if (bench_now_ns() < g_end_ns) {
                conn_start(c, m);
                restarted = true;
            } else {
                active--;
            }
        }
        if (active > 0 && !restarted)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    for (int i = 0; i < g_o.conns; i++) {
        curl_easy_cleanup(cs[i].h);
        curl_slist_free_all(cs[i].hdrs);
        free(cs[i].resp.p);
    }
    curl_multi_cleanup(m);
    free(cs);
}

static uint64_t failures(const counts_t *k)
{
    return k->requests - k->by_http[200];
}

static void print_counts(const counts_t *k, const char *indent)
{
    for (int s = 0; s < N_HTTP; s++) {
        if (s == 200 || k->by_http[s] == 0)
            continue;
        if (s == 0) {
            for (int r = 0; r < N_CURL; r++)
                if (k->by_curl[r] > 0)
                    printf("%sno response (curl %d)  %" PRIu64 "  (e.g. \"%s\")\n", indent, r,
                           k->by_curl[r], k->sample_curl[r]);
        } else if (s == BAD_BODY) {
            printf("%s200 but not an order  %" PRIu64 "  (e.g. \"%s\")\n", indent, k->by_http[s],
                   k->sample_http[s]);
        } else {
            printf("%sHTTP %d  %" PRIu64 "  (e.g. %s)\n", indent, s, k->by_http[s],
                   k->sample_http[s]);
        }
    }
}

/* "503:12,504:3,curl28:1" (or "none"): the failures by status, for RESULT. */
static void status_list(const counts_t *k, char *out, size_t len)
{
    size_t n = 0;

    out[0] = '\0';
    for (int s = 0; s < N_HTTP; s++) {
        if (s == 200 || s == 0 || k->by_http[s] == 0)
            continue;
        n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%s%d:%" PRIu64, n ? "," : "",
                              s == BAD_BODY ? "bad" : "", s == BAD_BODY ? 200 : s, k->by_http[s]);
    }
    for (int r = 0; r < N_CURL; r++)
        if (k->by_curl[r] > 0)
            n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%scurl%d:%" PRIu64, n ? "," : "",
                                  r, k->by_curl[r]);
    if (n == 0)
        snprintf(out, len, "none");
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_http --url http://HOST:PORT [--connections N] [--seconds D]\n"
            "                  [--warmup S] [--timeout-ms MS] [--items K] [--ensure N]\n"
            "                  [--seed-only] [--idempotency-keys] [--ids-out FILE]\n"
            "                  [--customer ID] [--header \"Name: value\"]...\n"
            "  --url               the gateway (default http://127.0.0.1:8080)\n"
            "  --connections       keep-alive connections = requests in flight (default 16)\n"
            "  --seconds           measured duration (default 10)\n"
            "  --warmup            unmeasured load before it (default 1)\n"
            "  --timeout-ms        per-request limit in libcurl (default 15000)\n"
            "  --items             distinct products per order (default 2)\n"
            "  --ensure            create products with POST /v1/products until N exist\n"
            "  --seed-only         read/create the products, then exit\n"
            "  --idempotency-keys  send a fresh Idempotency-Key with every request\n"
            "  --ids-out           write the id of every successful order to FILE\n"
            "  --customer          the customerId of every order (default none: the token's\n"
            "                      subject)\n"
            "  --header            an extra request header, e.g. \"Authorization: Bearer TOKEN\"\n"
            "                      (repeatable, at most %d)\n",
            MAX_HEADERS);
}

static long parse_long(const char *s, const char *what, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "bench_http: bad %s '%s' (%ld..%ld)\n", what, s, lo, hi);
        exit(2);
    }
    return v;
}

static double parse_double(const char *s, const char *what, double lo, double hi)
{
    char *end;
    double v = strtod(s, &end);

    if (*s == '\0' || *end != '\0' || !(v >= lo && v <= hi)) {
        fprintf(stderr, "bench_http: bad %s '%s'\n", what, s);
        exit(2);
    }
    return v;
}

static void parse_args(int argc, char **argv)
{
    static const struct option longopts[] = {{"url", required_argument, NULL, 'u'},
                                             {"connections", required_argument, NULL, 'c'},
                                             {"seconds", required_argument, NULL, 'd'},
                                             {"warmup", required_argument, NULL, 'w'},
                                             {"timeout-ms", required_argument, NULL, 'T'},
                                             {"items", required_argument, NULL, 'i'},
                                             {"ensure", required_argument, NULL, 'e'},
                                             {"seed-only", no_argument, NULL, 's'},
                                             {"idempotency-keys", no_argument, NULL, 'k'},
                                             {"ids-out", required_argument, NULL, 'o'},
                                             {"customer", required_argument, NULL, 'C'},
                                             {"header", required_argument, NULL, 'H'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int ch;

    g_o = (opts_t){"http://127.0.0.1:8080", 16, 10, 1, 15000, 2, 0, false, false, NULL, NULL};
    while ((ch = getopt_long(argc, argv, "u:c:d:w:T:i:e:sko:C:H:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            g_o.url = optarg;
            break;
        case 'c':
            g_o.conns = (int)parse_long(optarg, "connection count", 1, MAX_CONNS);
            break;
        case 'd':
            g_o.seconds = parse_double(optarg, "duration", 0.1, 86400);
            break;
        case 'w':
            g_o.warmup = parse_double(optarg, "warm-up", 0, 3600);
            break;
        case 'T':
            g_o.timeout_ms = parse_long(optarg, "timeout", 1, 3600000);
            break;
        case 'i':
            g_o.items = (int)parse_long(optarg, "item count", 1, 100);
            break;
        case 'e':
            g_o.ensure = (int)parse_long(optarg, "product count", 0, 10000000);
            break;
        case 's':
            g_o.seed_only = true;
            break;
        case 'k':
            g_o.idem = true;
            break;
        case 'o':
            g_o.ids_out = optarg;
            break;
        case 'C':
            if (*optarg == '\0' || strlen(optarg) > 100 || strpbrk(optarg, "\"\\") != NULL)
                die("bad --customer '%s' (1..100 characters, no quote or backslash)", optarg);
            g_o.customer = optarg;
            break;
        case 'H':
            if (g_n_headers == MAX_HEADERS)
                die("at most %d --header options", MAX_HEADERS);
            if (strchr(optarg, ':') == NULL || strpbrk(optarg, "\r\n") != NULL)
                die("bad --header '%.40s' (want \"Name: value\", one line)", optarg);
            g_headers[g_n_headers++] = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (optind < argc) {
        usage(stderr);
        exit(2);
    }
    {
        size_t n = strlen(g_o.url);
        static char url[1024];
        if (n == 0 || n >= sizeof url)
            die("bad --url");
        memcpy(url, g_o.url, n + 1);
        while (n > 0 && url[n - 1] == '/')
            url[--n] = '\0';
        g_o.url = url;
    }
}

int main(int argc, char **argv)
{
    char list[512];
    double rate, sum_ms = 0;

    parse_args(argc, argv);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        die("curl_global_init failed");
    g_hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    g_hdrs = curl_slist_append(g_hdrs, "Expect:");
    for (int i = 0; i < g_n_headers; i++)
        g_hdrs = curl_slist_append(g_hdrs, g_headers[i]);
    if (g_hdrs == NULL)
        die("out of memory");
    g_run_id = bench_now_ns() ^ ((uint64_t)time(NULL) << 20);

    load_products();
    if (g_o.seed_only)
        return 0;
    if (g_n_ids < (size_t)g_o.items)
        die("%zu products, but %d distinct products per order: seed more (--ensure N)", g_n_ids,
            g_o.items);
    if (g_o.ids_out != NULL && (g_ids_file = fopen(g_o.ids_out, "w")) == NULL)
        die("cannot write %s", g_o.ids_out);

    printf("target %s/v1/orders, %d keep-alive connections (1 thread, libcurl multi, one request "
           "in flight each), %zu product ids, %d items per order%s, customer %s, %d extra "
           "header(s), warm-up %.1f s, measured %.1f s, timeout %ld ms\n",
           g_o.url, g_o.conns, g_n_ids, g_o.items, g_o.idem ? ", an Idempotency-Key each" : "",
           g_o.customer ? g_o.customer : "(none: the token's subject)", g_n_headers, g_o.warmup,
           g_o.seconds, g_o.timeout_ms);
    fflush(stdout);
    run();
    if (g_ids_file != NULL && fclose(g_ids_file) != 0)
        die("cannot write %s", g_o.ids_out);

    qsort(g_lat, g_n_lat, sizeof *g_lat, bench_cmp_u64);
    for (size_t i = 0; i < g_n_lat; i++)
        sum_ms += (double)g_lat[i] / 1e6;
    rate = (double)g_n_lat / g_o.seconds;
    {
        double p50 = bench_pct_ms(g_lat, g_n_lat, 50), p90 = bench_pct_ms(g_lat, g_n_lat, 90);
        double p99 = bench_pct_ms(g_lat, g_n_lat, 99),
               mx = g_n_lat ? (double)g_lat[g_n_lat - 1] / 1e6 : 0;
        double mean = g_n_lat ? sum_ms / (double)g_n_lat : 0;
        char all_list[512];

        printf("CreateOrder: %zu successful in %.1f s = %.0f orders/s (%" PRIu64 " failed; %" PRIu64
               " outside the window not counted)\n",
               g_n_lat, g_o.seconds, rate, failures(&g_win), g_all.requests - g_win.requests);
        printf("latency ms: mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", mean, p50, p90,
               p99, mx);
        printf("failed in the window: %" PRIu64 "%s\n", failures(&g_win),
               failures(&g_win) ? ", by HTTP status:" : "");
        print_counts(&g_win, "  ");
        printf("whole run (warm-up and drain included): %" PRIu64 " requests, %" PRIu64
               " HTTP 200 orders, %" PRIu64 " failed%s\n",
               g_all.requests, g_all.by_http[200], failures(&g_all), failures(&g_all) ? ":" : "");
        print_counts(&g_all, "  ");
        printf("connections opened: %" PRIu64 " in total, %" PRIu64
               " by requests of the measured window\n",
               g_conns_total, g_conns_window);
        status_list(&g_win, list, sizeof list);
        status_list(&g_all, all_list, sizeof all_list);
        printf("RESULT orders_per_s=%.0f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f "
               "errors=%" PRIu64 " failed_by_status=%s ok_total=%" PRIu64 " requests_total=%" PRIu64
               " no_response_total=%" PRIu64
               " failed_total_by_status=%s connections_opened=%" PRIu64
               " connections_opened_in_window=%" PRIu64 " connections=%d items=%d seconds=%.1f\n",
               rate, p50, p90, p99, mx, failures(&g_win), list, g_all.by_http[200], g_all.requests,
               g_all.by_http[0], all_list, g_conns_total, g_conns_window, g_o.conns, g_o.items,
               g_o.seconds);
    }
    for (size_t i = 0; i < g_n_ids; i++)
        free(g_ids[i]);
    free(g_ids);
    free(g_lat);
    curl_slist_free_all(g_hdrs);
    curl_global_cleanup();
    return 0;
}
