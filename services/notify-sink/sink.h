/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sink.h - what the notify-sink does with a request (the HTTP server is
 * http.h): verify webhook deliveries, dedupe them by the signed webhook-id,
 * record them, and misbehave on request. docs/notify-sink.md has the routes.
 *
 *   POST <any other path>  a delivery: misbehaviour first (it stands for the
 *                          network and the receiver's infrastructure), then
 *                          the Standard Webhooks signature (pkg/webhook):
 *                          400 missing headers or an id with '.', 401 bad
 *                          or stale signature (neither is recorded), then
 *                          the dedupe key, webhook-id (signed; the
 *                          Idempotency-Key header is not): a known id is
 *                          answered 200 {"duplicate":true} and counted, not
 *                          recorded again. One log line per delivery.
 *   POST /control?...      fail=N[&status=S] | throttle=N&retry_after=V[&status=S]
 *                          | hang=N | away=SECONDS | reset=1
 *   GET /received          the recorded deliveries as JSON
 *   GET /metrics, /healthz
 *
 * Bounds: at most max_records deliveries are kept. The oldest is then
 * forgotten (for /received and for dedupe alike), but only once its
 * webhook-timestamp + tolerance has passed: until then a replay of it would
 * still verify, so a new id is refused 503 with Retry-After instead.
 *
 * Threads: one; every function runs on the HTTP server's thread.
 */
#ifndef NSK_SINK_H
#define NSK_SINK_H

#include "http.h"
#include "webhook/webhook.h"

typedef struct nsk_sink_opts {
    whk_keyset_t keys;   /* NOTIFY_WEBHOOK_SECRET(_FILE), parsed: any verifies */
    int64_t tolerance_s; /* webhook-timestamp vs now */
    size_t max_records;  /* >= 1 */
} nsk_sink_opts_t;

typedef struct nsk_sink nsk_sink_t;

/* SVC_EINVAL or SVC_ENOMEM; *out owned by caller. */
svc_err_t nsk_sink_new(const nsk_sink_opts_t *o, nsk_sink_t **out);
void nsk_sink_free(nsk_sink_t *s); /* NULL-safe */

/* The server whose listener "away" closes; set before serving. */
void nsk_sink_attach(nsk_sink_t *s, nsk_http_t *h);

/* The nsk_handler_fn of the server (ctx: the sink). */
void nsk_sink_handle(void *ctx, const nsk_req_t *req, nsk_resp_t *resp);

#endif /* NSK_SINK_H */
