/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h - what the files of pkg/resilience share, and nobody else.
 *
 * Layout of the module (read in this order):
 *   policy.c    the method table: lookup, the by-name rule, outcome classes
 *   window.c    lock-free sliding-window counters (time buckets)
 *   breaker.c   the breaker state machine
 *   budget.c    the retry budget
 *   bulkhead.c  the concurrency limit and the in-flight gauge
 *   backoff.c   backoff + jitter, the default random source, pushback parsing
 *   engine.c    the decision engine (rs_call_*)
 *   driver.c    rs_call_run(), the blocking driver built on the engine
 *   metrics.c   counters and the Prometheus renderer
 *   journal.c   the last decisions and transitions, for the live page
 *   snapshot.c  rs_snapshot_json(), that page's feed
 *   upstream.c  options, validation, rs_upstream_new/free
 *
 * Unit tests may include this header to reach rs__ functions directly.
 */
#ifndef RS_INTERNAL_H
#define RS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "rs/resilience.h"

#define RS__LOG_MODULE "resilience"

/* Hot counters are spread over this many cache-line-aligned shards, one per
 * thread (round robin), so that threads calling the same upstream do not
 * fight over one cache line; readers sum the shards. */
#define RS__SHARDS         16u
#define RS__CACHELINE      64u
#define RS__WINDOW_BUCKETS 10u

/* Latency histogram buckets (metrics.c has the bounds), plus +Inf. */
#define RS__HIST_N 13u

/* Why an attempt's outcome may be retried (metric label "cause"). */
typedef enum rs__cause {
    RS__CAUSE_UNAVAILABLE,
    RS__CAUSE_ATTEMPT_TIMEOUT,
    RS__CAUSE_HTTP_429,
    RS__CAUSE_HTTP_503,
    RS__CAUSE_HTTP_5XX, /* 500, 502, 504: opt-in (RS_RETRY_HTTP_5XX), for HTTP bindings */
    RS__CAUSE_SHED,     /* gRPC RESOURCE_EXHAUSTED with a pushback hint (RS_RETRY_SHED) */
    RS__CAUSE_COUNT,
    RS__CAUSE_NONE = RS__CAUSE_COUNT,
} rs__cause_t;

/* What an outcome tells the breaker. */
typedef enum rs__verdict {
    RS__VERDICT_IGNORE, /* says nothing about the upstream's health */
    RS__VERDICT_SUCCESS,
    RS__VERDICT_FAILURE,
} rs__verdict_t;

/* ---- policy.c ---------------------------------------------------------- */
struct rs__method {
    char *path; /* owned */
    size_t len;
    char label[RS_NAME_MAX + 1];
    rs_policy_t policy; /* fully resolved: no 0 fields */
    rs_idempotency_t idempotency;
    uint32_t index; /* row in the metrics arrays; n_methods = "other" */
};

typedef struct rs__class {
    rs__verdict_t verdict;
    rs__cause_t cause; /* RS__CAUSE_NONE: not retryable */
} rs__class_t;

svc_err_t rs__methods_build(rs_upstream_t *u, const rs_upstream_opts_t *o,
                            char errbuf[static SVC_ERRBUF_LEN]);
void rs__methods_free(rs_upstream_t *u);
const struct rs__method *rs__method_lookup(const rs_upstream_t *u, const char *path);
bool rs__idempotent_by_name(const char *path);
bool rs__label_ok(const char *s);
rs__class_t rs__classify(const rs_outcome_t *o, bool per_attempt_timer, uint32_t retry_on);
const char *rs__cause_name(rs__cause_t c);

/* ---- window.c ---------------------------------------------------------- */
/* A count over the last RS__WINDOW_BUCKETS buckets. Each cell packs
 * (bucket number << 32 | count) so a bucket is reused with a single CAS. */
typedef struct rs__window {
    uint64_t bucket_ns; /* 0: disabled */
    uint64_t magic;     /* UINT64_MAX / bucket_ns: divide by multiplying */
    uint32_t shards;    /* 1, or RS__SHARDS when sharded */
    uint32_t stride;    /* cells per shard row, padded to a cache line */
    _Atomic uint64_t *cells;
} rs__window_t;

/* window_ns 0: disabled. sharded: one row per thread shard (hot counters). */
svc_err_t rs__window_init(rs__window_t *w, uint64_t window_ns, bool sharded);
void rs__window_dispose(rs__window_t *w);
void rs__window_add(rs__window_t *w, uint64_t now_ns, uint32_t n);
void rs__window_sub(rs__window_t *w, uint64_t now_ns, uint32_t n);
uint64_t rs__window_sum(const rs__window_t *w, uint64_t now_ns);
void rs__window_reset(rs__window_t *w);

/* ---- breaker.c --------------------------------------------------------- */
typedef struct rs__breaker {
    /* Written on transitions only; read by every call. Layout of `word`:
     * bits 0-7 state, 8-15 trial permits taken, 32-63 epoch (bumped by
     * every transition, so a stale ticket can be recognised). */
    _Alignas(RS__CACHELINE) _Atomic uint64_t word;
    _Atomic uint64_t open_until_ns;
    _Atomic uint64_t trial_since_ns; /* when the last trial permit was taken */
    /* Written by failing calls. Own cache line: not on the success path. */
    _Alignas(RS__CACHELINE) _Atomic uint32_t consecutive;
    _Alignas(RS__CACHELINE) pthread_mutex_t lock; /* serialises transitions */
    bool lock_ready;
    uint32_t trial_successes;           /* under lock */
    rs__window_t calls, fails;          /* ratio mode only */
    _Atomic uint64_t transitions[3][3]; /* [from][to] */
    rs_breaker_opts_t o;
    const char *name;
    const svc_clock_t *clock;
    rs_random_t random;
    rs_transition_fn on_transition;
    void *on_transition_ctx;
    struct rs__journal *journal; /* the upstream's: every transition goes in */
} rs__breaker_t;

typedef enum rs__admit {
    RS__ADMIT_REJECT,
    RS__ADMIT_NORMAL,
    RS__ADMIT_TRIAL,
} rs__admit_t;

svc_err_t rs__breaker_init(rs__breaker_t *b, const rs_upstream_opts_t *o, const char *name);
void rs__breaker_dispose(rs__breaker_t *b);
/* Reads the clock only when the breaker is not closed. */
rs__admit_t rs__breaker_admit(rs__breaker_t *b, uint32_t *epoch);
bool rs__breaker_recheck(rs__breaker_t *b, bool trial, uint32_t *epoch);
void rs__breaker_settle(rs__breaker_t *b, bool trial, uint32_t epoch, rs__verdict_t v,
                        uint64_t now_ns);
rs_breaker_state_t rs__breaker_state(const rs__breaker_t *b);
uint32_t rs__breaker_ms_until_trial(const rs__breaker_t *b, uint64_t now_ns);

/* ---- budget.c ---------------------------------------------------------- */
typedef struct rs__budget {
    rs__window_t originals; /* sharded: bumped by every admitted call */
    rs__window_t retries;
    uint32_t percent;
    uint64_t floor; /* min_per_sec x window seconds */
} rs__budget_t;

svc_err_t rs__budget_init(rs__budget_t *b, const rs_budget_opts_t *o);
void rs__budget_dispose(rs__budget_t *b);
void rs__budget_deposit(rs__budget_t *b, uint64_t now_ns);
bool rs__budget_withdraw(rs__budget_t *b, uint64_t now_ns);
uint64_t rs__budget_remaining(const rs__budget_t *b, uint64_t now_ns);
/* The allowance now and the retries spent in the window; false when no
 * budget is configured (both left untouched). */
bool rs__budget_read(const rs__budget_t *b, uint64_t now_ns, uint64_t *allowance, uint64_t *used);

/* ---- bulkhead.c -------------------------------------------------------- */
typedef struct rs__gauge_shard {
    _Alignas(RS__CACHELINE) _Atomic int64_t v;
} rs__gauge_shard_t;

typedef struct rs__bulkhead {
    uint32_t limit;                                 /* 0: unlimited */
    _Alignas(RS__CACHELINE) _Atomic int64_t in_use; /* limited: exact */
    rs__gauge_shard_t shard[RS__SHARDS];            /* unlimited: a gauge only */
} rs__bulkhead_t;

bool rs__bulkhead_acquire(rs__bulkhead_t *b);
void rs__bulkhead_release(rs__bulkhead_t *b);
int64_t rs__bulkhead_in_flight(const rs__bulkhead_t *b);

/* ---- backoff.c, driver.c ----------------------------------------------- */
uint64_t rs__random_default(void *ctx);
void rs__sleep_default(void *ctx, uint64_t ns);

/* The calling thread's shard, assigned round robin on first use. Inline:
 * every counter bump on the hot path asks for it. */
extern _Thread_local unsigned rs__tls_shard; /* shard + 1; 0: unassigned */
unsigned rs__shard_assign(void);

static inline unsigned rs__shard(void)
{
    unsigned s = rs__tls_shard;

    return s != 0 ? s - 1 : rs__shard_assign();
}

/* ---- metrics.c --------------------------------------------------------- */
/* One method's counters in one shard. A call that ends "ok" is counted
 * only in hist_ok (calls_total{result="ok"} is its sum), which saves the
 * happy path one atomic add; every other call is counted in calls[] and, if
 * it made an attempt, in hist. */
typedef struct rs__mstats {
    _Alignas(RS__CACHELINE) _Atomic uint64_t hist_ok[RS__HIST_N + 1];
    _Atomic uint64_t hist[RS__HIST_N + 1];
    _Atomic uint64_t hist_sum_ns;
    _Atomic uint64_t attempts;
    _Atomic uint64_t calls[RS__REASON_COUNT]; /* [RS_REASON_OK] unused */
    _Atomic uint64_t rejected[RS__REASON_COUNT];
    _Atomic uint64_t denied[RS__REASON_COUNT];
    _Atomic uint64_t retries[RS__CAUSE_COUNT];
} rs__mstats_t;

rs__mstats_t *rs__stats(const rs_upstream_t *u, const struct rs__method *m);
/* Counts a settled call: its reason and, if it made an attempt, its
 * duration `ns` since the first attempt started. */
void rs__stats_settle(rs__mstats_t *s, rs_reason_t reason, bool attempted, uint64_t ns);

/* One upstream's counters over every method and shard (lock-free reads, as
 * for the Prometheus page). */
typedef struct rs__totals {
    uint64_t calls;     /* settled, every result */
    uint64_t originals; /* settled calls that made at least one attempt */
    uint64_t attempts;  /* attempts started */
    uint64_t retries;   /* retries scheduled */
    uint64_t rejected;  /* refused at admission */
} rs__totals_t;

void rs__stats_totals(const rs_upstream_t *u, rs__totals_t *out);

/* ---- journal.c --------------------------------------------------------- */
/* Ring sizes of the live page (docs/resilience.md, "The live page"): enough
 * for what led up to a trip and a few cooldown cycles; the page keeps what
 * it has seen, so a ring only has to outlast one poll. */
#define RS__JOURNAL_DECISIONS   32u
#define RS__JOURNAL_TRANSITIONS 16u
#define RS__JOURNAL_DETAIL_LEN  128u /* the transport's text, cut and ASCII-only */
#define RS__JOURNAL_WHY_LEN     96u  /* "after 5 consecutive failures" */

typedef enum rs__decided {
    RS__DECIDED_RETRY,  /* why: rs__cause_t */
    RS__DECIDED_DONE,   /* a success after retries; why: RS_REASON_RETRIED */
    RS__DECIDED_FAIL,   /* gave up; why: rs_reason_t */
    RS__DECIDED_REJECT, /* refused at admission; why: rs_reason_t */
} rs__decided_t;

/* One decision, or a run of identical ones folded together (an open
 * breaker rejects every call alike: one row "x 500", not 32 rows). */
typedef struct rs__decision_rec {
    uint64_t seq;         /* 1, 2, ... per upstream; 0: an empty slot */
    uint64_t at_ns;       /* the first of the run, upstream clock; 0: not read yet */
    uint32_t repeat;      /* decisions in the run, >= 1, but for those folded lock-free */
    uint64_t folded_base; /* journal's lock-free folds when written (the newest's repeat
                             is repeat + folds since) */
    uint32_t method;      /* row of the method table (n_methods: "other") */
    uint32_t attempt, max_attempts;
    uint32_t delay_ms; /* retries */
    svc_err_t err;
    uint8_t kind; /* rs__decided_t */
    uint8_t why;
    char detail[RS__JOURNAL_DETAIL_LEN];
} rs__decision_rec_t;

typedef struct rs__transition_rec {
    uint64_t seq;   /* 1, 2, ...; 0: an empty slot */
    uint64_t at_ns; /* upstream clock */
    uint8_t from, to;
    char why[RS__JOURNAL_WHY_LEN];
} rs__transition_rec_t;

/* What the renderer copies out in one go. */
typedef struct rs__journal_data {
    uint64_t decisions;                          /* every decision recorded, folded ones included */
    uint64_t records;                            /* decision records written (the last seq) */
    uint64_t transitions;                        /* transition records written */
    rs__decision_rec_t d[RS__JOURNAL_DECISIONS]; /* ring: seq - 1 mod size */
    rs__transition_rec_t t[RS__JOURNAL_TRANSITIONS];
} rs__journal_data_t;

typedef struct rs__journal {
    /* Held only to copy a record in or the rings out: no I/O, no
     * allocation, no other lock inside. */
    _Alignas(RS__CACHELINE) pthread_mutex_t lock;
    bool lock_ready;
    _Atomic uint64_t dropped; /* decisions lost to a busy lock */
    /* The newest record's identity (0: none). A decision alike it - an open
     * breaker rejects every call alike - is only counted, in the calling
     * thread's shard: no lock and no cache line two threads write, so fast
     * rejections stay fast. Written under the lock only. */
    _Alignas(RS__CACHELINE) _Atomic uint64_t run_key;
    rs__gauge_shard_t folded[RS__SHARDS];            /* lock-free folds, ever (monotonic) */
    _Alignas(RS__CACHELINE) rs__journal_data_t data; /* under lock */
} rs__journal_t;

svc_err_t rs__journal_init(rs__journal_t *j);
void rs__journal_dispose(rs__journal_t *j);
/* Copies text into out (cap bytes, NUL-terminated): printable ASCII kept,
 * any other byte '?', cut to fit; NULL gives "". So the feed can show it as
 * a JSON string with only '"' and '\\' to escape. */
void rs__journal_text(char *out, size_t cap, const char *text);
/* Records d (seq, repeat and folded_base are the journal's; at_ns 0: read
 * from clock if a new record is written). One alike the newest record is
 * counted into it lock-free; any other takes the lock only if it is free: a
 * decision that finds it busy is counted in `dropped`, so a failing call
 * never waits. */
void rs__journal_decision(rs__journal_t *j, rs__decision_rec_t *d, const svc_clock_t *clock);
/* Records a transition; always (they are rare, and the timeline needs every
 * one). Called with the breaker's lock held. */
void rs__journal_transition(rs__journal_t *j, rs_breaker_state_t from, rs_breaker_state_t to,
                            const char *why, uint64_t now_ns);
/* Copies the rings out (the lock for one memcpy). */
void rs__journal_read(rs__journal_t *j, rs__journal_data_t *out);

/* ---- snapshot.c -------------------------------------------------------- */
/* rs_snapshot_json() with the wall clock given (tests). */
svc_err_t rs__snapshot_json_at(rs_upstream_t *const *ups, size_t n, uint64_t wall_ms, char *buf,
                               size_t cap, size_t *len);

/* ---- upstream.c: the object everything above hangs off ----------------- */
struct rs_upstream {
    rs__breaker_t breaker;
    rs__bulkhead_t bulkhead;
    rs__budget_t budget;
    char name[RS_NAME_MAX + 1];
    struct rs__method *methods; /* n_methods rows + "other" */
    size_t n_methods;
    rs__mstats_t *stats; /* [RS__SHARDS][n_methods + 1] */
    uint32_t min_attempt_ms, max_pushback_ms;
    const svc_clock_t *clock;
    rs_random_t random;
    rs_sleep_fn sleep;
    void *sleep_ctx;
    rs__journal_t journal; /* the live page's rings (journal.c) */
};

static inline uint64_t rs__now(const rs_upstream_t *u)
{
    return u->clock->now_ns(u->clock->ctx);
}

static inline uint64_t rs__add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

#endif /* RS_INTERNAL_H */
