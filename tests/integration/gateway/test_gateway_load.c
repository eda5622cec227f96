/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_load.c - "1,000 concurrent connections served without
 * error" (issue #4): the real gateway, catalog and Postgres; 1000 TCP
 * connections to the gateway are opened and all held open at once, then one
 * GET /v1/products/{id} is sent on each (non-blocking sockets and poll()).
 * Every connection must get a 200 with exactly the product's JSON (as
 * CreateProduct returned it) and its own X-Request-Id back; meanwhile the
 * gateway must hold all 1000 connections (counted in /proc/<pid>/fd).
 * Afterwards the gateway still serves a new connection, and /metrics counts
 * exactly those requests. The teardown requires the gateway's exit 0 after
 * SIGTERM (in the ASan build: no leaks).
 *
 * The test process needs more than 1000 descriptors, so it raises its
 * RLIMIT_NOFILE (the gateway, started afterwards, inherits the raised
 * limit; its limit is printed). SVC_TEST_GATEWAY_NOFILE=<n> (optional)
 * starts the catalog and the gateway with that soft limit instead, e.g.
 * 1024, the usual default of systemd services and containers.
 */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "gw_it.h"

#define N_CONNS     1000
#define N_PRODUCTS  100
#define NOFILE_WANT 4096 /* 1000 client sockets plus libcurl, gRPC, logs */
#define RESP_MAX    8192
#define ROUTE_200                                                                                  \
    "gateway_http_requests_total{route=\"/v1/products/{id}\",method=\"GET\",code=\"200\"}"

typedef struct product {
    char id[37];
    char *json; /* the CreateProduct answer: GetProduct must return exactly this */
} product_t;

typedef struct conn {
    int fd;
    int product;
    char req[256];
    size_t req_len, sent;
    char buf[RESP_MAX];
    size_t len;
    size_t head_len; /* 0 until the header block is complete */
    long content_length;
    bool done;
} conn_t;

static product_t products[N_PRODUCTS];
static conn_t conns[N_CONNS];
static struct pollfd pfds[N_CONNS];
static bool nofile_ok;

/* Raises RLIMIT_NOFILE to NOFILE_WANT (the hard limit too, if need be and
 * allowed). False when this process cannot have enough descriptors. */
static bool raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return false;
    if (rl.rlim_cur >= NOFILE_WANT)
        return true;
    if (rl.rlim_max < NOFILE_WANT)
        rl.rlim_max = NOFILE_WANT; /* needs CAP_SYS_RESOURCE */
    rl.rlim_cur = NOFILE_WANT;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
        return true;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return false;
    rl.rlim_cur = rl.rlim_max;
    return setrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= N_CONNS + 100;
}

static int setup(void **state)
{
    const char *gw_nofile = getenv("SVC_TEST_GATEWAY_NOFILE");

    nofile_ok = raise_nofile(); /* else the test skips */
    if (gw_nofile == NULL || gw_nofile[0] == '\0')
        return gw_it_setup_env(state, false, NULL);
    return gw_it_setup_nofile(state, strtoull(gw_nofile, NULL, 10), NULL);
}

/* How many of pid's descriptors are sockets. */
static int sockets_of(pid_t pid)
{
    char dir[64], link[320], target[64];
    DIR *d;
    struct dirent *e;
    int n = 0;

    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    d = opendir(dir);
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        ssize_t l;
        if (e->d_name[0] == '.')
            continue;
        snprintf(link, sizeof link, "%s/%.200s", dir, e->d_name);
        l = readlink(link, target, sizeof target - 1);
        if (l > 0) {
            target[l] = '\0';
            n += strncmp(target, "socket:", 7) == 0;
        }
    }
    closedir(d);
    return n;
}

/* The value of the metrics line that starts with series (0 when absent). */
static unsigned long long metric(CURL *h, const gw_it_t *t, const char *series)
{
    gw_res_t r;
    unsigned long long v = 0;
    const char *p;

    gw_admin_get(h, t, "/metrics", &r);
    gw_assert_status(&r, 200);
    for (p = r.body; p != NULL && *p != '\0';) {
        if (strncmp(p, series, strlen(series)) == 0 && p[strlen(series)] == ' ') {
            v = strtoull(p + strlen(series) + 1, NULL, 10);
            break;
        }
        p = strchr(p, '\n');
        p = p != NULL ? p + 1 : NULL;
    }
    gw_res_free(&r);
    return v;
}

/* Case-insensitive search for header `name` in the block [head, head+len);
 * its value (up to CRLF) into out. */
static bool header_of(const char *head, size_t len, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);

    for (const char *line = head; line < head + len;) {
        const char *eol = line;

        while (eol + 1 < head + len && !(eol[0] == '\r' && eol[1] == '\n'))
            eol++;
        if (eol + 1 >= head + len)
            eol = NULL;
        size_t ll = eol != NULL ? (size_t)(eol - line) : (size_t)(head + len - line);

        if (ll > nl && line[nl] == ':' && strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl + 1;
            size_t vl = ll - nl - 1;
            while (vl > 0 && *v == ' ') {
                v++;
                vl--;
            }
            snprintf(out, cap, "%.*s", (int)vl, v);
            return true;
        }
        if (eol == NULL)
            break;
        line = eol + 2;
    }
    return false;
}

/* Reads what c has; true when its response is complete (or an error has
 * been recorded with fail_msg, which does not return). */
static bool conn_read(conn_t *c, int i)
{
    for (;;) {
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len, 0);

        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return false;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            fail_msg("connection %d: recv: %s (after %zu bytes)", i, strerror(errno), c->len);
        if (n == 0)
            fail_msg("connection %d: closed by the gateway after %zu bytes: %.*s", i, c->len,
                     (int)c->len, c->buf);
        c->len += (size_t)n;
        c->buf[c->len] = '\0';
        if (c->head_len == 0) {
            char *end = strstr(c->buf, "\r\n\r\n");
            char cl[32];
            if (end != NULL) {
                c->head_len = (size_t)(end - c->buf) + 4;
                if (!header_of(c->buf, c->head_len, "Content-Length", cl, sizeof cl))
                    fail_msg("connection %d: no Content-Length in %.*s", i, (int)c->head_len,
                             c->buf);
                c->content_length = strtol(cl, NULL, 10);
            }
        }
        if (c->head_len > 0 && c->len >= c->head_len + (size_t)c->content_length) {
            if (c->len > c->head_len + (size_t)c->content_length)
                fail_msg("connection %d: %zu bytes after the response", i,
                         c->len - c->head_len - (size_t)c->content_length);
            return true;
        }
        if (c->len + 1 >= sizeof c->buf)
            fail_msg("connection %d: response larger than %d bytes", i, RESP_MAX);
    }
}

static void check_response(const conn_t *c, int i)
{
    const product_t *p = &products[c->product];
    const char *body = c->buf + c->head_len;
    char v[128], want_id[64];

    if (strncmp(c->buf, "HTTP/1.1 200 ", 13) != 0)
        fail_msg("connection %d: %.*s", i, (int)c->len, c->buf);
    if (!header_of(c->buf, c->head_len, "Content-Type", v, sizeof v) ||
        strcmp(v, "application/json") != 0)
        fail_msg("connection %d: Content-Type \"%s\"", i, v);
    snprintf(want_id, sizeof want_id, "load-%d", i);
    if (!header_of(c->buf, c->head_len, "X-Request-Id", v, sizeof v) || strcmp(v, want_id) != 0)
        fail_msg("connection %d: X-Request-Id \"%s\", want %s", i, v, want_id);
    if ((size_t)c->content_length != strlen(p->json) || strcmp(body, p->json) != 0)
        fail_msg("connection %d: body\n  %s\nwant\n  %s", i, body, p->json);
}

static void thousand_concurrent_connections(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    struct sockaddr_in sa;
    char limits[96] = "?", soft[32], hard[32], path[64];
    unsigned long long before, after;
    uint64_t t0, t_conn, t_sent, t_done, deadline;
    int connected = 0, sent = 0, done = 0, held_before, held, pending;
    gw_res_t r;

    if (!nofile_ok) {
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        fprintf(stderr, "cannot raise RLIMIT_NOFILE to %d (soft %llu, hard %llu): skipped\n",
                NOFILE_WANT, (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
        skip();
    }
    if (gw_it_nofile(spawn_pid(t->gw), soft, hard))
        snprintf(limits, sizeof limits, "%s soft, %s hard", soft, hard);
    held_before = sockets_of(spawn_pid(t->gw));
    fprintf(stderr, "gateway pid %d: open-file limit %s; %d sockets before the load\n",
            (int)spawn_pid(t->gw), limits, held_before);

    /* Products through the gateway; CreateProduct's answer is the body
     * GetProduct must return. */
    for (int i = 0; i < N_PRODUCTS; i++) {
        char body[160];
        snprintf(body, sizeof body,
                 "{\"name\":\"load product %d\",\"description\":\"d%d\",\"priceCents\":\"%d\","
                 "\"stock\":%d}",
                 i, i, 100 + i, i % 7);
        gw_call(h, t, "POST", "/v1/products", body, NULL, &r);
        gw_assert_status(&r, 200);
        if (!gw_json_str(r.body, "id", products[i].id, sizeof products[i].id) ||
            !it_is_uuid(products[i].id))
            fail_msg("no product id in %s", r.body);
        products[i].json = r.body;
        r.body = NULL;
        gw_res_free(&r);
    }
    before = metric(h, t, ROUTE_200);

    /* 1. Open all 1000 connections, and wait until every one is up. */
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)t->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    t0 = it_now_ms();
    for (int i = 0; i < N_CONNS; i++) {
        conn_t *c = &conns[i];
        int on = 1;

        memset(c, 0, sizeof *c);
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0)
            fail_msg("socket %d: %s", i, strerror(errno));
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        if (connect(c->fd, (const struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS)
            fail_msg("connect %d: %s", i, strerror(errno));
        c->product = i % N_PRODUCTS;
        c->req_len = (size_t)snprintf(c->req, sizeof c->req,
                                      "GET /v1/products/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                                      "X-Request-Id: load-%d\r\n\r\n",
                                      products[c->product].id, t->port, i);
        pfds[i].fd = c->fd;
        pfds[i].events = POLLOUT;
    }
    deadline = it_now_ms() + (uint64_t)it_ms(10000);
    while (connected < N_CONNS) {
        int n = poll(pfds, N_CONNS, 100);

        if (n < 0 && errno != EINTR)
            fail_msg("poll: %s", strerror(errno));
        for (int i = 0; n > 0 && i < N_CONNS; i++) {
            int err = 0;
            socklen_t el = sizeof err;

            if (pfds[i].revents == 0 || pfds[i].events == 0)
                continue;
            if (getsockopt(conns[i].fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0)
                fail_msg("connect %d: %s", i, strerror(err));
            pfds[i].events = 0; /* up: poll no further until the send phase */
            connected++;
        }
        if (it_now_ms() > deadline)
            fail_msg("only %d of %d connections up after %d ms", connected, N_CONNS, it_ms(10000));
    }
    /* The gateway accepts asynchronously: wait until it holds them all. */
    held = sockets_of(spawn_pid(t->gw));
    while (held - held_before < N_CONNS && it_now_ms() < deadline) {
        usleep(10 * 1000);
        held = sockets_of(spawn_pid(t->gw));
    }
    t_conn = it_now_ms();
    fprintf(stderr, "%d connections up in %llu ms; the gateway holds %d sockets\n", connected,
            (unsigned long long)(t_conn - t0), held);
    if (held - held_before < N_CONNS) {
        spawn_log_dump(t->gw, 20);
        fail_msg("the gateway holds %d sockets, %d before the load: it has not accepted all %d "
                 "connections (open-file limit %s)",
                 held, held_before, N_CONNS, limits);
    }

    /* 2. One request on every connection, then read all the answers. */
    for (int i = 0; i < N_CONNS; i++)
        pfds[i].events = POLLOUT;
    deadline = it_now_ms() + (uint64_t)it_ms(15000);
    t_sent = 0;
    while (done < N_CONNS) {
        int n = poll(pfds, N_CONNS, 100);

        if (n < 0 && errno != EINTR)
            fail_msg("poll: %s", strerror(errno));
        for (int i = 0; n > 0 && i < N_CONNS; i++) {
            conn_t *c = &conns[i];
            short rev = pfds[i].revents;

            if (rev == 0 || pfds[i].events == 0)
                continue;
            if ((rev & (POLLERR | POLLNVAL)) != 0)
                fail_msg("connection %d: poll revents 0x%x", i, (unsigned)rev);
            if ((pfds[i].events & POLLOUT) != 0 && (rev & POLLOUT) != 0) {
                ssize_t w = send(c->fd, c->req + c->sent, c->req_len - c->sent, MSG_NOSIGNAL);
                if (w < 0 && errno != EAGAIN && errno != EINTR)
                    fail_msg("connection %d: send: %s", i, strerror(errno));
                if (w > 0)
                    c->sent += (size_t)w;
                if (c->sent == c->req_len) {
                    pfds[i].events = POLLIN;
                    if (++sent == N_CONNS)
                        t_sent = it_now_ms();
                }
            } else if ((rev & (POLLIN | POLLHUP)) != 0 && conn_read(c, i)) {
                check_response(c, i);
                c->done = true;
                pfds[i].events = 0;
                done++;
            }
        }
        if (it_now_ms() > deadline) {
            spawn_log_dump(t->gw, 20);
            fail_msg("%d of %d requests sent, %d answered after %d ms", sent, N_CONNS, done,
                     it_ms(15000));
        }
    }
    t_done = it_now_ms();
    held = sockets_of(spawn_pid(t->gw));
    fprintf(stderr,
            "%d requests sent in %llu ms, all %d answered 200 %llu ms after the first "
            "send; the gateway still holds %d sockets\n",
            sent, (unsigned long long)(t_sent - t_conn), done,
            (unsigned long long)(t_done - t_conn), held);
    /* Keep-alive: answering closed none of them. */
    if (held - held_before < N_CONNS)
        fail_msg("the gateway holds %d sockets after answering, %d before the load", held,
                 held_before);
    pending = 0;
    for (int i = 0; i < N_CONNS; i++) {
        char b;
        ssize_t n = recv(conns[i].fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);
        pending += n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    }
    if (pending > 0)
        fail_msg("%d connections were closed or got extra bytes after their answer", pending);

    /* 3. Still serving (a new connection, with the 1000 still open), and
     * /metrics counted exactly the 1000. */
    gw_call(h, t, "GET", "/v1/products/", NULL, NULL, &r);
    gw_assert_error(&r, 404, 5, "");
    gw_res_free(&r);
    snprintf(path, sizeof path, "/v1/products/%s", products[7].id);
    gw_call(h, t, "GET", path, NULL, NULL, &r);
    gw_assert_body(&r, 200, products[7].json);
    gw_res_free(&r);
    after = metric(h, t, ROUTE_200);
    if (after != before + N_CONNS + 1)
        fail_msg("%s went from %llu to %llu, want +%d", ROUTE_200, before, after, N_CONNS + 1);
    /* Nothing left in flight (the admin port's /metrics is not counted). */
    after = metric(h, t, "gateway_http_in_flight");
    if (after != 0)
        fail_msg("gateway_http_in_flight is %llu after the load, want 0", after);

    for (int i = 0; i < N_CONNS; i++)
        close(conns[i].fd);
    for (int i = 0; i < N_PRODUCTS; i++) {
        free(products[i].json);
        products[i].json = NULL;
    }
    curl_easy_cleanup(h);
    if (!spawn_alive(t->gw))
        fail_msg("the gateway exited");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(thousand_concurrent_connections, setup, gw_it_teardown),
    };
    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests_name("gateway_load", tests, NULL, NULL);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
