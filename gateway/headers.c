/* SPDX-License-Identifier: Apache-2.0 */
/*
 * headers.c - the request's head (see headers.h): where h2o keeps the head
 * as received, for the framing check, and the gRPC metadata built from the
 * headers (grpc-gateway runtime/context.go annotateContext).
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <h2o/version.h>

#include "headers.h"
#include "http.h"

#define LOG_MOD "gateway"

h2o_socket_t *gw_req_socket(h2o_req_t *req)
{
    return req->conn->callbacks->get_socket != NULL ? req->conn->callbacks->get_socket(req->conn)
                                                    : NULL;
}

/* ------------------------------------------------------------------------
 * Framing (RFC 9112 §5, §6.3)
 * ------------------------------------------------------------------------ */

#if H2O_VERSION_MAJOR == 2 && H2O_VERSION_MINOR <= 2
/*
 * h2o 2.2 frames a request by its first Content-Length (or its last
 * Transfer-Encoding, which wins over any Content-Length) and keeps neither
 * in req->headers, so a second, conflicting Content-Length is invisible
 * here; it also passes a folded line on as a header with an empty name.
 * The head as received is still at the start of the connection's input
 * buffer while the request is handled: h2o consumes it only once the
 * response is done (lib/http1.c, on_send_complete). The method at its start
 * shows that it is this request's head.
 */
static bool raw_head(h2o_req_t *req, const char **head, size_t *len)
{
    h2o_socket_t *sock = gw_req_socket(req);
    size_t mlen = req->input.method.len;

    if (sock == NULL || sock->input == NULL || sock->input->size <= mlen ||
        memcmp(sock->input->bytes, req->input.method.base, mlen) != 0)
        return false;
    *head = sock->input->bytes;
    *len = sock->input->size;
    return true;
}
#else
#error "check how this h2o version frames requests before relying on raw_head()"
#endif

int gw_framing_verdict(h2o_req_t *req, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *head;
    size_t len;

    if (!raw_head(req, &head, &len)) {
        svc_log_error(LOG_MOD, "the request head is not in the connection's buffer: cannot "
                               "check its framing, refused");
        svc_errbuf_set(errbuf, "cannot check the request's framing");
        return 13;
    }
    return gw_http1_framing_check(head, len, req->version < 0x101, errbuf) ? 0 : 3;
}

/* ------------------------------------------------------------------------
 * Metadata (grpc-gateway runtime/context.go annotateContext)
 * ------------------------------------------------------------------------ */

/* The headers grpc-gateway forwards as grpcgateway-<name> (isPermanentHTTPHeader),
 * but Authorization: the gateway verifies the bearer token itself and sends
 * the services what it proved (pkg/principal), never the token, which would
 * only be one more place to leak it from. Host, Expect and Content-Length
 * never reach req->headers in h2o. */
static const char *const permanent[] = {
    "accept",
    "accept-charset",
    "accept-language",
    "accept-ranges",
    "cache-control",
    "content-type",
    "cookie",
    "date",
    "from",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-schedule-tag-match",
    "if-unmodified-since",
    "max-forwards",
    "origin",
    "pragma",
    "referer",
    "user-agent",
    "via",
    "warning",
};

/* Keys gRPC reserves or transports itself (grpc-go drops them too), and the
 * x-shopmicro- keys the gateway sets itself: the caller's principal
 * (pkg/principal) must come from its token, never from a client's
 * Grpc-Metadata-X-Shopmicro-Subject. */
static bool reserved_key(const char *k, size_t len)
{
    static const char *const names[] = {"content-type", "te",         "user-agent",
                                        "host",         "connection", "x-request-id"};

    if (len == 0 || k[0] == ':' || (len >= 5 && memcmp(k, "grpc-", 5) == 0) ||
        (len >= 12 && memcmp(k, "x-shopmicro-", 12) == 0))
        return true;
    for (size_t i = 0; i < SVC_COUNTOF(names); i++)
        if (strlen(names[i]) == len && memcmp(names[i], k, len) == 0)
            return true;
    return false;
}

static bool valid_key(const char *k, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = k[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
            return false;
    }
    return len > 0;
}

/* gRPC's rule for a text value: printable ASCII. */
static bool valid_value(const char *v, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
            return false;
    return true;
}

/* The metadata of one call, as it is built. Everything forwarded counts
 * against the upstream's metadata limit the way gRPC counts it, so that the
 * gateway, not the upstream, refuses a request whose headers are too large:
 * the upstream's answer (RESOURCE_EXHAUSTED, 429) would tell the client to
 * retry later, which never helps. */
typedef struct md_builder {
    h2o_req_t *req;
    rpc_md_t *md;
    size_t n;
    size_t bytes, limit;
    bool too_large;
    char *errbuf; /* set with too_large: names the header */
} md_builder_t;

/* Adds prefix + key = val, forwarded from the request header `from`. */
static void md_add(md_builder_t *b, h2o_iovec_t from, const char *prefix, const char *key,
                   size_t klen, const char *val, size_t vlen)
{
    size_t plen = strlen(prefix), size = plen + klen + vlen + GW_MD_ENTRY_OVERHEAD;
    char *k;

    if (b->too_large)
        return;
    if (!valid_value(val, vlen)) {
        svc_log_debug(LOG_MOD, "metadata %s%.*s skipped: value is not printable ASCII", prefix,
                      (int)klen, key);
        return;
    }
    if (b->n == GW_MAX_MD) {
        svc_log_debug(LOG_MOD, "metadata %s%.*s skipped: at most %d entries per call", prefix,
                      (int)klen, key, GW_MAX_MD);
        return;
    }
    if (size > b->limit - b->bytes) {
        svc_errbuf_set(b->errbuf,
                       "request header %.*s is too large: the headers forwarded "
                       "upstream as gRPC metadata may total %zu bytes, and with it "
                       "they would be %zu",
                       (int)from.len, from.base, b->limit, b->bytes + size);
        b->too_large = true;
        return;
    }
    k = h2o_mem_alloc_pool(&b->req->pool, plen + klen + 1);
    memcpy(k, prefix, plen);
    memcpy(k + plen, key, klen);
    k[plen + klen] = '\0';
    b->md[b->n].key = k;
    b->md[b->n].value = h2o_strdup(&b->req->pool, val, vlen).base;
    b->n++;
    b->bytes += size;
}

/* The header's name as the client wrote it. */
static h2o_iovec_t name_of(const h2o_header_t *h)
{
    return h2o_iovec_init(h->orig_name != NULL ? h->orig_name : h->name->base, h->name->len);
}

static void md_add_header(md_builder_t *b, const char *prefix, const char *key, size_t klen,
                          const h2o_header_t *h)
{
    md_add(b, name_of(h), prefix, key, klen, h->value.base, h->value.len);
}

const h2o_header_t *gw_find_header(h2o_req_t *req, const char *name, size_t len)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, len, -1);

    return i == -1 ? NULL : &req->headers.entries[i];
}

#define GRPC_MD_PREFIX "grpc-metadata-"

static bool is_idempotency_key(const h2o_header_t *h)
{
    const h2o_iovec_t *n = h->name;
    size_t plen = strlen(GRPC_MD_PREFIX);

    if (n->len > plen && memcmp(n->base, GRPC_MD_PREFIX, plen) == 0)
        return h2o_memis(n->base + plen, n->len - plen, H2O_STRLIT("idempotency-key"));
    return h2o_memis(n->base, n->len, H2O_STRLIT("idempotency-key"));
}

/*
 * The request's idempotency key, checked where it enters: the service
 * honours it byte for byte, so a key that cannot be sent as it is (not
 * printable ASCII, too long) or that is ambiguous (given twice, perhaps
 * once as Grpc-Metadata-Idempotency-Key) is refused, never dropped.
 * *out is NULL when the request has none.
 */
static bool idempotency_key(h2o_req_t *req, const h2o_header_t **out,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    const h2o_header_t *key = NULL;
    char name[64];

    for (size_t i = 0; i < req->headers.size; i++) {
        const h2o_header_t *h = &req->headers.entries[i];
        if (!is_idempotency_key(h))
            continue;
        if (key != NULL) {
            svc_errbuf_set(errbuf, "more than one Idempotency-Key header (%.*s and %.*s)",
                           (int)name_of(key).len, name_of(key).base, (int)name_of(h).len,
                           name_of(h).base);
            return false;
        }
        key = h;
    }
    *out = key;
    if (key == NULL)
        return true;
    snprintf(name, sizeof name, "%.*s", (int)name_of(key).len, name_of(key).base);
    return gw_idempotency_key_check(name, key->value.base, key->value.len, errbuf);
}

static void md_add_grpc_metadata(md_builder_t *b)
{
    size_t plen = strlen(GRPC_MD_PREFIX);

    for (size_t i = 0; i < b->req->headers.size; i++) {
        const h2o_header_t *e = &b->req->headers.entries[i];
        const char *k = e->name->base + plen;
        size_t klen = e->name->len - plen;

        if (e->name->len <= plen || memcmp(e->name->base, GRPC_MD_PREFIX, plen) != 0 ||
            is_idempotency_key(e))
            continue;
        if (klen >= 4 && memcmp(k + klen - 4, "-bin", 4) == 0) {
            /* rpc_md_t values are C strings: binary metadata cannot pass. */
            svc_log_debug(LOG_MOD, "metadata %.*s skipped: binary metadata is not supported",
                          (int)klen, k);
            continue;
        }
        if (!valid_key(k, klen) || reserved_key(k, klen)) {
            svc_log_debug(LOG_MOD, "metadata %.*s skipped: reserved or invalid key", (int)klen, k);
            continue;
        }
        md_add_header(b, "", k, klen, e);
    }
}

/* x-forwarded-host (the header, else Host) and x-forwarded-for (the
 * header's value, then the peer's address). */
static void md_add_forwarded(md_builder_t *b)
{
    h2o_req_t *req = b->req;
    const h2o_header_t *h;
    struct sockaddr_storage ss;
    socklen_t sl;
    size_t iplen = SIZE_MAX;
    char ip[64];

    if ((h = gw_find_header(req, H2O_STRLIT("x-forwarded-host"))) != NULL)
        md_add_header(b, "", H2O_STRLIT("x-forwarded-host"), h);
    else if (req->input.authority.len > 0)
        md_add(b, h2o_iovec_init(H2O_STRLIT("Host")), "", H2O_STRLIT("x-forwarded-host"),
               req->input.authority.base, req->input.authority.len);
    sl = req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)&ss);
    if (sl > 0)
        iplen = h2o_socket_getnumerichost((struct sockaddr *)&ss, sl, ip);
    if (iplen == SIZE_MAX)
        return;
    h = gw_find_header(req, H2O_STRLIT("x-forwarded-for"));
    if (h != NULL) {
        char *v = h2o_mem_alloc_pool(&req->pool, h->value.len + iplen + 3);
        int n = snprintf(v, h->value.len + iplen + 3, "%.*s, %.*s", (int)h->value.len,
                         h->value.base, (int)iplen, ip);
        md_add(b, name_of(h), "", H2O_STRLIT("x-forwarded-for"), v, (size_t)n);
    } else {
        md_add(b, h2o_iovec_init(H2O_STRLIT("X-Forwarded-For")), "", H2O_STRLIT("x-forwarded-for"),
               ip, iplen);
    }
}

/* See headers.h. */
/* Who the token proved the caller is (principal.h), first, so that no
 * client header can crowd it out of the entries a call may have. */
static void md_add_principal(md_builder_t *b, const gw_principal_t *who)
{
    char *scopes;
    size_t len;

    if (who == NULL)
        return;
    md_add(b, h2o_iovec_init(H2O_STRLIT("Authorization")), "", H2O_STRLIT(PR_MD_SUBJECT), who->sub,
           strlen(who->sub));
    scopes = h2o_mem_alloc_pool(&b->req->pool, PR_SCOPES_TEXT_MAX);
    len = pr_scopes_format(who->scopes, scopes, PR_SCOPES_TEXT_MAX);
    md_add(b, h2o_iovec_init(H2O_STRLIT("Authorization")), "", H2O_STRLIT(PR_MD_SCOPES), scopes,
           len);
}

int gw_build_metadata(h2o_req_t *req, const gw_config_t *cfg, const char *id,
                      const gw_principal_t *who, rpc_md_t *md, size_t *n,
                      char errbuf[static SVC_ERRBUF_LEN])
{
    md_builder_t b = {req, md, 0, 0, (size_t)cfg->max_metadata_bytes, false, errbuf};
    const h2o_header_t *h;

    if (!idempotency_key(req, &h, errbuf))
        return 400;
    md_add(&b, h2o_iovec_init(H2O_STRLIT("X-Request-Id")), "", H2O_STRLIT("x-request-id"), id,
           strlen(id));
    md_add_principal(&b, who);
    if (h != NULL)
        md_add_header(&b, "", H2O_STRLIT("idempotency-key"), h);
    md_add_grpc_metadata(&b);
    md_add_forwarded(&b);
    for (size_t i = 0; i < SVC_COUNTOF(permanent); i++)
        if ((h = gw_find_header(req, permanent[i], strlen(permanent[i]))) != NULL)
            md_add_header(&b, "grpcgateway-", permanent[i], strlen(permanent[i]), h);
    *n = b.n;
    return b.too_large ? 431 : 0;
}

/* ------------------------------------------------------------------------
 * The other way: reply metadata to response headers
 * ------------------------------------------------------------------------ */

#define MD_PREFIX "Grpc-Metadata-"

void gw_add_response_metadata(h2o_req_t *req, const rpc_header_md_t *h)
{
    const char *key, *value;
    size_t pos = 0;

    while (rpc_header_md_next(h, &pos, &key, &value)) {
        size_t kl = strlen(key), n = sizeof MD_PREFIX - 1 + kl;
        char *lower = h2o_mem_alloc_pool(&req->pool, n + 1);
        char *name = h2o_mem_alloc_pool(&req->pool, n + 1);
        bool up = true;

        /* gRPC keys are [0-9a-z_.-]: lower is the key as it came, name the
         * form Go's textproto.CanonicalMIMEHeaderKey gives it. */
        snprintf(lower, n + 1, "grpc-metadata-%s", key);
        snprintf(name, n + 1, MD_PREFIX "%s", key);
        for (size_t i = sizeof MD_PREFIX - 1; i < n; i++) {
            if (up && name[i] >= 'a' && name[i] <= 'z')
                name[i] = (char)(name[i] - 'a' + 'A');
            up = name[i] == '-';
        }
        gw_http_add_header(req, lower, name, value, strlen(value));
    }
}
