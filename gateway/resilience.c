/* SPDX-License-Identifier: Apache-2.0 */
/* resilience.c - the live resilience page and its feed (see resilience.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resilience.h"

/* resilience.html's bytes (gateway/CMakeLists.txt, proto/embed.cmake). */
extern const unsigned char gw_resilience_html[];
extern const size_t gw_resilience_html_len;

#define PEER_NAME_MAX 63
/* RFC 3986's unreserved, gen-delims and sub-delims, and '%': what a URL may
 * hold without quoting. None of them needs escaping in a JSON string. */
#define URL_CHARS                                                                                  \
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%"

void gw_resilience_page_write(admin_buf_t *out)
{
    admin_buf_set_content_type(out, "text/html; charset=utf-8");
    admin_buf_printf(out, "%.*s", (int)gw_resilience_html_len, (const char *)gw_resilience_html);
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

typedef struct ups_list {
    rs_upstream_t *const *ups;
} ups_list_t;

static svc_err_t snapshot_render(const void *arg, char *buf, size_t cap, size_t *len)
{
    return rs_snapshot_json(((const ups_list_t *)arg)->ups, GW_UPSTREAM_COUNT, buf, cap, len);
}

bool gw_resilience_feed_write(const char *peers, rs_upstream_t *const *ups, admin_buf_t *out)
{
    size_t need = gw_resilience_peers_json(peers, NULL, 0);
    char *list = malloc(need + 1);
    ups_list_t l = {ups};

    if (list == NULL) {
        admin_buf_printf(out, "{\"error\":\"out of memory\"}\n");
        return false;
    }
    gw_resilience_peers_json(peers, list, need + 1);
    admin_buf_printf(out, "{\"service\":\"gateway\",\"peers\":%s,\"resilience\":", list);
    free(list);
    admin_buf_render(out, snapshot_render, &l);
    admin_buf_printf(out, "}\n");
    return true;
}
