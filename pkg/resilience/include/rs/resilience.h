/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rs/resilience.h - the resilience chain every outgoing call goes through.
 *
 *   bulkhead -> breaker -> retry (idempotency, budget, backoff, pushback) -> timeout -> transport
 *
 * This is a DECISION ENGINE, not a loop. It never calls the network, never
 * sleeps and never starts a thread. It answers two questions:
 *
 *   1. "May an attempt start now, and with which deadline?"   rs_call_attempt()
 *   2. "The attempt ended with outcome X: done, retry after N ms, or fail
 *      with reason R?"                                         rs_call_end_attempt()
 *
 * so that a blocking worker thread (rs_call_run() below, or its own loop) and
 * an event loop with timers drive the very same policy. A call is:
 *
 *   rs_call_begin()                      admission: bulkhead, then breaker
 *   { rs_call_attempt()                  deadline, breaker re-check, slot
 *     ...transport, honouring the attempt deadline...
 *     rs_call_end_attempt() }            RS_DONE | RS_RETRY (delay) | RS_FAIL (reason)
 *   rs_call_finish()                     releases everything, records metrics
 *
 * Thread-safety: an rs_upstream_t is safe to use from any number of threads at
 * once. An rs_call_t belongs to one caller at a time (it may move between
 * threads, e.g. from a completion-queue thread to a timer thread, as long as
 * two threads never touch it at the same moment).
 *
 * Cost: no heap allocation and no lock per call on the happy path (see
 * docs/resilience.md for measured figures). All times are monotonic
 * nanoseconds from the upstream's svc_clock_t unless a name says _ms.
 */
#ifndef RS_RESILIENCE_H
#define RS_RESILIENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "svc/core.h"

#define RS_MUST_USE __attribute__((warn_unused_result))

/* ------------------------------------------------------------------------
 * Defaults. Every option below starts at one of these (rs_upstream_opts_init).
 * The retry and breaker numbers are the course's; the budget numbers follow
 * the SRE book (10%) with Finagle's floor (10 retries/s over 10 s).
 * ------------------------------------------------------------------------ */
#define RS_DEFAULT_ATTEMPT_TIMEOUT_MS 3000u  /* per attempt; the caller's deadline may cut it */
#define RS_DEFAULT_MAX_ATTEMPTS       3u     /* counts the first attempt: 1 = never retry */
#define RS_DEFAULT_BACKOFF_BASE_MS    100u   /* window before the first retry */
#define RS_DEFAULT_BACKOFF_CAP_MS     2000u  /* the window never grows past this */
#define RS_DEFAULT_MIN_ATTEMPT_MS     5u     /* less time left than this: don't start */
#define RS_DEFAULT_MAX_PUSHBACK_MS    30000u /* a server asking for longer: give up */

#define RS_DEFAULT_BREAKER_FAILURES         5u     /* consecutive failed calls that open it */
#define RS_DEFAULT_BREAKER_COOLDOWN_MS      10000u /* open -> half-open */
#define RS_DEFAULT_BREAKER_TRIALS           1u     /* concurrent trial calls in half-open */
#define RS_DEFAULT_BREAKER_TRIAL_TIMEOUT_MS 30000u /* a trial never settled: re-open */
#define RS_DEFAULT_BREAKER_RATIO_PCT        0u     /* failure-ratio mode; 0 = off */
#define RS_DEFAULT_BREAKER_RATIO_MIN_CALLS  20u
#define RS_DEFAULT_BREAKER_RATIO_WINDOW_MS  10000u

#define RS_DEFAULT_BUDGET_PERCENT     10u    /* retries <= 10% of original calls ... */
#define RS_DEFAULT_BUDGET_MIN_PER_SEC 10u    /* ... + 10 per second of window */
#define RS_DEFAULT_BUDGET_WINDOW_MS   10000u /* sliding window, in 10 buckets */

#define RS_DEFAULT_MAX_CONCURRENT 0u /* bulkhead; 0 = unlimited */

/* Hard limits, checked by rs_upstream_new(). */
#define RS_MAX_ATTEMPTS_LIMIT 10u /* gRPC A6 clamps at 5; beyond 10 is a storm */
#define RS_MAX_TRIALS_LIMIT   64u
#define RS_MAX_METHODS        64u /* bounded metric cardinality */
#define RS_NAME_MAX           63u /* upstream names and metric labels */

/* rs_policy_t.attempt_timeout_ms: no per-attempt timeout (only the caller's). */
#define RS_TIMEOUT_NONE UINT32_MAX

/* ------------------------------------------------------------------------
 * Policy: one table per upstream.
 * ------------------------------------------------------------------------ */

/* How the wait before a retry is drawn from its window
 * w = min(cap, base * 2^n), n = 0 for the first retry. */
typedef enum rs_jitter {
    RS_JITTER_DEFAULT = 0, /* method row: inherit the upstream's; upstream: FULL */
    RS_JITTER_FULL,        /* uniform in [0, w]: least total work (AWS, Envoy)  */
    RS_JITTER_EQUAL,       /* uniform in [w/2, w]: never retries "at once"     */
    RS_JITTER_NONE,        /* exactly w: for tests and demos only              */
} rs_jitter_t;

/* Which outcomes may be retried (rs_policy_t.retry_on). Only transient
 * outcomes exist here by design: a business error is never retried. */
#define RS_RETRY_UNAVAILABLE     0x1u /* gRPC UNAVAILABLE; HTTP: connection error (no status) */
#define RS_RETRY_ATTEMPT_TIMEOUT 0x2u /* the per-attempt timer fired (not the caller's deadline) */
#define RS_RETRY_HTTP_429        0x4u /* HTTP Too Many Requests */
#define RS_RETRY_HTTP_503        0x8u /* HTTP Service Unavailable */
/* gRPC RESOURCE_EXHAUSTED that carries a grpc-retry-pushback-ms >= 0: the
 * server shed the call and said when to come back (gRPC's 429 + Retry-After).
 * Without the hint RESOURCE_EXHAUSTED is a quota answer and is not retried. */
#define RS_RETRY_SHED    0x20u
#define RS_RETRY_DEFAULT 0x2fu /* all of the above */
/* HTTP 500, 502 and 504: the server (or a proxy) may have acted on the
 * request, so only for requests safe to repeat; not in RS_RETRY_DEFAULT (the
 * gRPC binding never sees an HTTP status). The HTTP binding sets it. */
#define RS_RETRY_HTTP_5XX 0x10u
#define RS_RETRY_ALL      0x3fu /* every bit above */

/*
 * Retry and timeout knobs. In the upstream's default policy, a 0 field
 * means "the built-in default" (RS_DEFAULT_*); in a method row, 0 means
 * "inherit the upstream's value". So a row states only what differs.
 */
typedef struct rs_policy {
    uint32_t attempt_timeout_ms; /* per attempt, or RS_TIMEOUT_NONE */
    uint32_t max_attempts;       /* 1..RS_MAX_ATTEMPTS_LIMIT, counts the first */
    uint32_t backoff_base_ms;
    uint32_t backoff_cap_ms; /* >= backoff_base_ms */
    rs_jitter_t jitter;
    uint32_t retry_on; /* RS_RETRY_* bits */
} rs_policy_t;

typedef enum rs_idempotency {
    RS_IDEMPOTENCY_BY_NAME = 0, /* fallback: Get* / List* are idempotent, nothing else */
    RS_IDEMPOTENT,              /* safe to repeat: may be retried */
    RS_NOT_IDEMPOTENT,          /* e.g. CreateOrder: never retried */
} rs_idempotency_t;

/*
 * One row of an upstream's method table, e.g.
 *   { .path = "/shopmicro.catalog.v1.CatalogService/GetProduct", .idempotency = RS_IDEMPOTENT },
 *   { .path = "/shopmicro.order.v1.OrderService/CreateOrder", .idempotency = RS_NOT_IDEMPOTENT },
 * Methods not in the table use the upstream's policy, the by-name rule, and
 * the metric label "other".
 */
typedef struct rs_method {
    const char *path; /* full gRPC path "/pkg.Service/Method" (or an HTTP route) */
    rs_idempotency_t idempotency;
    rs_policy_t policy; /* overrides; 0 fields inherit */
    const char *label;  /* metric label; NULL: the text after the last '/' */
} rs_method_t;

/* ------------------------------------------------------------------------
 * Breaker, budget and the injectable environment.
 * ------------------------------------------------------------------------ */
typedef enum rs_breaker_state {
    RS_BREAKER_CLOSED,    /* calls flow; failures are counted */
    RS_BREAKER_OPEN,      /* calls fail at once with UNAVAILABLE, no attempt */
    RS_BREAKER_HALF_OPEN, /* trial calls only; their verdict closes or re-opens */
} rs_breaker_state_t;

/*
 * A breaker counts one verdict per logical call (it sits outside retry):
 * failure = UNAVAILABLE, or DEADLINE_EXCEEDED from the per-attempt timer;
 * ignored = CANCELLED, the caller's own deadline, local out-of-memory;
 * success = everything else, business errors included (NOT_FOUND,
 * INVALID_ARGUMENT, ALREADY_EXISTS, FAILED_PRECONDITION...): the server
 * answered, so it is up. A success resets the consecutive-failure count.
 * It trips on whichever rule fires first; both 0 = the breaker never opens.
 */
typedef struct rs_breaker_opts {
    uint32_t failures;            /* consecutive failed calls; 0 = rule off */
    uint32_t cooldown_ms;         /* open -> half-open, > 0 */
    uint32_t cooldown_jitter_pct; /* adds uniform [0, pct% of cooldown]: desyncs clients */
    uint32_t trials;              /* 1..RS_MAX_TRIALS_LIMIT concurrent trials; all must succeed */
    uint32_t trial_timeout_ms;    /* a trial still unsettled after this re-opens; 0 = never */
    uint32_t ratio_pct;           /* failure-ratio rule (resilience4j): 1..100; 0 = off */
    uint32_t ratio_min_calls;     /* ... over at least this many calls ... */
    uint32_t ratio_window_ms;     /* ... in this sliding window (10 buckets) */
} rs_breaker_opts_t;

/* Retries in the window <= percent% of original calls in it + min_per_sec x
 * window seconds. window_ms 0 disables the budget (not recommended). */
typedef struct rs_budget_opts {
    uint32_t percent;     /* 0..100 */
    uint32_t min_per_sec; /* the floor keeps low-traffic upstreams retryable */
    uint32_t window_ms;   /* multiple of 10 ms; 10 buckets */
} rs_budget_opts_t;

/* Uniform random 64-bit values for jitter. Called from any thread. */
typedef struct rs_random {
    uint64_t (*next)(void *ctx);
    void *ctx;
} rs_random_t;

/* Sleeps for ns nanoseconds (used by rs_call_run() only). */
typedef void (*rs_sleep_fn)(void *ctx, uint64_t ns);

/* One breaker state change. `text` is the ready log line, e.g.
 * "breaker catalog: closed -> open after 5 consecutive failures". */
typedef struct rs_transition {
    const char *upstream;
    rs_breaker_state_t from, to;
    const char *why;  /* "after 5 consecutive failures" */
    const char *text; /* "breaker <upstream>: <from> -> <to> <why>" */
} rs_transition_t;

/* Called once per transition, in order, with the breaker's transition lock
 * held: it must be quick and must not use the same upstream. t is borrowed. */
typedef void (*rs_transition_fn)(void *ctx, const rs_transition_t *t);

typedef struct rs_upstream_opts {
    const char *name;           /* required, copied: [A-Za-z0-9_.-]{1,63} ("catalog") */
    rs_policy_t policy;         /* every method's defaults */
    const rs_method_t *methods; /* copied (strings too); may be NULL */
    size_t n_methods;           /* <= RS_MAX_METHODS */
    rs_breaker_opts_t breaker;
    rs_budget_opts_t budget;
    uint32_t max_concurrent;  /* bulkhead; 0 = unlimited */
    uint32_t min_attempt_ms;  /* an attempt needs at least this much time left */
    uint32_t max_pushback_ms; /* longest server pushback we agree to wait */
    const svc_clock_t *clock; /* borrowed, must outlive the upstream; NULL: monotonic */
    rs_random_t random;       /* next NULL: per-thread xorshift seeded per thread */
    rs_sleep_fn sleep;        /* NULL: nanosleep */
    void *sleep_ctx;
    rs_transition_fn on_transition; /* NULL: one svc_log line (module "resilience") */
    void *on_transition_ctx;
} rs_upstream_opts_t;

typedef struct rs_upstream rs_upstream_t; /* opaque */

/* Fills o with the RS_DEFAULT_* values (name NULL, no methods). Cannot fail. */
void rs_upstream_opts_init(rs_upstream_opts_t *o);

/*
 * Builds an upstream: the policy table, one breaker, one retry budget, one
 * bulkhead and the metrics. Validates everything first.
 *
 * o       borrowed; every string and the method table are copied.
 * out     on SVC_OK, a new upstream owned by caller (free with
 *         rs_upstream_free()); untouched otherwise.
 * errbuf  optional, SVC_ERRBUF_LEN bytes: names the bad option on SVC_EINVAL.
 * Returns SVC_OK, SVC_EINVAL or SVC_ENOMEM.
 */
RS_MUST_USE svc_err_t rs_upstream_new(const rs_upstream_opts_t *o, rs_upstream_t **out,
                                      char errbuf[static SVC_ERRBUF_LEN]);

/* NULL-safe. No call on u may be in progress. */
void rs_upstream_free(rs_upstream_t *u);

/* Borrowed; valid until rs_upstream_free(). */
const char *rs_upstream_name(const rs_upstream_t *u);
rs_breaker_state_t rs_upstream_breaker_state(const rs_upstream_t *u);
/* How long until the breaker admits a trial: 0 when closed (or a trial slot
 * is free), the rest of the cooldown when open, a hint of at most 1 s while a
 * trial is in flight. Rounded up. Meant for HTTP Retry-After. */
uint32_t rs_upstream_ms_until_trial(const rs_upstream_t *u);
/* Calls holding a bulkhead slot now (waiting out a backoff holds none). */
int64_t rs_upstream_in_flight(const rs_upstream_t *u);

/* ------------------------------------------------------------------------
 * The decision engine.
 * ------------------------------------------------------------------------ */

/* Why a call ended (or why a retry was refused). Names appear in logs and
 * metrics (rs_reason_name()). APPEND ONLY. */
typedef enum rs_reason {
    RS_REASON_OK,                 /* succeeded on the first attempt */
    RS_REASON_RETRIED,            /* succeeded after one or more retries */
    RS_REASON_NOT_RETRYABLE,      /* the outcome is not transient (business error...) */
    RS_REASON_NOT_IDEMPOTENT,     /* transient, but repeating the method is unsafe */
    RS_REASON_ATTEMPTS_EXHAUSTED, /* max_attempts used up */
    RS_REASON_DEADLINE,           /* the deadline can't hold another attempt, or expired */
    RS_REASON_BUDGET_EXHAUSTED,   /* the upstream's retry budget said no */
    RS_REASON_BREAKER_OPEN,       /* at admission, or before a retry */
    RS_REASON_BULKHEAD_FULL,      /* at admission, or re-acquiring after a backoff */
    RS_REASON_PUSHBACK,           /* the server said "don't retry" (or "wait too long") */
    RS_REASON_CANCELLED,          /* the caller finished the call before a verdict */
    RS__REASON_COUNT
} rs_reason_t;

/* "ok", "retried", "not-retryable", ... (logs, metric labels). Never NULL. */
const char *rs_reason_name(rs_reason_t r);
/* The same name as an error reason constant (google.rpc.ErrorInfo.reason of
 * a call that ended for it): "BREAKER_OPEN", "BUDGET_EXHAUSTED", "DEADLINE",
 * ... Never NULL. */
const char *rs_reason_constant(rs_reason_t r);
/* A phrase for a status message: "circuit open", "retry budget exhausted"...
 * Never NULL. */
const char *rs_reason_text(rs_reason_t r);
/* "closed", "open", "half-open". Never NULL. */
const char *rs_breaker_state_name(rs_breaker_state_t s);

/* outcome.pushback_ms: no pushback was sent. */
#define RS_PUSHBACK_NONE (-1)
/* outcome.pushback_ms: the server asked us not to retry (A6: a negative or
 * malformed grpc-retry-pushback-ms). Any value below -1 means the same. */
#define RS_PUSHBACK_STOP (-2)

/* What one attempt came back with, as the transport binding saw it. */
typedef struct rs_outcome {
    svc_err_t err;            /* SVC_OK, or the status mapped to svc_err_t */
    bool attempt_timer_fired; /* the attempt deadline we gave you expired (you
                               * got DEADLINE_EXCEEDED from your own timer); the
                               * engine tells the per-attempt timer from the
                               * caller's deadline itself */
    int64_t pushback_ms;      /* RS_PUSHBACK_NONE, RS_PUSHBACK_STOP or >= 0 */
    int http_status;          /* 0 for gRPC, and for HTTP connection errors */
    const char *detail;       /* optional transport text for the log; borrowed */
    /* The upstream answered, and its answer says a dependency of ITS OWN
     * failed (e.g. order's "catalog unavailable"). The upstream itself is up,
     * so the breaker counts a success; and the deeper hop has done its own
     * retrying, so this one never retries (retrying at every layer multiplies
     * load: 3 attempts at each of 3 hops is 27). The error still goes to the
     * caller unchanged. */
    bool dependency_failed;
} rs_outcome_t;

#define RS_OUTCOME_INIT                                                                            \
    {                                                                                              \
        SVC_OK, false, RS_PUSHBACK_NONE, 0, NULL, false                                            \
    }

typedef enum rs_action {
    RS_DONE,  /* success: return the response */
    RS_RETRY, /* wait delay_ms, then rs_call_attempt() again */
    RS_FAIL,  /* give up: return err */
} rs_action_t;

typedef struct rs_decision {
    rs_action_t action;
    uint32_t delay_ms;  /* RS_RETRY only */
    rs_reason_t reason; /* RS_REASON_OK / _RETRIED for RS_DONE */
    svc_err_t err;      /* RS_FAIL: the error for the caller (the last real one) */
} rs_decision_t;

/* What a finished call amounted to. */
typedef struct rs_result {
    svc_err_t err; /* SVC_OK or the error returned to the caller */
    rs_reason_t reason;
    uint32_t attempts;    /* attempts started; 0 when rejected at admission */
    uint32_t pushback_ms; /* a failed call's last attempt came back with a server
                             pushback of this many ms (> 0), e.g. a shed load's
                             hint; 0: none. Callers pass it on (HTTP Retry-After) */
} rs_result_t;

struct rs__method; /* private */
struct rs__mstats;

/* Per-call state. Caller-allocated (the stack is fine); no field is public.
 * Valid from rs_call_begin() until rs_call_finish(). */
typedef struct rs_call {
    /* private: owned by the engine, read through the functions below */
    rs_upstream_t *up;
    const struct rs__method *m;
    struct rs__mstats *stats;
    const char *path;
    uint64_t deadline_ns, start_ns, attempt_deadline_ns;
    uint32_t attempts, max_attempts, epoch;
    uint8_t phase, verdict, trial, slot, idempotent;
    svc_err_t last_err, final_err;
    rs_reason_t reason;
    uint32_t pushback_ms; /* the last attempt's pushback (> 0), else 0 */
} rs_call_t;

/*
 * Admits a logical call: takes a bulkhead slot, then asks the breaker.
 *
 * method       borrowed; must stay valid until rs_call_finish() (logs use it).
 * deadline_ns  the caller's overall deadline (absolute, monotonic), or
 *              SVC_DEADLINE_NONE. It spans all attempts and backoffs.
 * c            caller-allocated; any previous contents are ignored.
 * Returns SVC_OK (admitted; go to rs_call_attempt()), SVC_EEXHAUSTED
 * (reason bulkhead-full) or SVC_EUNAVAIL (reason breaker-open: "circuit
 * open"; see rs_upstream_ms_until_trial()). A rejection costs well under a
 * microsecond, makes no attempt, holds nothing and is already counted;
 * finishing it like any other call only fills in the result.
 */
RS_MUST_USE svc_err_t rs_call_begin(rs_upstream_t *u, const char *method, uint64_t deadline_ns,
                                    rs_call_t *c);

/*
 * May the next attempt start now? Call it right after rs_call_begin(), and
 * after each RS_RETRY once its delay_ms have passed. On SVC_OK,
 * *attempt_deadline_ns is min(now + per-attempt timeout, overall deadline):
 * give it to the transport (gRPC call deadline, curl timeout). The first
 * attempt counts the call as an original for the retry budget and starts its
 * latency clock; before a retry this re-checks the breaker and re-acquires
 * the bulkhead slot released during the backoff. Otherwise the call is over:
 * the returned error is the final one (the last real error, or SVC_ETIMEDOUT
 * if no attempt ran) and the reason is deadline, breaker-open or
 * bulkhead-full.
 */
RS_MUST_USE svc_err_t rs_call_attempt(rs_call_t *c, uint64_t *attempt_deadline_ns);

/*
 * Reports how the attempt ended and returns what to do next. o is borrowed.
 * RS_RETRY has already released the bulkhead slot and charged the retry
 * budget; the delay never ends past the deadline and is never shorter than
 * the server's pushback. Logs one line per retry and per final failure.
 */
rs_decision_t rs_call_end_attempt(rs_call_t *c, const rs_outcome_t *o);

/* 1-based number of the attempt last started (0 before the first); for
 * grpc-previous-rpc-attempts. */
uint32_t rs_call_attempts(const rs_call_t *c);

/* True when the breaker admitted this call as a half-open trial. Its verdict
 * is what closes the breaker again, so a binding lets a trial run to its end
 * even when the caller has given up (a trial that is cancelled says nothing,
 * and the next caller's trial may be cancelled too): answer the caller at
 * once, keep the attempt going, and rs_call_end_attempt() it as usual. */
bool rs_call_is_trial(const rs_call_t *c);

/*
 * Ends the call: releases the slot and any breaker trial permit, records
 * metrics. Call it once for every rs_call_begin(), admitted or not (again
 * is a no-op). Finishing before a verdict (e.g. the caller was cancelled
 * during a backoff) ends the call with reason cancelled, SVC_ECANCELLED, and
 * the breaker ignores it. out is optional.
 */
void rs_call_finish(rs_call_t *c, rs_result_t *out);

/* ------------------------------------------------------------------------
 * The blocking driver, for worker threads. Built on the functions above.
 * ------------------------------------------------------------------------ */
typedef struct rs_attempt {
    uint64_t deadline_ns; /* absolute, monotonic: the op MUST honour it */
    uint32_t number;      /* 1-based */
    uint32_t max;         /* the method's max_attempts */
} rs_attempt_t;

/* Runs one attempt. *out arrives as RS_OUTCOME_INIT; fill it. */
typedef void (*rs_op_fn)(void *arg, const rs_attempt_t *at, rs_outcome_t *out);

/* Runs a whole call: begin, attempts with backoff sleeps (the upstream's sleep
 * function), finish. Returns the call's final error; result is optional. */
RS_MUST_USE svc_err_t rs_call_run(rs_upstream_t *u, const char *method, uint64_t deadline_ns,
                                  rs_op_fn op, void *arg, rs_result_t *result);

/* ------------------------------------------------------------------------
 * Helpers for bindings and tests. Pure functions, thread-safe.
 * ------------------------------------------------------------------------ */

/* The wait before retry number n (0 = first retry), drawn with `random` (a
 * uniform 64-bit value) from the window min(cap, base * 2^n). */
uint32_t rs_backoff_ms(rs_jitter_t kind, uint32_t base_ms, uint32_t cap_ms, uint32_t n,
                       uint64_t random);

/* A grpc-retry-pushback-ms value (gRFC A6): a decimal >= 0 gives that many
 * ms; anything else (negative, empty, junk, overflow) gives RS_PUSHBACK_STOP.
 * value NULL (no such trailer) gives RS_PUSHBACK_NONE. */
int64_t rs_pushback_parse_grpc(const char *value, size_t len);

/* An HTTP Retry-After value: delta-seconds, or an IMF-fixdate compared with
 * now_unix_s (a date in the past gives 0). A malformed value or NULL gives
 * RS_PUSHBACK_NONE: for HTTP it is a hint, not a refusal. */
int64_t rs_pushback_parse_retry_after(const char *value, size_t len, int64_t now_unix_s);

/* ------------------------------------------------------------------------
 * Metrics, Prometheus text format (docs/resilience.md lists every series).
 * ------------------------------------------------------------------------ */

/*
 * Renders the metrics of n upstreams into buf (cap bytes, NUL-terminated when
 * cap > 0). *len receives the full length the text needs (like snprintf), so
 * a caller can size a buffer with one call of cap 0. Returns SVC_OK, or
 * SVC_ERANGE when the text was truncated. Lock-free reads: counters are
 * individually exact, not a snapshot of one instant. Thread-safe.
 */
RS_MUST_USE svc_err_t rs_metrics_render(rs_upstream_t *const *ups, size_t n, char *buf, size_t cap,
                                        size_t *len);

/* ------------------------------------------------------------------------
 * The live page's feed (docs/resilience.md, "The live page").
 * ------------------------------------------------------------------------ */

/*
 * Renders n upstreams as one JSON object {"now_ms":..,"upstreams":[..]}:
 * per upstream its breaker state with the last transitions (from, to, why,
 * when), call totals (calls, originals, attempts, retries, rejected), the
 * retry budget, the bulkhead and the last decisions (retry, fail, reject,
 * done after retries: method, reason, attempt, error, detail). Same contract
 * as rs_metrics_render(): *len is the full length, SVC_ERANGE when cut (a
 * cut document is not valid JSON: size again). Thread-safe; it waits at most
 * for a memcpy of another thread's, and a call never waits for it.
 */
RS_MUST_USE svc_err_t rs_snapshot_json(rs_upstream_t *const *ups, size_t n, char *buf, size_t cap,
                                       size_t *len);

#endif /* RS_RESILIENCE_H */
