/* SPDX-License-Identifier: Apache-2.0 */
/*
 * adminport.h - the gateway's admin listener (GATEWAY_ADMIN_LISTEN, loopback
 * by default): pkg/admin, the same port every service has, on a thread of
 * its own, serving what the public port does not (docs/gateway.md,
 * "Security"):
 *
 *   GET /healthz                 200 "ok"
 *   GET /readyz                  each upstream's breaker state, channel
 *                                connectivity and target; 503 as the public
 *                                /readyz (ops.h)
 *   GET /metrics                 Prometheus text: the gateway's HTTP and
 *                                connection series, the fail-fast windows,
 *                                rs_metrics_render() of every upstream
 *   GET /debug/resilience        the live resilience page (resilience.h)
 *   GET /debug/resilience.json   its feed
 *
 * Threads: the callbacks run on the admin thread, beside the loops. What
 * they read guards itself: the metrics are relaxed atomics, the stale
 * cache's figures are read under its mutex, the fail-fast windows under
 * their read-write locks, the upstreams' breakers and journals under
 * pkg/resilience's own locks (rs_metrics_render, rs_snapshot_json: a memcpy
 * at most), the channels' connectivity through gRPC's thread-safe check. No
 * loop thread ever waits for the admin thread.
 */
#ifndef GW_ADMINPORT_H
#define GW_ADMINPORT_H

#include "admin/admin.h"
#include "dispatch.h"

/* Binds cfg->admin_listen ("none": nothing, *out NULL) and starts serving
 * app (borrowed: it must outlive the server). *out owned by caller
 * (admin_server_free, before app's parts are freed). SVC_EINVAL or
 * SVC_EUNAVAIL (the port in use) with errbuf. */
svc_err_t gw_admin_start(gw_app_t *app, admin_server_t **out, char errbuf[static SVC_ERRBUF_LEN]);

#endif
