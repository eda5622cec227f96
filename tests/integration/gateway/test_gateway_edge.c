/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_edge.c - the HTTP edge of the real gateway, over raw sockets
 * where libcurl would not send the bytes: request framing (conflicting,
 * repeated and list Content-Length, Transfer-Encoding with Content-Length,
 * obsolete line folding, whitespace in header names, heads h2o cannot
 * parse), oversized headers (431 before any upstream call) and
 * Idempotency-Key (honoured byte for byte or refused, never ignored). The
 * message of a CreateOrder whose outcome is unknown: test_gateway_outcome.c.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gw_it.h"

#define RAW_MAX (512 * 1024)

/* ---- a raw HTTP/1.1 client ---------------------------------------------- */

typedef struct raw_res {
    int status;      /* of the first response; 0: none arrived */
    int responses;   /* status lines received */
    bool closed;     /* the gateway closed the connection */
    char ctype[64];  /* Content-Type of the first response, lower case */
    char body[1024]; /* its body (cut), NUL-terminated */
} raw_res_t;

static int raw_connect(int port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* The value of header `name` (lower case, with the colon) in the lower-cased
 * head, or NULL. */
static const char *head_value(const char *lower_head, const char *name)
{
    const char *p = strstr(lower_head, name);

    if (p == NULL)
        return NULL;
    p += strlen(name);
    return p + strspn(p, " ");
}

/* Parses the first response in buf; true once it is complete. */
static bool parse_first(const char *buf, size_t n, raw_res_t *out)
{
    const char *end = strstr(buf, "\r\n\r\n"), *v;
    char head[4096];
    size_t hlen, cl = 0;

    if (end == NULL || strncmp(buf, "HTTP/1.1 ", 9) != 0)
        return false;
    hlen = (size_t)(end - buf) + 4;
    for (size_t i = 0; i < hlen && i < sizeof head - 1; i++)
        head[i] = (char)(buf[i] >= 'A' && buf[i] <= 'Z' ? buf[i] + 32 : buf[i]);
    head[hlen < sizeof head - 1 ? hlen : sizeof head - 1] = '\0';
    out->status = atoi(buf + 9);
    if ((v = head_value(head, "\r\ncontent-type:")) != NULL)
        snprintf(out->ctype, sizeof out->ctype, "%.*s", (int)strcspn(v, "\r"), v);
    if ((v = head_value(head, "\r\ncontent-length:")) != NULL)
        cl = (size_t)strtoul(v, NULL, 10);
    if (n < hlen + cl)
        return false;
    snprintf(out->body, sizeof out->body, "%.*s", (int)cl, end + 4);
    return true;
}

/* Sends req and reads until the gateway closes the connection, or until a
 * whole response has arrived and nothing more comes for a while. */
static void raw_exchange(int port, const char *req, size_t len, raw_res_t *out)
{
    static char buf[RAW_MAX + 1];
    size_t n = 0, sent = 0;
    uint64_t until = it_now_ms() + (uint64_t)it_ms(5000);
    int fd = raw_connect(port);

    memset(out, 0, sizeof *out);
    buf[0] = '\0';
    while (sent < len) {
        /* h2o may answer and close before a too-large head is all sent */
        ssize_t w = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        sent += (size_t)w;
    }
    for (;;) {
        bool whole = parse_first(buf, n, out);
        int64_t wait = whole ? it_ms(300) : (int64_t)until - (int64_t)it_now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t r;

        if (wait <= 0 || poll(&p, 1, (int)wait) <= 0 || n == RAW_MAX)
            break;
        r = recv(fd, buf + n, RAW_MAX - n, 0);
        if (r <= 0) {
            out->closed = true; /* EOF, or a reset after the answer */
            break;
        }
        n += (size_t)r;
        buf[n] = '\0';
    }
    for (const char *p = buf; (p = strstr(p, "HTTP/1.1 ")) != NULL; p++)
        out->responses++;
    close(fd);
}

/* ---- the edge group: gateway, catalog, order (when built) ---------------- */

static int edge_setup(void **state)
{
    return gw_it_setup_env(state, true, NULL);
}

static int64_t count_rows(const char *dsn, const char *sql)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    int64_t n = -1;

    if (pgtest_scalar_int(dsn, sql, &n, errbuf) != SVC_OK)
        fail_msg("%s: %s", sql, errbuf);
    return n;
}

static int64_t products_named(const gw_it_t *t, const char *name)
{
    char sql[256];

    snprintf(sql, sizeof sql, "SELECT count(*) FROM products WHERE name = '%s'", name);
    return count_rows(t->cat.db.dsn, sql);
}

enum { BODY_JSON, BODY_CHUNKED, BODY_SMUGGLED };

/* One request: its version, the header lines before Host ("$L" is the
 * length of the body as sent), the body, and what must come back. */
typedef struct edge_case {
    const char *version;
    const char *headers;
    int body;
    int status;
    const char *message; /* part of the JSON error; NULL: h2o's own text 400 */
    bool closes;
    int created; /* products the request creates */
} edge_case_t;

static const edge_case_t edge_cases[] = {
    /* h2o frames by the first Content-Length and drops the others: before
     * the check this one created the product (200) */
    {"1.1", "Content-Length: $L\r\nContent-Length: 3\r\n", BODY_JSON, 400,
     "conflicting Content-Length headers: ", true, 0},
    /* ...and this one read a 3-byte body, then the rest as the next request */
    {"1.1", "Content-Length: 3\r\nContent-Length: $L\r\n", BODY_JSON, 400,
     "conflicting Content-Length headers: 3 and ", true, 0},
    {"1.1", "Content-Length: 0\r\ncontent-length: $L\r\n", BODY_SMUGGLED, 400,
     "conflicting Content-Length headers: 0 and ", true, 0},
    /* identical repeats are one value (RFC 9110 §8.6, Go's net/http) */
    {"1.1", "Content-Length: $L\r\nContent-Length: $L\r\n", BODY_JSON, 200, NULL, false, 1},
    /* a list in the one h2o reads: h2o's own 400, in JSON */
    {"1.1", "Content-Length: 3, $L\r\n", BODY_JSON, 400, "broken content-length header", true, 0},
    {"1.1", "Content-Length: $L\r\nContent-Length: $L, $L\r\n", BODY_JSON, 400,
     "Content-Length must be one decimal number", true, 0},
    /* h2o decodes chunked and ignores the Content-Length: it used to be 200 */
    {"1.1", "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", BODY_CHUNKED, 400,
     "both Content-Length and Transfer-Encoding", true, 0},
    {"1.1", "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", BODY_CHUNKED, 400,
     "both Content-Length and Transfer-Encoding", true, 0},
    {"1.1", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", BODY_CHUNKED, 400,
     "more than one Transfer-Encoding header", true, 0},
    {"1.0", "Transfer-Encoding: chunked\r\n", BODY_CHUNKED, 400,
     "Transfer-Encoding in an HTTP/1.0 request", true, 0},
    {"1.1", "Transfer-Encoding: gzip, chunked\r\n", BODY_CHUNKED, 400, "unknown transfer-encoding",
     true, 0},
    {"1.1", "Transfer-Encoding: chunked\r\n", BODY_CHUNKED, 200, NULL, false, 1},
    /* h2o passes a folded line on as a header with an empty name */
    {"1.1", "Content-Length: $L\r\nX-Note: a\r\n b\r\n", BODY_JSON, 400, "obsolete line folding",
     true, 0},
    {"1.1", "Content-Length: 3\r\n $L\r\n", BODY_JSON, 400, "obsolete line folding", true, 0},
    /* picohttpparser refuses these heads, and h2o writes its fixed text
     * 400 to the socket before there is a request to filter */
    {"1.1", "Content-Length: $L\r\nX Note: a\r\n", BODY_JSON, 400, NULL, true, 0},
    {"1.1", "Content-Length : $L\r\n", BODY_JSON, 400, NULL, true, 0},
    {"1.1", "Content-Length\t: $L\r\n", BODY_JSON, 400, NULL, true, 0},
    {"1.1", " X-Note: a\r\nContent-Length: $L\r\n", BODY_JSON, 400, NULL, true, 0},
};

/* Replaces every "$L" of tpl with len. */
static void expand(const char *tpl, size_t len, char *out, size_t cap)
{
    size_t n = 0;

    for (const char *p = tpl; *p != '\0' && n + 24 < cap; p++) {
        if (p[0] == '$' && p[1] == 'L')
            n += (size_t)snprintf(out + n, cap - n, "%zu", len), p++;
        else
            out[n++] = *p;
    }
    out[n] = '\0';
}

static size_t case_request(const edge_case_t *c, const char *name, const char *token, char *out,
                           size_t cap)
{
    char json[256], body[512], headers[512];

    snprintf(json, sizeof json, "{\"name\":\"%s\",\"price_cents\":1}", name);
    if (c->body == BODY_CHUNKED)
        snprintf(body, sizeof body, "%zx\r\n%s\r\n0\r\n\r\n", strlen(json), json);
    else if (c->body == BODY_SMUGGLED)
        snprintf(body, sizeof body, "GET /v1/products/smuggled HTTP/1.1\r\nHost: x\r\n\r\n");
    else
        snprintf(body, sizeof body, "%s", json);
    expand(c->headers, strlen(body), headers, sizeof headers);
    return (size_t)snprintf(out, cap,
                            "POST /v1/products HTTP/%s\r\n%sHost: x\r\nAuthorization: Bearer "
                            "%s\r\n\r\n%s",
                            c->version, headers, token, body);
}

static void check_case(const gw_it_t *t, size_t i, const char *tag)
{
    const edge_case_t *c = &edge_cases[i];
    char name[64], req[2048];
    size_t len;
    raw_res_t r;

    snprintf(name, sizeof name, "edge-%zu-%s", i, tag);
    len = case_request(c, name, t->token, req, sizeof req);
    raw_exchange(t->port, req, len, &r);
    if (r.status != c->status || r.responses != 1 || r.closed != c->closes)
        fail_msg("case %zu: status %d, %d responses, closed %d; want %d, 1, %d. Request:\n%s\n"
                 "Body: %s",
                 i, r.status, r.responses, r.closed, c->status, c->closes, req, r.body);
    if (c->status == 200) {
        assert_string_equal(r.ctype, "application/json");
        assert_non_null(strstr(r.body, "\"id\":\""));
    } else if (c->message != NULL) {
        assert_string_equal(r.ctype, "application/json");
        if (strncmp(r.body, "{\"code\":3,\"message\":\"", 21) != 0 ||
            strstr(r.body, c->message) == NULL)
            fail_msg("case %zu: body %s does not name \"%s\"", i, r.body, c->message);
    } else {
        assert_string_equal(r.ctype, "text/plain; charset=utf-8");
        assert_string_equal(r.body, "Bad Request");
    }
    if (products_named(t, name) != c->created)
        fail_msg("case %zu: %lld products named %s, want %d", i, (long long)products_named(t, name),
                 name, c->created);
}

static void framing_is_checked_before_anything_is_decoded(void **state)
{
    gw_it_t *t = *state;
    char uuid[37];

    it_random_uuid(uuid);
    uuid[8] = '\0';
    for (size_t i = 0; i < SVC_COUNTOF(edge_cases); i++)
        check_case(t, i, uuid);
}

/* More than 100 fields, or a head over h2o's H2O_MAX_REQLEN (8 KiB + 100 *
 * 4 KiB): h2o's fixed text 400 too. Below that the gateway decides. */
static void heads_h2o_cannot_parse_get_its_text_400(void **state)
{
    gw_it_t *t = *state;
    size_t cap = RAW_MAX, n;
    char *req = malloc(cap);
    raw_res_t r;

    assert_non_null(req);
    n = (size_t)snprintf(req, cap, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(req + n, cap - n, "X-H%d: v\r\n", i);
    n += (size_t)snprintf(req + n, cap - n, "\r\n");
    raw_exchange(t->port, req, n, &r);
    if (r.status != 400)
        fail_msg("101 fields: %d %s (%zu bytes sent)", r.status, r.body, n);
    assert_string_equal(r.ctype, "text/plain; charset=utf-8");
    assert_true(r.closed);

    n = (size_t)snprintf(req, cap, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 53; i++) {
        n += (size_t)snprintf(req + n, cap - n, "X-Big%d: ", i);
        memset(req + n, 'v', 8000);
        n += 8000;
        n += (size_t)snprintf(req + n, cap - n, "\r\n");
    }
    n += (size_t)snprintf(req + n, cap - n, "\r\n");
    raw_exchange(t->port, req, n, &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(r.ctype, "text/plain; charset=utf-8");
    assert_true(r.closed);
    free(req);
}

/* "Name: " + len copies of c, as a header line for libcurl. */
static char *big_header(const char *name, char c, size_t len)
{
    size_t nl = strlen(name);
    char *h = malloc(nl + 2 + len + 1);

    assert_non_null(h);
    memcpy(h, name, nl);
    memcpy(h + nl, ": ", 2);
    memset(h + nl + 2, c, len);
    h[nl + 2 + len] = '\0';
    return h;
}

static void oversized_headers_are_431_before_any_upstream_call(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    struct {
        const char *name;
        size_t len;
        const char *named;
    } big[] = {
        {"Accept-Language", 16384, "request header Accept-Language is too large"},
        {"Grpc-Metadata-X", 16384, "request header Grpc-Metadata-X is too large"},
        {"Cookie", 16384, "request header Cookie is too large"},
        {"User-Agent", 5000, "request header User-Agent is too large"},
        {"X-Forwarded-For", 5000, "request header X-Forwarded-For is too large"},
    };
    char uuid[37], path[96];
    gw_res_t r;

    assert_non_null(h);
    it_random_uuid(uuid);
    snprintf(path, sizeof path, "/v1/products/%s", uuid);
    for (size_t i = 0; i < SVC_COUNTOF(big); i++) {
        char *line = big_header(big[i].name, 'a', big[i].len);
        const char *hdrs[] = {line, "X-Request-Id: edge-431", NULL};

        gw_call(h, t, "GET", path, NULL, hdrs, &r);
        gw_assert_error(&r, 431, 3, big[i].named);
        assert_non_null(strstr(r.body, "may total 4096 bytes"));
        if (i > 0 && r.connects != 0)
            fail_msg("a 431 cost the client its connection");
        gw_res_free(&r);
        free(line);
    }
    {
        /* the total counts: three headers of 1500 bytes, the third crosses it */
        char *a = big_header("Grpc-Metadata-Aa", 'a', 1500),
             *b = big_header("Grpc-Metadata-Ab", 'b', 1500),
             *c = big_header("Grpc-Metadata-Ac", 'c', 1500);
        const char *hdrs[] = {a, b, c, NULL};
        gw_call(h, t, "GET", path, NULL, hdrs, &r);
        gw_assert_error(&r, 431, 3, "request header Grpc-Metadata-Ac is too large");
        gw_res_free(&r);
        free(a);
        free(b);
        free(c);
    }
    {
        /* below the bound (Cookie counts twice: it is also sent as
         * grpcgateway-cookie): it reaches the catalog, which says 404 */
        char *line = big_header("Cookie", 'a', 1500);
        const char *hdrs[] = {line, "X-Request-Id: edge-431-control", NULL};
        gw_call(h, t, "GET", path, NULL, hdrs, &r);
        gw_assert_error(&r, 404, 5, "not found");
        gw_res_free(&r);
        free(line);
    }
    /* The catalog logs every call it gets: the control one, and none of the
     * refused ones, which were sent before it on the same connection. */
    assert_int_equal(spawn_log_wait(t->cat.proc, "req=edge-431-control", it_ms(2000)), SVC_OK);
    assert_false(spawn_log_contains(t->cat.proc, "req=edge-431 "));
    curl_easy_cleanup(h);
}

/* POST /v1/orders with header lines hdrs; the order id into id ("" if none). */
static long post_order(CURL *h, const gw_it_t *t, const char *pid, const char *const *hdrs,
                       gw_res_t *r, char id[64])
{
    char body[256];

    snprintf(body, sizeof body, "{\"items\":[{\"product_id\":\"%s\",\"quantity\":1}]}", pid);
    gw_call(h, t, "POST", "/v1/orders", body, hdrs, r);
    if (!gw_json_str(r->body, "id", id, 64))
        id[0] = '\0';
    return r->status;
}

static int64_t orders(const gw_it_t *t)
{
    return count_rows(t->ord_db.dsn, "SELECT count(*) FROM orders");
}

/* Keys that cannot be honoured byte for byte are refused, and so are two
 * keys: before, a raw UTF-8 key was dropped and each POST made an order. */
static void idempotency_keys_that_cannot_be_honoured_are_400(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char pid[37], id[64], *k10 = big_header("Idempotency-Key", 'k', 10240),
                          *k64 = big_header("Idempotency-Key", 'k', 65536),
                          *k256 = big_header("Idempotency-Key", 'k', 256);
    struct {
        const char *h1, *h2, *message;
    } bad[] = {
        {"Idempotency-Key: \xd0\xba\xd0\xbb\xd1\x8e\xd1\x87-6c36ef84", NULL,
         "Idempotency-Key must be printable ASCII without spaces (0x21-0x7E): byte 0 is 0xD0"},
        {"Idempotency-Key: my key", NULL, "byte 2 is 0x20"},
        {"Idempotency-Key;", NULL,
         "Idempotency-Key must be 1-255 printable ASCII characters, "
         "not 0 bytes"},
        {k256, NULL, "Idempotency-Key must be 1-255 printable ASCII characters, not 256 bytes"},
        {k10, NULL, "not 10240 bytes"},
        {k64, NULL, "not 65536 bytes"},
        {"Grpc-Metadata-Idempotency-Key: \xc3\xa9t\xc3\xa9", NULL,
         "Grpc-Metadata-Idempotency-Key must be printable ASCII"},
        {"Idempotency-Key: edge-a", "Idempotency-Key: edge-a",
         "more than one Idempotency-Key header (Idempotency-Key and Idempotency-Key)"},
        {"Idempotency-Key: edge-b", "Grpc-Metadata-Idempotency-Key: edge-b",
         "more than one Idempotency-Key header (Idempotency-Key and "
         "Grpc-Metadata-Idempotency-Key)"},
    };
    int64_t before;
    gw_res_t r;

    assert_non_null(h);
    gw_it_product(h, t, "Keyed", 100, 1000, pid);
    before = orders(t);
    for (size_t i = 0; i < SVC_COUNTOF(bad); i++) {
        const char *hdrs[] = {bad[i].h1, bad[i].h2, NULL};
        for (int again = 0; again < 2; again++) {
            post_order(h, t, pid, hdrs, &r, id);
            gw_assert_error(&r, 400, 3, bad[i].message);
            gw_res_free(&r);
        }
    }
    assert_int_equal(orders(t), before);
    free(k10);
    free(k64);
    free(k256);
    curl_easy_cleanup(h);
}

static void idempotency_keys_are_honoured_byte_for_byte(void **state)
{
    gw_it_t *t = *state;
    CURL *h = curl_easy_init();
    char pid[37], uuid[37], first[64], again[64], other[64];
    char every[200], longest[300], md_key[128], other_key[200];
    const char *md_hdrs[17];
    gw_res_t r;
    size_t n = 0;

    assert_non_null(h);
    gw_it_product(h, t, "Keyed", 100, 1000, pid);
    it_random_uuid(uuid);
    /* every character a key may have, quotes, commas and backslash included */
    n = (size_t)snprintf(every, sizeof every, "Idempotency-Key: %s-", uuid);
    for (int c = 0x21; c <= 0x7e; c++)
        every[n++] = (char)c;
    every[n] = '\0';
    snprintf(other_key, sizeof other_key, "%s", every);
    other_key[n - 1] = '}'; /* one byte differs */
    n = (size_t)snprintf(longest, sizeof longest, "Idempotency-Key: %s", uuid);
    memset(longest + n, 'z', 255 - 36);
    longest[n + 255 - 36] = '\0';
    {
        const char *keys[][2] = {{every, other_key}, {longest, NULL}};
        for (size_t k = 0; k < SVC_COUNTOF(keys); k++) {
            const char *h1[] = {keys[k][0], NULL};
            assert_int_equal(post_order(h, t, pid, h1, &r, first), 200);
            gw_res_free(&r);
            assert_int_equal(post_order(h, t, pid, h1, &r, again), 200);
            gw_res_free(&r);
            assert_string_equal(again, first);
            if (keys[k][1] != NULL) {
                const char *h2[] = {keys[k][1], NULL};
                assert_int_equal(post_order(h, t, pid, h2, &r, other), 200);
                gw_res_free(&r);
                assert_string_not_equal(other, first);
            }
        }
    }
    /* After 14 other Grpc-Metadata-* headers the key still goes first:
     * it used to be cut by the 15-entry limit, and two orders were made. */
    for (int i = 0; i < 14; i++) {
        char *line = malloc(32);
        assert_non_null(line);
        snprintf(line, 32, "Grpc-Metadata-X%d: v", i);
        md_hdrs[i] = line;
    }
    snprintf(md_key, sizeof md_key, "Grpc-Metadata-Idempotency-Key: md-%s", uuid);
    md_hdrs[14] = md_key;
    md_hdrs[15] = NULL;
    assert_int_equal(post_order(h, t, pid, md_hdrs, &r, first), 200);
    gw_res_free(&r);
    assert_int_equal(post_order(h, t, pid, md_hdrs, &r, again), 200);
    gw_res_free(&r);
    assert_string_equal(again, first);
    for (int i = 0; i < 14; i++)
        free((void *)md_hdrs[i]);
    curl_easy_cleanup(h);
}

int main(void)
{
    const struct CMUnitTest edge[] = {
        cmocka_unit_test(framing_is_checked_before_anything_is_decoded),
        cmocka_unit_test(heads_h2o_cannot_parse_get_its_text_400),
        cmocka_unit_test(oversized_headers_are_431_before_any_upstream_call),
        cmocka_unit_test(idempotency_keys_that_cannot_be_honoured_are_400),
        cmocka_unit_test(idempotency_keys_are_honoured_byte_for_byte),
    };
    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = svc_test_run_group_tests_name("gateway_edge", edge, edge_setup, gw_it_teardown);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
