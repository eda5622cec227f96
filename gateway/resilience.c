/* SPDX-License-Identifier: Apache-2.0 */
/* resilience.c - the live resilience page and its feed (see resilience.h). */
#include <stdio.h>
#include <string.h>

#include <h2o.h>

#include "dispatch.h"
#include "resilience.h"

/* resilience.html's bytes (gateway/CMakeLists.txt, proto/embed.cmake). */
extern const unsigned char gw_resilience_html[];
extern const size_t gw_resilience_html_len;

#define PEER_NAME_MAX 63
/* RFC 3986's unreserved, gen-delims and sub-delims, and '%': what a URL may
 * hold without quoting. None of them needs escaping in a JSON string. */
#define URL_CHARS                                                                            \
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%"

void gw_resilience_page(struct gw_app *app, h2o_mem_pool_t *pool, gw_reply_t *out)
{
    (void)app;
    (void)pool;
    out->status = 200;
    out->content_type = "text/html; charset=utf-8";
    out->body = (const char *)gw_resilience_html; /* static: h2o_send_inline copies it */
    out->len = gw_resilience_html_len;
}

static bool no_peers(const char *spec)
{
    return spec[0] == '\0' || strcmp(spec, "none") == 0;
}

/* One entry "name=url" of len bytes: where its URL starts, or NULL. */
static const char *peer_url(const char *e, size_t len)
{
    const char *eq = memchr(e, '=', len), *url;
    size_t name_len = eq != NULL ? (size_t)(eq - e) : 0, url_len;

    if (eq == NULL || name_len == 0 || name_len > PEER_NAME_MAX)
        return NULL;
    url = eq + 1;
    for (size_t i = 0; i < name_len; i++)
        if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-", e[i]) ==
            NULL)
            return NULL;
    url_len = len - name_len - 1;
    if (!(url_len > 7 && strncmp(url, "http://", 7) == 0) &&
        !(url_len > 8 && strncmp(url, "https://", 8) == 0))
        return NULL;
    for (size_t i = 0; i < url_len; i++)
        if (url[i] == ',' || strchr(URL_CHARS, url[i]) == NULL)
            return NULL;
    return url;
}

svc_err_t gw_resilience_peers_check(const char *spec, char errbuf[static SVC_ERRBUF_LEN])
{
    const char *e = spec;

    if (no_peers(spec))
        return SVC_OK;
    for (;;) {
        size_t len = strcspn(e, ",");
        if (peer_url(e, len) == NULL) {
            svc_errbuf_set(errbuf,
                           "GATEWAY_RESILIENCE_PEERS: \"%.*s\" is not name=http://host:port "
                           "(name [A-Za-z0-9_.-]{1,63}, the URL without quotes or spaces)",
                           (int)(len > 100 ? 100 : len), e);
            return SVC_EINVAL;
        }
        if (e[len] == '\0')
            return SVC_OK;
        e += len + 1;
    }
}

size_t gw_resilience_peers_json(const char *spec, char *buf, size_t cap)
{
    svc_text_t t = {buf, cap, 0};
    const char *e = spec;

    if (cap > 0)
        buf[0] = '\0';
    svc_text_printf(&t, "[");
    while (!no_peers(spec)) {
        size_t len = strcspn(e, ","), url_len;
        const char *url = peer_url(e, len);

        if (url == NULL)
            break; /* not checked: stop rather than write what it says */
        url_len = len - (size_t)(url - e);
        while (url_len > 0 && url[url_len - 1] == '/')
            url_len--;
        svc_text_printf(&t, "%s{\"service\":\"%.*s\",\"url\":\"%.*s%s\"}", e == spec ? "" : ",",
                        (int)(url - 1 - e), e, (int)url_len, url, GW_RESILIENCE_FEED);
        if (e[len] == '\0')
            break;
        e += len + 1;
    }
    svc_text_printf(&t, "]");
    return t.len;
}

/* The feed's length now (a render of cap 0 only sizes it). */
static size_t snapshot_len(rs_upstream_t *const *ups)
{
    size_t need = 0;
    svc_err_t err = rs_snapshot_json(ups, GW_UPSTREAM_COUNT, NULL, 0, &need);

    return err == SVC_OK || err == SVC_ERANGE ? need : 0;
}

/* {"service":"gateway","peers":[..],"resilience":{..}} into the pool. The
 * document is sized first; one that grew in between (a new decision) is
 * sized again. */
void gw_resilience_feed(struct gw_app *app, h2o_mem_pool_t *pool, gw_reply_t *out)
{
    static const char tail[] = "}\n";
    rs_upstream_t *ups[GW_UPSTREAM_COUNT];
    const char *peers = app->cfg->resilience_peers;
    size_t head = gw_resilience_peers_json(peers, NULL, 0) + 64, got = 0;

    for (int id = 0; id < GW_UPSTREAM_COUNT; id++)
        ups[id] = rs_grpc_client_upstream(gw_upstream_client(app->ups, (gw_upstream_id_t)id));
    for (int tries = 0; tries < 3; tries++) {
        char *body;
        size_t n, cap;

        cap = head + snapshot_len(ups) + 1024 + sizeof tail; /* room for what comes meanwhile */
        body = h2o_mem_alloc_pool(pool, cap);
        n = (size_t)snprintf(body, cap, "{\"service\":\"gateway\",\"peers\":");
        n += gw_resilience_peers_json(peers, body + n, cap - n);
        n += (size_t)snprintf(body + n, cap - n, ",\"resilience\":");
        if (rs_snapshot_json(ups, GW_UPSTREAM_COUNT, body + n, cap - n - sizeof tail, &got) !=
            SVC_OK)
            continue;
        memcpy(body + n + got, tail, sizeof tail);
        *out = (gw_reply_t){200, "application/json", body, n + got + sizeof tail - 1};
        return;
    }
    *out = (gw_reply_t){500, "application/json",
                        "{\"code\":13,\"message\":\"cannot render the resilience feed\","
                        "\"details\":[]}",
                        0};
    out->len = strlen(out->body);
}
