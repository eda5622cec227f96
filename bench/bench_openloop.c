/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_openloop.c - an open-loop HTTP/1.1 load generator: request k is due
 * at start + k / --rate whatever the earlier answers do, and its latency runs
 * from when it was DUE to when its answer was read.
 *
 * Why not wrk: wrk is closed-loop. Each connection sends its next request
 * only after the previous answer, so when the server stalls the client stops
 * sending too, the stall is recorded once instead of for every request that
 * would have arrived meanwhile ("coordinated omission"), and the rate is
 * whatever the machine can do. To ask "what is p99 at 25,000 requests/s"
 * the rate has to be held and the waiting counted; this does both.
 *
 *   bench_openloop --url http://HOST:PORT --rate R [--seconds D] [--warmup S]
 *                  [--connections N] [--method M] [--path P] [--body-env VAR]
 *                  [--timeout-ms MS] [--header "Name: value"]...
 *
 * Every --header goes on every request: the gateway's bearer token is
 * --header "Authorization: Bearer TOKEN" (bench/lib.sh's bench_auth).
 *
 * One thread, one epoll set, --connections keep-alive connections (default
 * 64), each with at most one request outstanding. A request that is due while
 * every connection is busy waits for the next free one; that wait is in its
 * latency (and in lag_max_ms, how late the latest send was). Only requests due
 * inside the measured window (after --warmup, default 1 s, for --seconds,
 * default 10) are counted. A response needs a Content-Length (h2o sends one
 * for every answer this project makes); anything else, a closed connection or
 * --timeout-ms (default 2000) after its send without an answer counts as an
 * error, and the connection is opened again (when that fails the run ends,
 * exit 1: the server is gone); a request still unsent
 * --timeout-ms after it was due is given up (unsent, counted as a timeout).
 *
 * Output, the same lines as bench/wrk/create_order.lua so the scripts read
 * both alike:
 *   RESULT requests=N seconds=S rps=R p50_ms=.. p90_ms=.. p99_ms=.. p999_ms=..
 *          max_ms=.. rate=R lag_max_ms=.. late_1ms=N errors=N timeouts=N unsent=N
 *   STATUS <code> <count>       responses by HTTP status
 *   CHECK retry_after <count>   responses with a Retry-After header
 *   CHECK status_body <count>   bodies that are a google.rpc.Status
 * rps is the measured responses over the time from the first one's due time
 * to the last one's answer: below --rate when the server (or this client)
 * could not keep up. Exit 0 when the run completed, 1 when it could not start,
 * 2 for bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_pct.h"
#include "bench_util.h"

#define MAX_CONNS   1024
#define MAX_HEADERS 16
#define RESP_MAX                                                                                   \
    (512 * 1024) /* one answer's bytes: most are a few hundred, a page of
                  * 200 products with descriptions about 250 kB */
#define N_HTTP 600

typedef struct opts {
    char host[256], port[16];
    double rate, seconds, warmup;
    int conns;
    long timeout_ms;
    const char *method, *path, *body;
    const char *headers[MAX_HEADERS]; /* --header */
    int n_headers;
} opts_t;

typedef struct conn {
    int fd;
    bool busy;
    uint64_t k; /* the index of the request it carries */
    uint64_t sent_ns;
    size_t len; /* bytes read of the answer so far */
    char buf[RESP_MAX];
} conn_t;

typedef struct run {
    opts_t o;
    char *req;
    size_t req_len;
    int ep;
    conn_t *conns;
    int *idle, n_idle; /* a stack of idle connection indexes */
    uint64_t start_ns, total, next_k, done, first_k, end_k;
    uint64_t *lat; /* measured latencies, ns */
    size_t n_lat;
    uint64_t last_answer_ns, lag_max_ns, late_1ms, errors, timeouts, unsent;
    uint64_t by_status[N_HTTP], retry_after, status_body;
} run_t;

#define die(...) bench_die("bench_openloop", __VA_ARGS__)

/* When request k is due. */
static uint64_t due_ns(const run_t *r, uint64_t k)
{
    return r->start_ns + (uint64_t)((double)k * 1e9 / r->o.rate);
}

static bool measured(const run_t *r, uint64_t k)
{
    return k >= r->first_k && k < r->end_k;
}

static void conn_open(run_t *r, conn_t *c)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    int one = 1, rc = getaddrinfo(r->o.host, r->o.port, &hints, &ai);

    if (rc != 0)
        die("%s:%s: %s", r->o.host, r->o.port, gai_strerror(rc));
    c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0)
        die("connect to %s:%s: %s", r->o.host, r->o.port, strerror(errno));
    freeaddrinfo(ai);
    /* Connected blocking (loopback: at once), then non-blocking for the loop. */
    if (fcntl(c->fd, F_SETFL, O_NONBLOCK) != 0 ||
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        die("socket options: %s", strerror(errno));
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(r->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
        die("epoll_ctl: %s", strerror(errno));
    c->busy = false;
    c->len = 0;
    r->idle[r->n_idle++] = (int)(c - r->conns);
}

/* The request c carried is over (answered or failed): c is idle again. */
static void conn_release(run_t *r, conn_t *c)
{
    c->busy = false;
    c->len = 0;
    r->done++;
    r->idle[r->n_idle++] = (int)(c - r->conns);
}

/* c's request failed (closed, timed out, unreadable): counted, and c opened anew. */
static void conn_fail(run_t *r, conn_t *c, bool timeout)
{
    bool was_busy = c->busy;

    if (was_busy && measured(r, c->k))
        timeout ? r->timeouts++ : r->errors++;
    close(c->fd); /* also leaves the epoll set */
    for (int i = 0; i < r->n_idle; i++)
        if (r->idle[i] == (int)(c - r->conns))
            r->idle[i] = r->idle[--r->n_idle];
    if (was_busy)
        r->done++;
    conn_open(r, c);
}

static void send_next(run_t *r, uint64_t now)
{
    conn_t *c = &r->conns[r->idle[--r->n_idle]];
    uint64_t lag = now - due_ns(r, r->next_k);

    c->busy = true;
    c->k = r->next_k++;
    c->sent_ns = now;
    c->len = 0;
    if (lag > r->lag_max_ns)
        r->lag_max_ns = lag;
    if (lag > 1000000)
        r->late_1ms++;
    /* A few hundred bytes into an empty loopback socket buffer go in one write. */
    if (write(c->fd, r->req, r->req_len) != (ssize_t)r->req_len)
        conn_fail(r, c, false);
}

/* The header's value when the line at p (ending at eol) is "name: value", else NULL. */
static const char *header_value(const char *p, const char *eol, const char *name)
{
    size_t n = strlen(name);

    if ((size_t)(eol - p) <= n || strncasecmp(p, name, n) != 0 || p[n] != ':')
        return NULL;
    for (p += n + 1; p < eol && *p == ' '; p++)
        ;
    return p;
}

/* Mirrors create_order.lua's '^{"code":%d+,"message":".*","details":%[%]}$'. */
static bool is_status_body(const char *b, size_t n)
{
    static const char head[] = "{\"code\":", mid[] = ",\"message\":\"",
                      tail[] = "\",\"details\":[]}";
    size_t i = sizeof head - 1, digits;

    if (n < i || memcmp(b, head, i) != 0)
        return false;
    for (digits = 0; i < n && b[i] >= '0' && b[i] <= '9'; i++, digits++)
        ;
    if (digits == 0 || n - i < sizeof mid - 1 || memcmp(b + i, mid, sizeof mid - 1) != 0)
        return false;
    i += sizeof mid - 1;
    return n - i >= sizeof tail - 1 &&
           memcmp(b + n - (sizeof tail - 1), tail, sizeof tail - 1) == 0;
}

/*
 * Whether c's buffer holds a whole answer; if so it is counted. Returns -1
 * for an answer this client cannot read (no Content-Length, too long).
 */
static int try_answer(run_t *r, conn_t *c, uint64_t now)
{
    char *end = memmem(c->buf, c->len, "\r\n\r\n", 4), *p, *eol;
    long clen = -1, status;
    bool ra = false;

    if (end == NULL)
        return c->len == RESP_MAX ? -1 : 0;
    if (c->len < 12 || memcmp(c->buf, "HTTP/1.", 7) != 0)
        return -1;
    status = strtol(c->buf + 9, NULL, 10);
    /* The status line ends inside [buf, end + 2): end may be its own \r\n. */
    for (p = (char *)memchr(c->buf, '\n', (size_t)(end + 2 - c->buf)) + 1; p < end; p = eol + 2) {
        const char *v;
        eol = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
        if ((v = header_value(p, eol, "content-length")) != NULL)
            clen = strtol(v, NULL, 10);
        ra |= header_value(p, eol, "retry-after") != NULL;
    }
    size_t head = (size_t)(end + 4 - c->buf);
    if (clen < 0 || status < 100 || status >= N_HTTP || head + (size_t)clen > RESP_MAX)
        return -1;
    if (c->len < head + (size_t)clen)
        return 0;
    if (measured(r, c->k)) {
        r->by_status[status]++;
        r->retry_after += ra;
        r->status_body += is_status_body(end + 4, (size_t)clen);
        r->lat[r->n_lat++] = now - due_ns(r, c->k);
        r->last_answer_ns = now;
    }
    return 1;
}

static void on_readable(run_t *r, conn_t *c)
{
    ssize_t n = read(c->fd, c->buf + c->len, RESP_MAX - c->len);
    int got;

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0 || !c->busy) { /* closed, failed, or bytes nobody asked for */
        conn_fail(r, c, false);
        return;
    }
    c->len += (size_t)n;
    got = try_answer(r, c, bench_now_ns());
    if (got < 0)
        conn_fail(r, c, false);
    else if (got > 0)
        conn_release(r, c);
}

static void check_timeouts(run_t *r, uint64_t now)
{
    for (int i = 0; i < r->o.conns; i++) {
        conn_t *c = &r->conns[i];
        if (c->busy && now - c->sent_ns > (uint64_t)r->o.timeout_ms * 1000000u)
            conn_fail(r, c, true);
    }
}

/*
 * Requests due longer than --timeout-ms ago that no connection was free to
 * send are given up (counted in unsent and as timeouts): an overloaded server
 * then ends the run in about its scheduled time instead of a backlog's.
 */
static void skip_stale(run_t *r, uint64_t now)
{
    uint64_t limit = (uint64_t)r->o.timeout_ms * 1000000u;

    while (r->next_k < r->total && now > due_ns(r, r->next_k) + limit) {
        if (measured(r, r->next_k))
            r->timeouts++, r->unsent++;
        r->next_k++;
        r->done++;
    }
}

/* The loop: send what is due on idle connections, read answers, until every request is over. */
static void run_load(run_t *r)
{
    struct epoll_event evs[64];
    uint64_t next_check = 0;

    r->start_ns = bench_now_ns();
    while (r->done < r->total) {
        uint64_t now = bench_now_ns(), wait = 100000000u; /* 100 ms when nothing is due */
        skip_stale(r, now);
        while (r->next_k < r->total && r->n_idle > 0 && due_ns(r, r->next_k) <= now)
            send_next(r, now);
        if (r->next_k < r->total && r->n_idle > 0)
            wait = due_ns(r, r->next_k) - now;
        struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000u),
                              .tv_nsec = (long)(wait % 1000000000u)};
        int n = epoll_pwait2(r->ep, evs, 64, &ts, NULL);
        if (n < 0 && errno != EINTR)
            die("epoll_pwait2: %s", strerror(errno));
        for (int i = 0; i < n; i++)
            on_readable(r, evs[i].data.ptr);
        if ((now = bench_now_ns()) >= next_check) {
            check_timeouts(r, now);
            next_check = now + 1000000u;
        }
    }
}

static void report(run_t *r)
{
    double secs = r->n_lat ? (double)(r->last_answer_ns - due_ns(r, r->first_k)) / 1e9 : 0;

    qsort(r->lat, r->n_lat, sizeof *r->lat, bench_cmp_u64);
    printf("RESULT requests=%zu seconds=%.2f rps=%.0f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f "
           "p999_ms=%.3f max_ms=%.3f rate=%.0f lag_max_ms=%.3f late_1ms=%" PRIu64 " errors=%" PRIu64
           " timeouts=%" PRIu64 " unsent=%" PRIu64 "\n",
           r->n_lat, secs, secs > 0 ? (double)r->n_lat / secs : 0,
           bench_pct_ms(r->lat, r->n_lat, 50), bench_pct_ms(r->lat, r->n_lat, 90),
           bench_pct_ms(r->lat, r->n_lat, 99), bench_pct_ms(r->lat, r->n_lat, 99.9),
           bench_pct_ms(r->lat, r->n_lat, 100), r->o.rate, (double)r->lag_max_ns / 1e6, r->late_1ms,
           r->errors, r->timeouts, r->unsent);
    for (int s = 0; s < N_HTTP; s++)
        if (r->by_status[s] > 0)
            printf("STATUS %d %" PRIu64 "\n", s, r->by_status[s]);
    printf("CHECK retry_after %" PRIu64 "\nCHECK status_body %" PRIu64 "\n", r->retry_after,
           r->status_body);
}

static void usage(FILE *f)
{
    fputs("usage: bench_openloop --url http://HOST:PORT --rate R [--seconds D] [--warmup S]\n"
          "                      [--connections N] [--method M] [--path P] [--body-env VAR]\n"
          "                      [--timeout-ms MS] [--header \"Name: value\"]...\n",
          f);
}

static double num(const char *s, const char *what, double lo, double hi)
{
    char *end;
    double v = strtod(s, &end);

    if (*end != '\0' || end == s || !(v >= lo && v <= hi)) {
        fprintf(stderr, "bench_openloop: %s must be %g..%g, not '%s'\n", what, lo, hi, s);
        exit(2);
    }
    return v;
}

static void parse_url(opts_t *o, const char *url)
{
    if (sscanf(url, "http://%255[^:/]:%15[0-9]", o->host, o->port) != 2) {
        fprintf(stderr, "bench_openloop: --url must be http://HOST:PORT, not '%s'\n", url);
        exit(2);
    }
}

static void parse_args(opts_t *o, int argc, char **argv)
{
    static const struct option longs[] = {
        {"url", 1, 0, 'u'},    {"rate", 1, 0, 'r'},        {"seconds", 1, 0, 's'},
        {"warmup", 1, 0, 'w'}, {"connections", 1, 0, 'c'}, {"method", 1, 0, 'm'},
        {"path", 1, 0, 'p'},   {"body-env", 1, 0, 'b'},    {"timeout-ms", 1, 0, 't'},
        {"header", 1, 0, 'H'}, {"help", 0, 0, 'h'},        {0, 0, 0, 0}};
    bool have_url = false;
    int ch;

    *o = (opts_t){
        .seconds = 10, .warmup = 1, .conns = 64, .timeout_ms = 2000, .method = "GET", .path = "/"};
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 'u':
            parse_url(o, optarg);
            have_url = true;
            break;
        case 'r':
            o->rate = num(optarg, "--rate", 1, 1e6);
            break;
        case 's':
            o->seconds = num(optarg, "--seconds", 0.1, 3600);
            break;
        case 'w':
            o->warmup = num(optarg, "--warmup", 0, 600);
            break;
        case 'c':
            o->conns = (int)num(optarg, "--connections", 1, MAX_CONNS);
            break;
        case 'm':
            o->method = optarg;
            break;
        case 'p':
            o->path = optarg;
            break;
        case 'b':
            if ((o->body = getenv(optarg)) == NULL) {
                fprintf(stderr, "bench_openloop: --body-env %s: not set\n", optarg);
                exit(2);
            }
            break;
        case 't':
            o->timeout_ms = (long)num(optarg, "--timeout-ms", 1, 600000);
            break;
        case 'H':
            if (o->n_headers == MAX_HEADERS || strchr(optarg, ':') == NULL ||
                strpbrk(optarg, "\r\n") != NULL) {
                fprintf(stderr,
                        "bench_openloop: --header wants \"Name: value\" on one line, at "
                        "most %d of them\n",
                        MAX_HEADERS);
                exit(2);
            }
            o->headers[o->n_headers++] = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (!have_url || o->rate == 0 || optind != argc) {
        usage(stderr);
        exit(2);
    }
}

static void build_request(run_t *r)
{
    const opts_t *o = &r->o;
    size_t blen = o->body ? strlen(o->body) : 0, hlen = 0, at = 0;
    char *extra;
    int n;

    /* The --header lines, each with its CRLF. */
    for (int i = 0; i < o->n_headers; i++)
        hlen += strlen(o->headers[i]) + 2;
    if ((extra = malloc(hlen + 1)) == NULL)
        die("out of memory");
    for (int i = 0; i < o->n_headers; i++) {
        size_t len = strlen(o->headers[i]);
        memcpy(extra + at, o->headers[i], len);
        memcpy(extra + at + len, "\r\n", 2);
        at += len + 2;
    }
    extra[at] = '\0';
    n = asprintf(&r->req, "%s %s HTTP/1.1\r\nHost: %s:%s\r\n%s%sContent-Length: %zu\r\n\r\n%s",
                 o->method, o->path, o->host, o->port, extra,
                 o->body ? "Content-Type: application/json\r\n" : "", blen, o->body ? o->body : "");
    free(extra);
    if (n < 0)
        die("out of memory");
    r->req_len = (size_t)n;
}

int main(int argc, char **argv)
{
    static run_t r;

    parse_args(&r.o, argc, argv);
    build_request(&r);
    /* The default 50 us timer slack would blur a schedule of one request every 40 us. */
    prctl(PR_SET_TIMERSLACK, 1UL);
    r.first_k = (uint64_t)(r.o.warmup * r.o.rate);
    r.end_k = (uint64_t)((r.o.warmup + r.o.seconds) * r.o.rate);
    r.total = r.end_k;
    r.lat = malloc((r.end_k - r.first_k + 1) * sizeof *r.lat);
    r.conns = calloc((size_t)r.o.conns, sizeof *r.conns);
    r.idle = calloc((size_t)r.o.conns, sizeof *r.idle);
    if ((r.ep = epoll_create1(EPOLL_CLOEXEC)) < 0 || !r.lat || !r.conns || !r.idle)
        die("cannot start: %s", strerror(errno));
    for (int i = 0; i < r.o.conns; i++)
        conn_open(&r, &r.conns[i]);
    run_load(&r);
    report(&r);
    return 0;
}
