/* SPDX-License-Identifier: Apache-2.0 */
/*
 * failfast.h - per-route fail-fast windows, opened by the upstream's own
 * refusals (docs/gateway.md, "Fail-fast windows").
 *
 * When an upstream refuses a call because a dependency of ITS OWN is
 * unavailable, and says for how long (order with its breaker for the catalog
 * open: UNAVAILABLE, marked a dependency failure, with grpc-retry-pushback-ms
 * = the rest of its cooldown), every other call of that route would be
 * refused the same way until then. So the gateway answers them itself, for
 * that route only, for min(the hint, max_window_ms): the same 503, the same
 * google.rpc.Status body (the refusal's message), Retry-After until the
 * hint's end, and no call. The upstream itself is fine, so its other routes
 * (GET /v1/orders/{id}) and the gateway's breaker for it are not touched.
 *
 * When the window has passed, exactly one call of the route goes out: the
 * probe. Until its verdict the others are still answered here (Retry-After
 * 1 s). A refusal with a hint opens the next window; any verdict of the
 * upstream closes it; a probe that was never sent or was cancelled says
 * nothing, and the next call probes instead. A probe that never reports is
 * given up at its lease (the call's deadline).
 *
 * Threads: gw_failfast_admit() runs on the loop threads, gw_failfast_end()
 * on the rs client's thread (a completion) or a loop thread (a call refused
 * before it was sent, or cancelled), gw_failfast_render() on a loop thread.
 * Each route's state has its own read-write lock, held for a few
 * assignments and a copy of at most SVC_ERRBUF_LEN bytes, never around a
 * call: the answers in a window read under it (the loops never wait for
 * each other), refusals and probes (a few a second) write. A route with no
 * window costs admit one atomic load. Nothing here blocks or allocates after
 * gw_failfast_new(). The clock is the caller's (now_ns), so tests drive it.
 */
#ifndef GW_FAILFAST_H
#define GW_FAILFAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "routes.h"
#include "rs/grpc.h"

/* The longest window a refusal opens, whatever its hint: a probe at least
 * this often per route. One probe a second costs the upstream next to
 * nothing, and a gateway in front of several order replicas learns within a
 * second that one of them can serve again (each replica has its own
 * breaker, so one replica's hint does not hold for the others). */
#define GW_FAILFAST_DEFAULT_MAX_WINDOW_MS 1000u
/* Retry-After while a probe is out and the hint has run out: its verdict is
 * due within an attempt (the same hint as a half-open breaker's). */
#define GW_FAILFAST_PROBE_RETRY_AFTER_MS 1000u

typedef struct gw_failfast gw_failfast_t;

typedef struct gw_failfast_opts {
    const gw_route_t *routes; /* borrowed; must outlive the object; one window per row */
    size_t n_routes;
    uint32_t max_window_ms; /* GW_FAILFAST_DEFAULT_MAX_WINDOW_MS; >= 1 */
} gw_failfast_opts_t;

/* Defaults (no routes). Cannot fail. */
void gw_failfast_opts_init(gw_failfast_opts_t *o);
/* *out owned by caller (gw_failfast_free). SVC_EINVAL (no routes,
 * max_window_ms 0) or SVC_ENOMEM. */
svc_err_t gw_failfast_new(const gw_failfast_opts_t *o, gw_failfast_t **out);
/* No call may be between admit and end. NULL-safe. */
void gw_failfast_free(gw_failfast_t *ff);

/*
 * Whether a finished call is such a refusal: UNAVAILABLE after an attempt,
 * ended not-retryable (the upstream marked it a dependency failure: rs
 * neither retries nor counts it against the upstream), with the upstream's
 * hint (retry_after_ms > 0). Our own breaker's or bulkhead's refusals (no
 * attempt), a crash, a timeout or a hint-less 503 are not. Pure.
 */
bool gw_failfast_is_refusal(const rs_grpc_result_t *res);

typedef enum gw_failfast_verdict {
    GW_FAILFAST_PASS,   /* no window: call as usual */
    GW_FAILFAST_PROBE,  /* the window has passed: this call is the probe */
    GW_FAILFAST_REFUSE, /* answer *res without calling */
} gw_failfast_verdict_t;

/*
 * Before a call of routes[route] at now_ns. Sets *ticket (0 unless PROBE),
 * which the call hands to gw_failfast_end(); lease_ns is when a probe that
 * has not reported is given up (the call's deadline). REFUSE fills *res:
 * SVC_EUNAVAIL, reason RS_REASON_PUSHBACK (the upstream asked to wait),
 * 0 attempts, retry_after_ms until the hint's end (>= 1), and the message of
 * the refusal that opened the window.
 */
gw_failfast_verdict_t gw_failfast_admit(gw_failfast_t *ff, size_t route, uint64_t now_ns,
                                        uint64_t lease_ns, uint64_t *ticket, rs_grpc_result_t *res);

/* A call of routes[route] admitted with ticket ended with res (borrowed). */
void gw_failfast_end(gw_failfast_t *ff, size_t route, uint64_t ticket, const rs_grpc_result_t *res,
                     uint64_t now_ns);

/*
 * Prometheus text of every gRPC route, rendered like rs_metrics_render():
 * snprintf semantics over buf/cap, *len the full length (cap 0 sizes it);
 * SVC_ERANGE when it did not fit.
 *   gateway_failfast_answers_total{route,method}  answered here in a window
 *   gateway_failfast_windows_total{route,method}  windows opened by a refusal
 *   gateway_failfast_probes_total{route,method}   probes let through
 */
svc_err_t gw_failfast_render(const gw_failfast_t *ff, char *buf, size_t cap, size_t *len);

#endif
