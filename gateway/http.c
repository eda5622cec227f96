/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.c - gRPC status -> HTTP status, Grpc-Timeout, request ids, and
 * sending a response (an error's body is status.c's).
 *
 * The status table and the body follow grpc-gateway v2 (runtime/errors.go,
 * DefaultHTTPErrorHandler) so that clients written against the Go gateway
 * see the same answers; see docs/gateway.md.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <h2o.h>

#include "http.h"

/* runtime.HTTPStatusFromCode. CANCELLED is 499 since grpc-gateway v2.13. */
static const short status_of_code[17] = {
    200, /* OK */
    499, /* CANCELLED */
    500, /* UNKNOWN */
    400, /* INVALID_ARGUMENT */
    504, /* DEADLINE_EXCEEDED */
    404, /* NOT_FOUND */
    409, /* ALREADY_EXISTS */
    403, /* PERMISSION_DENIED */
    429, /* RESOURCE_EXHAUSTED */
    400, /* FAILED_PRECONDITION: deliberately not 412 */
    409, /* ABORTED */
    400, /* OUT_OF_RANGE */
    501, /* UNIMPLEMENTED */
    500, /* INTERNAL */
    503, /* UNAVAILABLE */
    500, /* DATA_LOSS */
    401, /* UNAUTHENTICATED */
};

int gw_http_status_from_grpc(int code)
{
    if (code < 0 || code >= (int)SVC_COUNTOF(status_of_code))
        return 500;
    return status_of_code[code];
}

const char *gw_http_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 413:
        return "Request Entity Too Large";
    case 417:
        return "Expectation Failed";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 499:
        return "Client Closed Request";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    }
    return "Unknown";
}

bool gw_grpc_timeout_parse(const char *s, size_t len, int64_t *out_ns)
{
    int64_t unit, v;
    uint64_t u = 0, limit;
    bool neg = false;
    size_t i = 0;

    /* runtime/context.go timeoutDecode: at least "<digit><unit>". */
    if (len < 2)
        return false;
    switch (s[len - 1]) {
    case 'H':
        unit = 3600 * INT64_C(1000000000);
        break;
    case 'M':
        unit = 60 * INT64_C(1000000000);
        break;
    case 'S':
        unit = INT64_C(1000000000);
        break;
    case 'm':
        unit = INT64_C(1000000);
        break;
    case 'u':
        unit = INT64_C(1000);
        break;
    case 'n':
        unit = 1;
        break;
    default:
        return false;
    }
    len--;
    if (s[0] == '+' || s[0] == '-') {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == len)
        return false;
    /* strconv.ParseInt(v, 10, 64): a value outside int64 is an error. */
    limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < len; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (s[i] < '0' || s[i] > '9' || u > (limit - d) / 10)
            return false;
        u = u * 10 + d;
    }
    if (!neg)
        v = (int64_t)u;
    else
        v = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
    /* Go multiplies and wraps around; saturating keeps the meaning. */
    if (v > INT64_MAX / unit)
        *out_ns = INT64_MAX;
    else if (v < INT64_MIN / unit)
        *out_ns = INT64_MIN;
    else
        *out_ns = v * unit;
    return true;
}

/* start_ns + ns (ns > 0); a sum past the clock's end saturates to "none". */
static uint64_t deadline_after(uint64_t start_ns, uint64_t ns)
{
    return ns > SVC_DEADLINE_NONE - start_ns - 1 ? SVC_DEADLINE_NONE : start_ns + ns;
}

gw_timeout_verdict_t gw_grpc_timeout_deadline(const char *s, size_t len, int64_t default_ms,
                                              uint64_t start_ns, uint64_t now_ns,
                                              uint64_t *deadline_ns,
                                              char errbuf[static SVC_ERRBUF_LEN])
{
    uint64_t at;
    int64_t ns;

    /* Go's Header.Get cannot tell an empty value from no header. */
    if (s == NULL || len == 0) {
        *deadline_ns = default_ms > 0
                           ? deadline_after(start_ns, (uint64_t)default_ms * SVC_NS_PER_MS)
                           : SVC_DEADLINE_NONE;
        return GW_TIMEOUT_OK;
    }
    if (!gw_grpc_timeout_parse(s, len, &ns)) {
        svc_errbuf_set(errbuf, "invalid grpc-timeout: %.*s", (int)(len < 200 ? len : 200), s);
        return GW_TIMEOUT_INVALID;
    }
    if (ns == 0) { /* annotateContext only sets a timeout that is not 0 */
        *deadline_ns = SVC_DEADLINE_NONE;
        return GW_TIMEOUT_OK;
    }
    /* A context whose deadline has passed is done before the call starts:
     * nothing is sent, and no stale answer may stand in, since the catalog's
     * availability was never in question. */
    at = ns > 0 ? deadline_after(start_ns, (uint64_t)ns) : start_ns;
    if (ns < 0 || at <= now_ns) {
        svc_errbuf_set(errbuf, "%s", svc_strerror(SVC_ETIMEDOUT));
        return GW_TIMEOUT_EXPIRED;
    }
    *deadline_ns = at;
    return GW_TIMEOUT_OK;
}

size_t gw_request_id_sanitize(const char *in, size_t len, char out[GW_REQUEST_ID_MAX + 1])
{
    size_t n = 0;

    for (size_t i = 0; i < len && n < GW_REQUEST_ID_MAX; i++) {
        char c = in[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("-_.:/+=@", c) != NULL)
            out[n++] = c;
    }
    out[n] = '\0';
    return n;
}

/* RFC 9110 §5.6.2: a field name is a token. */
static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool name_is(const char *n, size_t len, const char *lower)
{
    return strlen(lower) == len && h2o_lcstris(n, len, lower, len);
}

/* What the header lines seen so far say about the body's length. */
typedef struct framing {
    const char *cl; /* the first Content-Length value; NULL: none yet */
    size_t cl_len;
    bool te;
} framing_t;

static bool framing_content_length(framing_t *f, const char *v, size_t len,
                                   char errbuf[static SVC_ERRBUF_LEN])
{
    size_t digits = 0;

    while (digits < len && v[digits] >= '0' && v[digits] <= '9')
        digits++;
    if (len == 0 || digits != len) {
        svc_errbuf_set(errbuf, "Content-Length must be one decimal number, not \"%.*s\"",
                       (int)(len < 64 ? len : 64), v);
        return false;
    }
    if (f->cl != NULL && (f->cl_len != len || memcmp(f->cl, v, len) != 0)) {
        svc_errbuf_set(errbuf, "conflicting Content-Length headers: %.*s and %.*s",
                       (int)(f->cl_len < 32 ? f->cl_len : 32), f->cl, (int)(len < 32 ? len : 32),
                       v);
        return false;
    }
    f->cl = v;
    f->cl_len = len;
    return true;
}

/* One header line, without its line ending. */
static bool framing_line(framing_t *f, const char *line, size_t len,
                         char errbuf[static SVC_ERRBUF_LEN])
{
    const char *colon = memchr(line, ':', len);
    size_t nlen = colon != NULL ? (size_t)(colon - line) : len, vlen;
    const char *v;

    if (line[0] == ' ' || line[0] == '\t') {
        svc_errbuf_set(errbuf, "obsolete line folding (a header line that starts with "
                               "whitespace) is not allowed");
        return false;
    }
    for (size_t i = 0; i < nlen; i++) {
        if (!is_tchar((unsigned char)line[i])) {
            svc_errbuf_set(errbuf,
                           "invalid header name \"%.*s\": whitespace or a separator "
                           "in a name, or before its colon",
                           (int)(nlen < 64 ? nlen : 64), line);
            return false;
        }
    }
    if (colon == NULL || nlen == 0) {
        svc_errbuf_set(errbuf, "a header line without a name and a colon");
        return false;
    }
    v = colon + 1;
    vlen = len - nlen - 1;
    while (vlen > 0 && (v[0] == ' ' || v[0] == '\t'))
        v++, vlen--;
    while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
        vlen--;
    if (name_is(line, nlen, "content-length"))
        return framing_content_length(f, v, vlen, errbuf);
    if (name_is(line, nlen, "transfer-encoding")) {
        if (f->te) {
            svc_errbuf_set(errbuf, "more than one Transfer-Encoding header");
            return false;
        }
        f->te = true;
    }
    return true;
}

bool gw_http1_framing_check(const char *head, size_t len, bool http10,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    framing_t f = {NULL, 0, false};
    const char *end = head + len, *p = memchr(head, '\n', len);

    /* The request line has been parsed by h2o; the header lines follow. */
    while (p != NULL && ++p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n;

        if (nl == NULL)
            break;
        n = (size_t)(nl - p);
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (n == 0) {
            if (f.te && f.cl != NULL) {
                svc_errbuf_set(errbuf, "both Content-Length and Transfer-Encoding: the body's "
                                       "length is ambiguous");
                return false;
            }
            if (f.te && http10) {
                svc_errbuf_set(errbuf, "Transfer-Encoding in an HTTP/1.0 request");
                return false;
            }
            return true;
        }
        if (!framing_line(&f, p, n, errbuf))
            return false;
        p = nl;
    }
    svc_errbuf_set(errbuf, "the request head has no end");
    return false;
}

bool gw_idempotency_key_check(const char *name, const char *v, size_t len,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    size_t bad;

    if (svc_idempotency_key_valid(v, len))
        return true;
    if (len < SVC_IDEMPOTENCY_KEY_MIN || len > SVC_IDEMPOTENCY_KEY_MAX) {
        svc_errbuf_set(errbuf, "%s must be %d-%d printable ASCII characters, not %zu bytes", name,
                       SVC_IDEMPOTENCY_KEY_MIN, SVC_IDEMPOTENCY_KEY_MAX, len);
        return false;
    }
    bad = svc_idempotency_key_bad_byte(v, len);
    svc_errbuf_set(errbuf,
                   "%s must be printable ASCII without spaces (0x%02X-0x%02X): byte %zu is "
                   "0x%02X",
                   name, SVC_IDEMPOTENCY_KEY_FIRST, SVC_IDEMPOTENCY_KEY_LAST, bad,
                   (unsigned char)v[bad]);
    return false;
}

uint32_t gw_retry_after_seconds(uint32_t ms)
{
    uint32_t s = ms / 1000 + (ms % 1000 != 0);

    return s > 0 ? s : 1;
}

void gw_http_send(h2o_req_t *req, int status, const char *content_type, const char *body,
                  size_t len)
{
    req->res.status = status;
    req->res.reason = gw_http_reason(status);
    req->res.content_length = len;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, "Content-Type",
                   content_type, strlen(content_type));
    h2o_send_inline(req, body, len);
}

void gw_http_add_header(h2o_req_t *req, const char *lower, const char *name, const char *value,
                        size_t len)
{
    h2o_iovec_t v = h2o_strdup(&req->pool, value, len);

    h2o_add_header_by_str(&req->pool, &req->res.headers, lower, strlen(lower), 1, name, v.base,
                          v.len);
}

void gw_http_send_error(h2o_req_t *req, const gw_error_t *e)
{
    size_t need = gw_error_body(NULL, 0, e);
    char *body = h2o_mem_alloc_pool(&req->pool, need + 1);

    gw_error_body(body, need + 1, e);
    if (e->code == 16 && h2o_find_header(&req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, -1) == -1) {
        /* errors.go: the status message goes into WWW-Authenticate (unless
         * the gateway's own token check has put its challenge there). */
        h2o_iovec_t v = h2o_strdup(&req->pool, e->message, SIZE_MAX);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE,
                       "WWW-Authenticate", v.base, v.len);
    }
    if (e->retry_after_s > 0) {
        char *v = h2o_mem_alloc_pool(&req->pool, 12);
        int n = snprintf(v, 12, "%u", e->retry_after_s);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, "Retry-After", v,
                       (size_t)n);
    }
    gw_http_send(req, e->status != 0 ? e->status : gw_http_status_from_grpc(e->code),
                 "application/json", body, need);
}
