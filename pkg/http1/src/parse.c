/* SPDX-License-Identifier: Apache-2.0 */
/* parse.c - the HTTP/1.x request-head parser (contract in http1/http1.h). */
#include <string.h>
#include <strings.h>

#include "http1/http1.h"

/* A token character of RFC 9110 §5.6.2: what method and field names are made of. */
static bool is_tchar(unsigned char c)
{
    return c > 0x20 && c < 0x7f && strchr("\"(),/:;<=>?@[\\]{}", c) == NULL;
}

/* A field value's octets (RFC 9110 §5.5): visible ASCII, obs-text, SP and HTAB. */
static bool is_field_char(unsigned char c)
{
    return c == ' ' || c == '\t' || (c > 0x20 && c != 0x7f);
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/*
 * Finds the blank line that ends the head, checking the framing on the way:
 * every LF must follow a CR and every CR precede an LF, and no NUL may
 * appear. Returns the head's length, 0 when it is not complete yet, or
 * (size_t)-1 when the framing is broken.
 */
static size_t head_length(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (c == '\0')
            return (size_t)-1;
        if (c == '\n' && (i == 0 || buf[i - 1] != '\r'))
            return (size_t)-1;
        if (c == '\r' && i + 1 < len && buf[i + 1] != '\n')
            return (size_t)-1;
        if (c == '\n' && i >= 3 && buf[i - 2] == '\n')
            return i + 1;
    }
    return 0;
}

static const char *line_end(const char *p, const char *end)
{
    const char *cr = memchr(p, '\r', (size_t)(end - p));
    return cr != NULL ? cr : end;
}

/* "METHOD SP /target SP HTTP/1.x": line without its CRLF. */
static bool parse_request_line(const char *p, const char *end, h1_request_t *req)
{
    const char *m = p, *t;

    while (p < end && is_tchar((unsigned char)*p))
        p++;
    if (p == m || p == end || *p != ' ')
        return false;
    req->method = (h1_str_t){m, (size_t)(p - m)};
    t = ++p;
    if (p == end || *p != '/')
        return false;
    while (p < end && (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f)
        p++;
    if (p == end || *p != ' ')
        return false;
    const char *q = memchr(t, '?', (size_t)(p - t));
    req->path = (h1_str_t){t, (size_t)((q != NULL ? q : p) - t)};
    req->query = q != NULL ? (h1_str_t){q + 1, (size_t)(p - q - 1)} : (h1_str_t){NULL, 0};
    p++;
    if (end - p != 8 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1'))
        return false;
    req->minor_version = p[7] - '0';
    return true;
}

static bool name_is(h1_str_t name, const char *lit)
{
    return name.len == strlen(lit) && strncasecmp(name.p, lit, name.len) == 0;
}

/* Content-Length is 1*DIGIT; a repeat must say the same (RFC 9112 §6.3). */
static bool take_content_length(h1_str_t v, h1_request_t *req)
{
    unsigned long long n = 0;

    if (v.len == 0)
        return false;
    for (size_t i = 0; i < v.len; i++) {
        if (v.p[i] < '0' || v.p[i] > '9' || n > (~0ULL - 9) / 10)
            return false;
        n = n * 10 + (unsigned long long)(v.p[i] - '0');
    }
    if (req->has_content_length && req->content_length != n)
        return false;
    req->has_content_length = true;
    req->content_length = n;
    return true;
}

/* Whether the comma-separated list v has the token tok (case-insensitive). */
static bool list_has(h1_str_t v, const char *tok)
{
    size_t n = strlen(tok), i = 0;

    while (i < v.len) {
        size_t j = i;
        while (j < v.len && v.p[j] != ',')
            j++;
        size_t a = i, b = j;
        while (a < b && is_ows(v.p[a]))
            a++;
        while (b > a && is_ows(v.p[b - 1]))
            b--;
        if (b - a == n && strncasecmp(v.p + a, tok, n) == 0)
            return true;
        i = j + 1;
    }
    return false;
}

/* One "name: value" line (without its CRLF). */
static h1_result_t parse_field(const char *p, const char *end, h1_request_t *req)
{
    const char *n = p, *v, *e = end;

    while (p < end && is_tchar((unsigned char)*p))
        p++;
    if (p == n || p == end || *p != ':') /* also an obs-fold line, which starts with SP */
        return H1_BAD;
    for (const char *c = p + 1; c < end; c++)
        if (!is_field_char((unsigned char)*c))
            return H1_BAD;
    for (v = p + 1; v < e && is_ows(*v); v++)
        ;
    while (e > v && is_ows(e[-1]))
        e--;
    if (req->n_headers == H1_MAX_HEADERS)
        return H1_TOO_LARGE;
    h1_header_t *h = &req->headers[req->n_headers++];
    h->name = (h1_str_t){n, (size_t)(p - n)};
    h->value = (h1_str_t){v, (size_t)(e - v)};
    if (name_is(h->name, "content-length") && !take_content_length(h->value, req))
        return H1_BAD;
    if (name_is(h->name, "transfer-encoding"))
        req->transfer_encoding = true;
    return H1_OK;
}

static void decide_keep_alive(h1_request_t *req)
{
    const h1_header_t *c = h1_header_find(req, "connection");

    if (req->minor_version == 1)
        req->keep_alive = c == NULL || !list_has(c->value, "close");
    else
        req->keep_alive = c != NULL && list_has(c->value, "keep-alive");
}

h1_result_t h1_parse_request(const char *buf, size_t len, size_t max_head, h1_request_t *req)
{
    size_t skip = 0, head;

    memset(req, 0, sizeof *req);
    /* RFC 9112 §2.2: empty lines before the request line are ignored (a
     * client may send one after a body it ended with CRLF). */
    while (skip + 1 < len && buf[skip] == '\r' && buf[skip + 1] == '\n' && skip < max_head)
        skip += 2;
    head = head_length(buf + skip, len - skip > max_head ? max_head : len - skip);
    if (head == (size_t)-1)
        return H1_BAD;
    if (head == 0)
        return len >= max_head ? H1_TOO_LARGE : H1_INCOMPLETE;
    if (skip + head > max_head)
        return H1_TOO_LARGE;
    const char *p = buf + skip, *end = buf + skip + head - 2; /* the blank line's CRLF */
    const char *eol = line_end(p, end);
    if (!parse_request_line(p, eol, req))
        return H1_BAD;
    for (p = eol + 2; p < end; p = eol + 2) {
        eol = line_end(p, end);
        h1_result_t r = parse_field(p, eol, req);
        if (r != H1_OK)
            return r;
    }
    req->head_len = skip + head;
    decide_keep_alive(req);
    return H1_OK;
}

const h1_header_t *h1_header_find(const h1_request_t *req, const char *name)
{
    for (size_t i = 0; i < req->n_headers; i++)
        if (name_is(req->headers[i].name, name))
            return &req->headers[i];
    return NULL;
}

bool h1_str_is(h1_str_t s, const char *lit)
{
    return s.len == strlen(lit) && memcmp(s.p, lit, s.len) == 0;
}
