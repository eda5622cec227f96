/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_admin_server.c - pkg/admin's listener on 127.0.0.1, port 0: every
 * route and error status over a real socket, the connection limit, the
 * read timeout, and a free that joins the thread with clients still open.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <cmocka.h>

#include "admin/admin.h"

typedef struct fixture {
    admin_server_t *s;
    atomic_int ready_calls;
    atomic_bool ready;
} fixture_t;

static void metrics(void *ctx, admin_buf_t *out)
{
    admin_buf_printf(out, "# TYPE t_total counter\nt_total 7\n");
}

static bool ready(void *ctx, admin_buf_t *out)
{
    fixture_t *f = ctx;
    bool ok = atomic_load(&f->ready);

    atomic_fetch_add(&f->ready_calls, 1);
    admin_buf_printf(out, "{\"status\":\"%s\",\"checks\":[{\"name\":\"x\",\"ok\":%s,\"detail\":",
                     ok ? "ok" : "unavailable", ok ? "true" : "false");
    admin_buf_json_str(out, ok ? "" : "said \"no\"");
    admin_buf_printf(out, "}]}\n");
    return ok;
}

static fixture_t fx;

static void start(unsigned max_conns, int read_timeout_ms)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    admin_opts_t o;

    admin_opts_init(&o);
    o.max_request_bytes = 512;
    o.max_conns = max_conns;
    o.read_timeout_ms = read_timeout_ms;
    o.metrics = metrics;
    o.ready = ready;
    o.ctx = &fx;
    assert_int_equal(admin_server_new(&o, &fx.s, errbuf), SVC_OK);
    assert_true(admin_server_port(fx.s) > 0);
}

static int dial(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)admin_server_port(fx.s))};
    struct timeval tv = {.tv_sec = 5};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Reads to EOF: the whole response (the server closes after each). */
static void read_all(int fd, char *out, size_t cap)
{
    size_t len = 0;
    ssize_t n;

    while (len + 1 < cap && (n = recv(fd, out + len, cap - 1 - len, 0)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fd);
}

static int request(const char *req, size_t len, char *out, size_t cap)
{
    int fd = dial(), status = 0;

    assert_int_equal(send(fd, req, len, MSG_NOSIGNAL), (ssize_t)len);
    read_all(fd, out, cap);
    sscanf(out, "HTTP/1.1 %d", &status);
    return status;
}

static int get(const char *req, char *out, size_t cap)
{
    return request(req, strlen(req), out, cap);
}

static void routes_and_statuses(void **state)
{
    char r[4096], big[1024];

    start(4, 2000);
    assert_int_equal(get("GET /healthz HTTP/1.1\r\n\r\n", r, sizeof r), 200);
    assert_non_null(strstr(r, "\r\n\r\nok\n"));
    assert_int_equal(get("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", r, sizeof r), 200);
    assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4"));
    assert_non_null(strstr(r, "\r\n\r\n# TYPE t_total counter\nt_total 7\n"));
    atomic_store(&fx.ready, false);
    assert_int_equal(get("GET /readyz HTTP/1.1\r\n\r\n", r, sizeof r), 503);
    assert_non_null(strstr(r, "\"ok\":false,\"detail\":\"said \\\"no\\\"\""));
    atomic_store(&fx.ready, true);
    assert_int_equal(get("GET /readyz HTTP/1.1\r\n\r\n", r, sizeof r), 200);
    assert_int_equal(get("GET /other HTTP/1.1\r\n\r\n", r, sizeof r), 404);
    assert_int_equal(get("DELETE /metrics HTTP/1.1\r\n\r\n", r, sizeof r), 405);
    assert_int_equal(get("nonsense\r\n\r\n", r, sizeof r), 400);
    assert_int_equal(get("GET /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", r, sizeof r),
                     413);
    memset(big, 'a', sizeof big);
    memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
    assert_int_equal(request(big, sizeof big, r, sizeof r), 431);
    admin_server_free(fx.s);
}

static void connection_limit_then_timeout(void **state)
{
    char r[1024];
    int a, b;

    start(2, 300);
    a = dial();
    b = dial();
    usleep(50 * 1000); /* both accepted before the third arrives */
    assert_int_equal(get("GET /healthz HTTP/1.1\r\n\r\n", r, sizeof r), 503);
    assert_non_null(strstr(r, "too many admin connections"));
    /* The idle two are closed with 408 after the read timeout... */
    read_all(a, r, sizeof r);
    assert_non_null(strstr(r, "HTTP/1.1 408 "));
    read_all(b, r, sizeof r);
    assert_non_null(strstr(r, "HTTP/1.1 408 "));
    /* ...and their slots serve again. */
    assert_int_equal(get("GET /healthz HTTP/1.1\r\n\r\n", r, sizeof r), 200);
    admin_server_free(fx.s);
}

static void free_with_clients_open(void **state)
{
    char r[256];
    int a, calls;

    start(4, 10000);
    a = dial();
    assert_int_equal(send(a, "GET /rea", 8, MSG_NOSIGNAL), 8);
    assert_int_equal(get("GET /readyz HTTP/1.1\r\n\r\n", r, sizeof r), 200);
    calls = atomic_load(&fx.ready_calls);
    admin_server_free(fx.s); /* joins the thread; closes the half request */
    read_all(a, r, sizeof r);
    assert_string_equal(r, "");
    assert_int_equal(atomic_load(&fx.ready_calls), calls);
}

/* The debug hook: what it was given, and its status and body on the wire. */
static char seen[256];

static int debug(void *ctx, const admin_request_t *req, admin_buf_t *out)
{
    (void)ctx;
    snprintf(seen, sizeof seen, "%s %s ?%s [%s] %zu", req->method, req->path, req->query, req->body,
             req->body_len);
    admin_buf_printf(out, "{\"path\":");
    admin_buf_json_str(out, req->path);
    admin_buf_printf(out, "}\n");
    return strcmp(req->path, "/debug/bad") == 0 ? 400 : 200;
}

static void debug_hook(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "", r[1024];
    admin_opts_t o;

    admin_opts_init(&o);
    o.max_request_bytes = 512;
    o.debug = debug;
    assert_int_equal(admin_server_new(&o, &fx.s, errbuf), SVC_OK);
    assert_int_equal(get("GET /debug/fault?a=1 HTTP/1.1\r\n\r\n", r, sizeof r), 200);
    assert_string_equal(seen, "GET /debug/fault ?a=1 [] 0");
    assert_non_null(strstr(r, "Content-Type: application/json\r\n"));
    assert_non_null(strstr(r, "\r\n\r\n{\"path\":\"/debug/fault\"}\n"));
    /* A body sent in two pieces is waited for. */
    {
        const char *head = "POST /debug/fault HTTP/1.1\r\nContent-Length: 13\r\n\r\nlatency",
                   *rest = "_ms=20";
        int fd = dial(), status = 0;
        assert_int_equal(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
        usleep(50 * 1000);
        assert_int_equal(send(fd, rest, strlen(rest), MSG_NOSIGNAL), (ssize_t)strlen(rest));
        read_all(fd, r, sizeof r);
        sscanf(r, "HTTP/1.1 %d", &status);
        assert_int_equal(status, 200);
        assert_string_equal(seen, "POST /debug/fault ? [latency_ms=20] 13");
    }
    assert_int_equal(get("PUT /debug/bad HTTP/1.1\r\n\r\n", r, sizeof r), 400);
    assert_int_equal(get("DELETE /debug/fault HTTP/1.1\r\n\r\n", r, sizeof r), 405);
    assert_int_equal(get("GET /metrics HTTP/1.1\r\n\r\n", r, sizeof r), 200);
    admin_server_free(fx.s);
    /* Without a hook the family does not exist. */
    start(4, 2000);
    assert_int_equal(get("GET /debug/fault HTTP/1.1\r\n\r\n", r, sizeof r), 404);
    admin_server_free(fx.s);
}

static void bad_address_fails_cleanly(void **state)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    admin_opts_t o;
    admin_server_t *s = NULL;

    admin_opts_init(&o);
    o.listen = "no-port";
    assert_int_equal(admin_server_new(&o, &s, errbuf), SVC_EINVAL);
    assert_null(s);
    assert_non_null(strstr(errbuf, "host:port"));
    start(1, 1000);
    {
        char in_use[64];
        snprintf(in_use, sizeof in_use, "127.0.0.1:%d", admin_server_port(fx.s));
        o.listen = in_use;
        errbuf[0] = '\0';
        assert_int_equal(admin_server_new(&o, &s, errbuf), SVC_EUNAVAIL);
        assert_non_null(strstr(errbuf, "in use"));
    }
    admin_server_free(fx.s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(routes_and_statuses),
        cmocka_unit_test(connection_limit_then_timeout),
        cmocka_unit_test(free_with_clients_open),
        cmocka_unit_test(debug_hook),
        cmocka_unit_test(bad_address_fails_cleanly),
    };
    return cmocka_run_group_tests_name("admin_server", tests, NULL, NULL);
}
