/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine.c - the decision engine: one logical call, attempt by attempt.
 *
 * The chain, outermost first, and where each layer lives here:
 *
 *   bulkhead  rs_call_begin() takes a slot before anything else, so a full
 *             upstream is refused before it can take a breaker trial permit.
 *   breaker   rs_call_begin() asks for admission; every retry asks again
 *             (decide_failure() and rs_call_attempt()), so retries stop the
 *             moment the breaker opens. It gets ONE verdict per logical call,
 *             in settle(): a call that failed three attempts is one failure.
 *   retry     decide_failure(): outcome class, pushback, idempotency,
 *             attempts, breaker, deadline, budget - in that order, so the
 *             reason names the most basic obstacle.
 *   timeout   rs_call_attempt(): each attempt's own deadline, capped by the
 *             caller's.
 *
 * Once any attempt has run, a failed call returns the last REAL error: "the
 * upstream was UNAVAILABLE" helps the caller more than "we stopped because
 * the deadline was near". The reason says why we stopped.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

enum {
    PH_NONE,       /* not begun */
    PH_READY,      /* admitted, first attempt not started */
    PH_IN_ATTEMPT, /* an attempt is running */
    PH_WAITING,    /* a retry is scheduled (backoff) */
    PH_SETTLED,    /* the outcome is decided; only rs_call_finish() is left */
    PH_FINISHED,
};

#define MSG_LEN 320
#define KV_LEN  512

static const char *const reason_names[RS__REASON_COUNT] = {
    "ok",        "retried",          "not-retryable", "not-idempotent", "attempts-exhausted",
    "deadline",  "budget-exhausted", "breaker-open",  "bulkhead-full",  "pushback",
    "cancelled",
};

static const char *const reason_constants[RS__REASON_COUNT] = {
    "OK",        "RETRIED",          "NOT_RETRYABLE", "NOT_IDEMPOTENT", "ATTEMPTS_EXHAUSTED",
    "DEADLINE",  "BUDGET_EXHAUSTED", "BREAKER_OPEN",  "BULKHEAD_FULL",  "PUSHBACK",
    "CANCELLED",
};

static const char *const reason_texts[RS__REASON_COUNT] = {
    "ok",
    "ok after retries",
    "not retryable",
    "not retried: the method is not idempotent",
    "retries exhausted",
    "deadline too short for another attempt",
    "retry budget exhausted",
    "circuit open",
    "bulkhead full",
    "the server asked not to retry",
    "cancelled by the caller",
};

static const char *const state_names[] = {"closed", "open", "half-open"};

const char *rs_reason_name(rs_reason_t r)
{
    return (unsigned)r < RS__REASON_COUNT ? reason_names[r] : "unknown";
}

const char *rs_reason_constant(rs_reason_t r)
{
    return (unsigned)r < RS__REASON_COUNT ? reason_constants[r] : "UNKNOWN";
}

const char *rs_reason_text(rs_reason_t r)
{
    return (unsigned)r < RS__REASON_COUNT ? reason_texts[r] : "unknown";
}

const char *rs_breaker_state_name(rs_breaker_state_t s)
{
    return (unsigned)s < SVC_COUNTOF(state_names) ? state_names[s] : "unknown";
}

uint32_t rs_call_attempts(const rs_call_t *c)
{
    return c->attempts;
}

bool rs_call_is_trial(const rs_call_t *c)
{
    return c->trial != 0;
}

/* ---- logging: one line per decision, never on the happy path ------------- */

static void log_call(const rs_call_t *c, svc_log_level_t lvl, const char *decision, const char *why,
                     svc_err_t err, const char *msg)
{
    char kv[KV_LEN], key[160];

    snprintf(kv, sizeof kv,
             " upstream=%s method=%s attempt=%u max_attempts=%u decision=%s reason=%s err=%s",
             c->up->name, c->path, c->attempts, c->max_attempts, decision, why, svc_err_name(err));
    /* An outage makes every call fail alike: the first "fail" line of each
     * upstream, method and cause is written, then one a second with the count
     * left out (svc/core.h, "Repeated lines"). Retries are not limited: the
     * retry budget already bounds them to a fraction of the calls, and each
     * one is worth seeing. Nor are the breaker's transitions; the metrics
     * count every decision. */
    if (lvl < SVC_LOG_WARN || strcmp(decision, "fail") != 0) {
        svc_log_write(lvl, RS__LOG_MODULE, kv, "%s", msg);
        return;
    }
    snprintf(key, sizeof key, "%s %s %s %s %s", c->up->name, c->path, decision, why,
             svc_err_name(err));
    svc_log_write_repeat(lvl, RS__LOG_MODULE, key, kv, "%s", msg);
}

static const char *sep(const char *detail)
{
    return detail != NULL && detail[0] != '\0' ? " " : "";
}

static void log_retry(const rs_call_t *c, rs__cause_t cause, uint32_t delay_ms, const char *detail)
{
    char msg[MSG_LEN];

    if (!svc_log_enabled(SVC_LOG_WARN))
        return;
    snprintf(msg, sizeof msg, "%s failed (attempt %u/%u), retrying in %ums: %s%s%s", c->path,
             c->attempts, c->max_attempts, delay_ms, svc_err_name(c->last_err), sep(detail),
             detail != NULL ? detail : "");
    log_call(c, SVC_LOG_WARN, "retry", rs__cause_name(cause), c->last_err, msg);
}

/* Business answers and the caller's own cancellation are not resilience
 * events: they go to debug, so a storm of 404s stays out of the log. */
static svc_log_level_t fail_level(rs_reason_t r)
{
    return r == RS_REASON_NOT_RETRYABLE || r == RS_REASON_CANCELLED ? SVC_LOG_DEBUG : SVC_LOG_WARN;
}

static void log_fail(const rs_call_t *c, const char *detail)
{
    svc_log_level_t lvl = fail_level(c->reason);
    char msg[MSG_LEN];

    if (!svc_log_enabled(lvl))
        return;
    if (c->attempts == 0 && c->reason == RS_REASON_DEADLINE)
        snprintf(msg, sizeof msg, "%s not attempted (deadline): less than %ums left", c->path,
                 c->up->min_attempt_ms);
    else if (c->attempts == 0)
        snprintf(msg, sizeof msg, "%s not attempted (%s)", c->path, rs_reason_name(c->reason));
    else
        snprintf(msg, sizeof msg, "%s failed (attempt %u/%u), giving up (%s): %s%s%s", c->path,
                 c->attempts, c->max_attempts, rs_reason_name(c->reason),
                 svc_err_name(c->final_err), sep(detail), detail != NULL ? detail : "");
    log_call(c, lvl, "fail", rs_reason_name(c->reason), c->final_err, msg);
}

/* Rejections are counted, and the breaker's own transition line explains
 * them; one warning per rejected call would be a log storm of its own. */
static void log_reject(const rs_call_t *c)
{
    char msg[MSG_LEN];

    if (!svc_log_enabled(SVC_LOG_DEBUG))
        return;
    if (c->reason == RS_REASON_BREAKER_OPEN)
        snprintf(msg, sizeof msg, "%s rejected (breaker-open): circuit open, next trial in %ums",
                 c->path, rs_upstream_ms_until_trial(c->up));
    else
        snprintf(msg, sizeof msg, "%s rejected (bulkhead-full): %lld calls in flight", c->path,
                 (long long)rs_upstream_in_flight(c->up));
    log_call(c, SVC_LOG_DEBUG, "reject", rs_reason_name(c->reason), c->final_err, msg);
}

static void log_success(const rs_call_t *c)
{
    char msg[MSG_LEN];

    if (!svc_log_enabled(SVC_LOG_INFO))
        return;
    snprintf(msg, sizeof msg, "%s succeeded (attempt %u/%u) after %u retr%s", c->path, c->attempts,
             c->max_attempts, c->attempts - 1, c->attempts == 2 ? "y" : "ies");
    log_call(c, SVC_LOG_INFO, "done", rs_reason_name(c->reason), SVC_OK, msg);
}

/* ---- the journal: the live page's last decisions (journal.c) -------------- */

/* Every decision the log would show at warn or info, and the rejections: the
 * business answers and cancellations that fail_level() sends to debug are
 * left out here too, so a storm of 404s cannot push the outage off the
 * page. */
static void journal(const rs_call_t *c, rs__decided_t kind, unsigned why, svc_err_t err,
                    uint32_t delay_ms, const char *detail, uint64_t now /* 0: not read */)
{
    rs__decision_rec_t d = {.at_ns = now,
                            .method = c->m->index,
                            .attempt = c->attempts,
                            .max_attempts = c->max_attempts,
                            .delay_ms = delay_ms,
                            .err = err,
                            .kind = (uint8_t)kind,
                            .why = (uint8_t)why};

    rs__journal_text(d.detail, sizeof d.detail, detail);
    rs__journal_decision(&c->up->journal, &d, c->up->clock);
}

/* ---- settling: the one exit of every admitted call ----------------------- */

static void settle(rs_call_t *c, rs_reason_t reason, svc_err_t err, uint64_t now)
{
    rs_upstream_t *u = c->up;
    rs__mstats_t *s = c->stats;

    if (c->slot) {
        rs__bulkhead_release(&u->bulkhead);
        c->slot = 0;
    }
    /* Also releases a trial permit, whatever the verdict. */
    rs__breaker_settle(&u->breaker, c->trial, c->epoch, (rs__verdict_t)c->verdict, now);
    c->reason = reason;
    c->final_err = err;
    c->phase = PH_SETTLED;
    rs__stats_settle(s, reason, c->attempts > 0, now - c->start_ns);
}

static svc_err_t reject(rs_call_t *c, rs_reason_t reason, svc_err_t err)
{
    rs__mstats_t *s = c->stats;

    c->reason = reason;
    c->final_err = err;
    c->phase = PH_SETTLED;
    atomic_fetch_add_explicit(&s->rejected[reason], 1, memory_order_relaxed);
    rs__stats_settle(s, reason, false, 0);
    journal(c, RS__DECIDED_REJECT, reason, err, 0, NULL, 0); /* a new row reads the clock */
    log_reject(c);
    return err;
}

/* Ends the call with a failure. `denied`: a retry was wanted and refused. */
static rs_decision_t fail(rs_call_t *c, rs_reason_t reason, bool denied, uint64_t now,
                          const char *detail)
{
    rs_decision_t d = {RS_FAIL, 0, reason, c->last_err};

    if (denied)
        atomic_fetch_add_explicit(&c->stats->denied[reason], 1, memory_order_relaxed);
    settle(c, reason, c->last_err, now);
    if (fail_level(reason) >= SVC_LOG_WARN)
        journal(c, RS__DECIDED_FAIL, reason, c->last_err, 0, detail, now);
    log_fail(c, detail);
    return d;
}

/* ---- admission -------------------------------------------------------------- */

svc_err_t rs_call_begin(rs_upstream_t *u, const char *method, uint64_t deadline_ns, rs_call_t *c)
{
    const struct rs__method *m = rs__method_lookup(u, method);
    rs__admit_t admit;

    /* No clock read here: while the breaker is closed admission needs no
     * time, and the first attempt reads the clock anyway. */
    *c = (rs_call_t){0};
    c->up = u;
    c->m = m;
    c->stats = rs__stats(u, m);
    c->path = method;
    c->deadline_ns = deadline_ns;
    c->max_attempts = m->policy.max_attempts;
    c->idempotent = m->idempotency == RS_IDEMPOTENT ||
                    (m->idempotency == RS_IDEMPOTENCY_BY_NAME && rs__idempotent_by_name(method));
    c->verdict = RS__VERDICT_IGNORE;
    if (!rs__bulkhead_acquire(&u->bulkhead))
        return reject(c, RS_REASON_BULKHEAD_FULL, SVC_EEXHAUSTED);
    admit = rs__breaker_admit(&u->breaker, &c->epoch);
    if (admit == RS__ADMIT_REJECT) {
        rs__bulkhead_release(&u->bulkhead);
        return reject(c, RS_REASON_BREAKER_OPEN, SVC_EUNAVAIL);
    }
    c->slot = 1;
    c->trial = admit == RS__ADMIT_TRIAL;
    c->phase = PH_READY;
    return SVC_OK;
}

/* ---- attempts ------------------------------------------------------------------ */

/* Is there room for an attempt starting at `at`? */
static bool room_at(const rs_call_t *c, uint64_t at)
{
    if (c->deadline_ns == SVC_DEADLINE_NONE)
        return true;
    return at < c->deadline_ns &&
           c->deadline_ns - at >= (uint64_t)c->up->min_attempt_ms * SVC_NS_PER_MS;
}

/* rs_call_attempt() found it may not start the next attempt. */
static svc_err_t stop(rs_call_t *c, rs_reason_t reason, uint64_t now)
{
    if (c->attempts == 0)
        c->last_err = SVC_ETIMEDOUT; /* only the deadline can stop a first attempt */
    return fail(c, reason, c->attempts > 0, now, NULL).err;
}

svc_err_t rs_call_attempt(rs_call_t *c, uint64_t *attempt_deadline_ns)
{
    rs_upstream_t *u = c->up;
    uint32_t timeout_ms = c->m->policy.attempt_timeout_ms;
    uint64_t now;

    if (c->phase == PH_SETTLED || c->phase == PH_FINISHED)
        return c->final_err;
    if (c->phase != PH_READY && c->phase != PH_WAITING)
        return SVC_EINVAL;
    now = rs__now(u);
    if (!room_at(c, now))
        return stop(c, RS_REASON_DEADLINE, now);
    if (c->phase == PH_WAITING) {
        if (!rs__breaker_recheck(&u->breaker, c->trial, &c->epoch))
            return stop(c, RS_REASON_BREAKER_OPEN, now);
        if (!rs__bulkhead_acquire(&u->bulkhead))
            return stop(c, RS_REASON_BULKHEAD_FULL, now);
        c->slot = 1;
    } else {
        /* The first attempt: the call really goes out, so it earns the
         * retry budget its share, and its latency starts now. */
        c->start_ns = now;
        rs__budget_deposit(&u->budget, now);
    }
    c->attempt_deadline_ns = c->deadline_ns;
    if (timeout_ms != RS_TIMEOUT_NONE) {
        uint64_t own = rs__add_sat(now, (uint64_t)timeout_ms * SVC_NS_PER_MS);
        if (own < c->attempt_deadline_ns)
            c->attempt_deadline_ns = own;
    }
    c->attempts++;
    atomic_fetch_add_explicit(&c->stats->attempts, 1, memory_order_relaxed);
    c->phase = PH_IN_ATTEMPT;
    *attempt_deadline_ns = c->attempt_deadline_ns;
    return SVC_OK;
}

/* ---- verdicts -------------------------------------------------------------------- */

static rs_decision_t done(rs_call_t *c)
{
    rs_decision_t d = {RS_DONE, 0, c->attempts > 1 ? RS_REASON_RETRIED : RS_REASON_OK, SVC_OK};
    uint64_t now = rs__now(c->up);

    settle(c, d.reason, SVC_OK, now);
    if (d.reason == RS_REASON_RETRIED) {
        journal(c, RS__DECIDED_DONE, d.reason, SVC_OK, 0, NULL, now);
        log_success(c);
    }
    return d;
}

static rs_decision_t retry(rs_call_t *c, rs__cause_t cause, uint32_t delay_ms, const char *detail,
                           uint64_t now)
{
    rs_decision_t d = {RS_RETRY, delay_ms, RS_REASON_RETRIED, c->last_err};

    /* Nobody should hold a slot while sleeping: it would shrink the
     * bulkhead for the calls that can make progress. */
    if (c->slot) {
        rs__bulkhead_release(&c->up->bulkhead);
        c->slot = 0;
    }
    atomic_fetch_add_explicit(&c->stats->retries[cause], 1, memory_order_relaxed);
    c->phase = PH_WAITING;
    journal(c, RS__DECIDED_RETRY, cause, c->last_err, delay_ms, detail, now);
    log_retry(c, cause, delay_ms, detail);
    return d;
}

/* The wait before the next attempt: jittered backoff, but never less than
 * the server asked for. Returns false if the server asked for too long. */
static bool next_delay(const rs_call_t *c, const rs_outcome_t *o, uint32_t *delay_ms)
{
    const rs_policy_t *p = &c->m->policy;
    rs_upstream_t *u = c->up;
    uint64_t random = u->random.next(u->random.ctx);

    *delay_ms =
        rs_backoff_ms(p->jitter, p->backoff_base_ms, p->backoff_cap_ms, c->attempts - 1, random);
    if (o->pushback_ms < 0)
        return true;
    if (o->pushback_ms > (int64_t)u->max_pushback_ms)
        return false;
    if ((uint64_t)o->pushback_ms > *delay_ms)
        *delay_ms = (uint32_t)o->pushback_ms;
    return true;
}

static rs_decision_t decide_failure(rs_call_t *c, const rs_outcome_t *o, rs__class_t cls)
{
    rs_upstream_t *u = c->up;
    uint64_t now = rs__now(u);
    uint32_t delay_ms;

    if (o->err == SVC_ETIMEDOUT && cls.verdict == RS__VERDICT_IGNORE)
        return fail(c, RS_REASON_DEADLINE, false, now, o->detail); /* the caller's */
    if (cls.cause == RS__CAUSE_NONE)
        return fail(c, RS_REASON_NOT_RETRYABLE, false, now, o->detail);
    if (o->pushback_ms < RS_PUSHBACK_NONE)
        return fail(c, RS_REASON_PUSHBACK, true, now, o->detail);
    if (!c->idempotent)
        return fail(c, RS_REASON_NOT_IDEMPOTENT, true, now, o->detail);
    if (c->attempts >= c->max_attempts)
        return fail(c, RS_REASON_ATTEMPTS_EXHAUSTED, true, now, o->detail);
    if (!rs__breaker_recheck(&u->breaker, c->trial, &c->epoch))
        return fail(c, RS_REASON_BREAKER_OPEN, true, now, o->detail);
    if (!next_delay(c, o, &delay_ms))
        return fail(c, RS_REASON_PUSHBACK, true, now, o->detail);
    if (!room_at(c, rs__add_sat(now, (uint64_t)delay_ms * SVC_NS_PER_MS)))
        return fail(c, RS_REASON_DEADLINE, true, now, o->detail);
    /* Last, because it is the only check that spends something. */
    if (!rs__budget_withdraw(&u->budget, now))
        return fail(c, RS_REASON_BUDGET_EXHAUSTED, true, now, o->detail);
    return retry(c, cls.cause, delay_ms, o->detail, now);
}

rs_decision_t rs_call_end_attempt(rs_call_t *c, const rs_outcome_t *o)
{
    rs_decision_t misuse = {RS_FAIL, 0, c->reason, SVC_EINVAL};
    bool own_timer;
    rs__class_t cls;

    if (c->phase != PH_IN_ATTEMPT) {
        if (c->phase == PH_SETTLED || c->phase == PH_FINISHED)
            misuse.err = c->final_err;
        return misuse;
    }
    /* Only an attempt deadline earlier than the caller's is "ours": when
     * they coincide, the caller's deadline is what ran out. */
    own_timer = o->attempt_timer_fired && c->attempt_deadline_ns < c->deadline_ns;
    cls = rs__classify(o, own_timer, c->m->policy.retry_on);
    c->last_err = o->err;
    c->verdict = (uint8_t)cls.verdict;
    c->pushback_ms = o->pushback_ms <= 0           ? 0
                     : o->pushback_ms > UINT32_MAX ? UINT32_MAX
                                                   : (uint32_t)o->pushback_ms;
    if (o->err == SVC_OK)
        return done(c);
    return decide_failure(c, o, cls);
}

/* ---- the end -------------------------------------------------------------------- */

void rs_call_finish(rs_call_t *c, rs_result_t *out)
{
    if (c->phase == PH_READY || c->phase == PH_IN_ATTEMPT || c->phase == PH_WAITING) {
        /* The caller gave up before a verdict: say nothing to the breaker. */
        c->verdict = RS__VERDICT_IGNORE;
        settle(c, RS_REASON_CANCELLED, SVC_ECANCELLED, rs__now(c->up));
        log_fail(c, NULL);
    }
    if (c->phase == PH_SETTLED)
        c->phase = PH_FINISHED;
    if (out != NULL) {
        out->err = c->final_err;
        out->reason = c->reason;
        out->attempts = c->attempts;
        out->pushback_ms = c->final_err != SVC_OK ? c->pushback_ms : 0;
    }
}
