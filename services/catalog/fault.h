/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fault.h - the catalog's fault knobs: TEST-ONLY, off by default.
 *
 * They make the catalog a dependency with a known capacity, for the overload
 * experiment (docs/overload.md) and its smoke test: every CatalogService call
 * passes through cat_fault_enter()/cat_fault_leave(), which can
 *
 *   - limit the calls served at once to `slots` (a counting semaphore: a
 *     call that finds every slot taken is answered at once with
 *     RESOURCE_EXHAUSTED and a grpc-retry-pushback-ms trailer of
 *     pushback_ms);
 *   - or, with `queue` > 0, let up to that many such calls wait for a slot,
 *     first come first served, and reject only the ones beyond. A waiter
 *     never looks at its deadline: like a thread pool's queue in front of a
 *     database, it serves calls whose clients gave up long ago. That is the
 *     dependency that builds a backlog (docs/overload.md); a waiter holds a
 *     gRPC worker, so CATALOG_WORKERS must exceed slots + queue;
 *   - add latency_ms to every admitted call, slept while holding its slot
 *     (like a real slow dependency, it keeps working on a call whose client
 *     has given up);
 *   - fail error_pct percent of admitted calls with UNAVAILABLE, after the
 *     latency.
 *
 * All zero (the start state) changes nothing but one atomic counter pair per
 * call. The knobs are switched at run time through the admin port
 * (GET/POST /debug/fault), which exists only with CATALOG_FAULT_KNOBS=on.
 *
 * Threads: the settings and counters are atomics. The admin thread writes
 * the settings and reads the counters; the gRPC worker threads read the
 * settings and update the counters. Only the queue has a lock (and a
 * condition variable its waiters sleep on). A change applies to calls that
 * enter after it (a call already holding a slot keeps it; a waiter keeps
 * waiting until a slot of the new size is free).
 */
#ifndef CAT_FAULT_H
#define CAT_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "admin/admin.h"
#include "rpc/rpc.h"

#define CAT_FAULT_MAX_LATENCY_MS      60000u /* one call sleeps at most a minute */
#define CAT_FAULT_MAX_SLOTS           4096u
#define CAT_FAULT_MAX_PUSHBACK_MS     60000u
#define CAT_FAULT_MAX_QUEUE           4096u
#define CAT_FAULT_DEFAULT_PUSHBACK_MS 0u /* 0: the trailer says "0": retry when you like */

typedef struct cat_fault_settings {
    uint32_t latency_ms;  /* added to every admitted call; 0 = none           */
    uint32_t slots;       /* calls served at once; 0 = no limit               */
    uint32_t pushback_ms; /* sent with each rejection                         */
    uint32_t error_pct;   /* 0..100 of admitted calls fail with UNAVAILABLE    */
    uint32_t queue;       /* calls that may wait for a slot; 0 = reject at once */
} cat_fault_settings_t;

typedef struct cat_fault cat_fault_t;

/* A new set of knobs, all off. *out owned by caller (cat_fault_free). */
svc_err_t cat_fault_new(cat_fault_t **out);
/* NULL-safe. No call may be inside cat_fault_enter/leave. */
void cat_fault_free(cat_fault_t *f);

/* Replaces the settings. SVC_EINVAL (errbuf names the field) when one is out
 * of range; nothing changes then. Thread-safe. */
svc_err_t cat_fault_set(cat_fault_t *f, const cat_fault_settings_t *s,
                        char errbuf[static SVC_ERRBUF_LEN]);
/* The current settings. Thread-safe. */
void cat_fault_get(cat_fault_t *f, cat_fault_settings_t *s);

/* What cat_fault_enter gave the call; pass it to cat_fault_leave. */
typedef struct cat_fault_pass {
    bool slot; /* holds a slot */
} cat_fault_pass_t;

/* Admits a call (f NULL: always, and nothing else happens). SVC_OK: run
 * the handler, then cat_fault_leave. SVC_EEXHAUSTED: every slot was taken
 * and the queue was full (the pushback trailer is set on ctx, unless ctx is
 * NULL, as in unit tests). SVC_EUNAVAIL: an injected error.
 * Either error: errbuf says so; still call cat_fault_leave. May sleep
 * latency_ms, and wait for a slot in the queue. Called on the call's worker
 * thread. */
svc_err_t cat_fault_enter(cat_fault_t *f, rpc_ctx_t *ctx, cat_fault_pass_t *pass,
                          char errbuf[static SVC_ERRBUF_LEN]);
/* Releases what cat_fault_enter took. NULL-safe. */
void cat_fault_leave(cat_fault_t *f, const cat_fault_pass_t *pass);

/* The counters, read one by one (not a consistent snapshot). */
typedef struct cat_fault_counts {
    int64_t in_flight; /* calls between enter and leave, waiters included */
    int64_t held;      /* of which hold a slot                            */
    int64_t queued;    /* of which wait in the queue                      */
    uint64_t calls, rejected, errors;
} cat_fault_counts_t;

void cat_fault_counts(cat_fault_t *f, cat_fault_counts_t *c);

/* Appends the settings and counters to a Prometheus page (admin thread). */
void cat_fault_metrics(cat_fault_t *f, admin_buf_t *out);

/*
 * The admin port's /debug handler (admin_debug_fn; ctx is the cat_fault_t).
 * GET /debug/fault: {"latency_ms":..,"slots":..,"pushback_ms":..,
 * "error_pct":..,"queue":..,"in_flight":..,"queued":..,"calls":..,
 * "rejected":..,"errors":..}. POST or PUT /debug/fault with
 * latency_ms=N&slots=N&pushback_ms=N&error_pct=N&queue=N
 * (in the body or the query; any subset, the rest unchanged; off=1 first
 * turns everything off): sets, then answers as GET. 400 naming a bad key or
 * value, 404 for another path.
 */
int cat_fault_debug(void *ctx, const admin_request_t *req, admin_buf_t *out);

#endif
