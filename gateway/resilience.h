/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resilience.h - the live resilience page (docs/gateway.md, "The live
 * resilience page"), served by the admin port (adminport.h):
 *
 *   GET /debug/resilience       the page: one self-contained HTML file
 *                               (resilience.html, embedded at build time:
 *                               inline CSS and JS, no external URL)
 *   GET /debug/resilience.json  its feed: {"service":"gateway","peers":[..],
 *                               "resilience":<rs_snapshot_json of catalog and
 *                               order>}
 *
 * The page polls the feed, and the feed's peers: the admin ports of other
 * processes (GATEWAY_RESILIENCE_PEERS, e.g. order, whose own upstream is the
 * catalog), whose /debug/resilience.json (pkg/ops) it fetches cross-origin.
 * Both are written on the admin thread; the feed reads atomics and copies
 * the journal's rings out (a memcpy under a lock no call ever holds
 * longer), so no loop thread waits for it.
 */
#ifndef GW_RESILIENCE_H
#define GW_RESILIENCE_H

#include "admin/admin.h"
#include "routes.h"

/* The feed path every process serves it under (gateway, pkg/ops). */
#define GW_RESILIENCE_FEED "/debug/resilience.json"

/* The page, as text/html. */
void gw_resilience_page_write(admin_buf_t *out);
/* The feed of the upstreams ups[GW_UPSTREAM_COUNT] (borrowed) with the
 * peers of peers (checked by gw_resilience_peers_check); false when out of
 * memory (an error body is written). */
bool gw_resilience_feed_write(const char *peers, rs_upstream_t *const *ups, admin_buf_t *out);

/*
 * GATEWAY_RESILIENCE_PEERS: "" or "none" (no peers), or a comma-separated
 * list of name=base-URL, e.g. "order=http://127.0.0.1:9467": a name of
 * [A-Za-z0-9_.-]{1,63} and an http:// or https:// URL of a process's admin
 * port as the browser reaches it (the page appends GW_RESILIENCE_FEED), made
 * of URL characters only (no quotes, spaces, '<', '>', '\\'). SVC_EINVAL
 * with the entry in errbuf. Pure.
 */
svc_err_t gw_resilience_peers_check(const char *spec, char errbuf[static SVC_ERRBUF_LEN]);

/* The peers as a JSON array [{"service":"order","url":"http://127.0.0.1:9467
 * /debug/resilience.json"}, ...] into buf (cap bytes, NUL-terminated when cap
 * > 0); returns the length it needs, like snprintf. spec must have passed
 * gw_resilience_peers_check(). Pure. */
size_t gw_resilience_peers_json(const char *spec, char *buf, size_t cap);

#endif
