/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_http1.c - fuzz target for pkg/http1's request-head parser, the one
 * that reads outside input on every admin port and the notify-sink.
 *
 * Each input is parsed whole, with a bound of its own length and with a
 * small one. A head it accepts must hold what the contract promises: every
 * slice inside the head, the method a token, the path starting with '/',
 * no more fields than H1_MAX_HEADERS, Content-Length equal to what the
 * fields say. And the listeners' reading loops depend on this: every
 * shorter prefix of an accepted head is H1_INCOMPLETE (never an error, never
 * a different head), and the same head followed by anything parses the same.
 * Any violation abort()s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "http1/http1.h"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_http1: %s\n", what);
        abort();
    }
}

static bool inside(h1_str_t s, const char *buf, size_t head)
{
    return s.p != NULL && s.p >= buf && s.p + s.len <= buf + head;
}

static void check_accepted(const char *buf, const h1_request_t *r)
{
    check(r->head_len >= 4 && memcmp(buf + r->head_len - 4, "\r\n\r\n", 4) == 0, "head end");
    check(inside(r->method, buf, r->head_len) && r->method.len > 0, "method");
    check(inside(r->path, buf, r->head_len) && r->path.p[0] == '/', "path");
    check(r->query.p == NULL || inside(r->query, buf, r->head_len), "query");
    check(r->n_headers <= H1_MAX_HEADERS, "header count");
    check(r->minor_version == 0 || r->minor_version == 1, "version");
    for (size_t i = 0; i < r->n_headers; i++) {
        check(inside(r->headers[i].name, buf, r->head_len) && r->headers[i].name.len > 0, "name");
        check(r->headers[i].value.len == 0 || inside(r->headers[i].value, buf, r->head_len),
              "value");
    }
    const h1_header_t *cl = h1_header_find(r, "content-length");
    check((cl != NULL) == r->has_content_length, "content-length presence");
    if (cl != NULL)
        check(strtoull(cl->value.p, NULL, 10) == r->content_length, "content-length value");
}

static void check_prefixes(const char *buf, const h1_request_t *whole, size_t max)
{
    size_t cuts[] = {0, 1, whole->head_len / 2, whole->head_len - 2, whole->head_len - 1};
    h1_request_t r;

    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
        check(h1_parse_request(buf, cuts[i], max, &r) == H1_INCOMPLETE,
              "a prefix was not incomplete");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so ASan sees any read past the input. */
    char *buf = malloc(size > 0 ? size : 1);
    h1_request_t r, again;
    size_t max = size + 1;

    check(buf != NULL, "out of memory");
    memcpy(buf, data, size);
    h1_result_t res = h1_parse_request(buf, size, max, &r);
    check(res == H1_INCOMPLETE || res == H1_OK || res == H1_BAD || res == H1_TOO_LARGE, "result");
    if (res == H1_OK) {
        check(r.head_len <= size, "head past the input");
        check_accepted(buf, &r);
        check_prefixes(buf, &r, max);
        check(h1_parse_request(buf, r.head_len, max, &again) == H1_OK &&
                  again.n_headers == r.n_headers && again.content_length == r.content_length &&
                  again.keep_alive == r.keep_alive,
              "the head alone parses differently");
    }
    (void)h1_parse_request(buf, size, 64, &again); /* the small bound: must not crash */
    free(buf);
    return 0;
}

const char *const fuzz_tokens[] = {
    "\r\n",
    "\r\n\r\n",
    "\r",
    "\n",
    " ",
    "\t",
    ":",
    ", ",
    "?",
    "/",
    "GET ",
    "POST ",
    "HTTP/1.1",
    "HTTP/1.0",
    "HTTP/2.0",
    "Content-Length: ",
    "content-length:",
    "Transfer-Encoding: chunked",
    "Connection: close",
    "Connection: keep-alive",
    "Host: a",
    "0",
    "5",
    "18446744073709551615",
    "99999999999999999999",
    "-1",
    "+1",
    "\x7f",
    "\x80",
    "\xff",
};
const size_t fuzz_n_tokens = sizeof fuzz_tokens / sizeof fuzz_tokens[0];
