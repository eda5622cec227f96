/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.c - the client thread: the only thread that touches the curl multi
 * handle, an easy handle, a job after its submission, or an rs_call_t. It
 * drives the engine the event-loop way (docs/resilience.md §2): begin,
 * attempt (a fresh easy handle whose timeout is the attempt deadline), end
 * of attempt -> done / retry timer / fail, finish -> done callback.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define MAX_POLL_MS 1000 /* a stop request arrives by wakeup; this is a safety net */

void rs_http__job_free(rs_http__job_t *j)
{
    if (j == NULL)
        return;
    if (j->easy != NULL) {
        curl_multi_remove_handle(j->cl->multi, j->easy);
        curl_easy_cleanup(j->easy);
    }
    curl_slist_free_all(j->headers);
    free(j->url);
    free(j->body);
    free(j->resp);
    free(j->res.body);
    free(j);
}

/* ---- the end of a request ------------------------------------------------------- */

static void finish(rs_http__job_t *j, svc_err_t err)
{
    rs_http_client_t *cl = j->cl;
    rs_result_t rr = {err, err == SVC_ECANCELLED ? RS_REASON_CANCELLED : RS_REASON_NOT_RETRYABLE, 0,
                      0};

    if (j->started)
        rs_call_finish(&j->call, &rr);
    j->res.err = rr.err;
    j->res.reason = rr.reason;
    j->res.attempts = rr.attempts;
    if (j->res.message[0] == '\0')
        snprintf(j->res.message, sizeof j->res.message, "%s",
                 j->detail[0] != '\0' ? j->detail : rs_reason_text(rr.reason));
    if (j->want_body && j->resp != NULL) {
        j->res.body = j->resp; /* moves to the receiver */
        j->res.body_len = j->resp_len;
        j->resp = NULL;
    }
    for (size_t i = 0; i < cl->n_active; i++) {
        if (cl->active[i] == j) {
            cl->active[i] = cl->active[--cl->n_active];
            break;
        }
    }
    /* Its slot is free before done runs, so that done may submit again. */
    pthread_mutex_lock(&cl->lock);
    cl->in_flight--;
    pthread_mutex_unlock(&cl->lock);
    j->done(j->arg, &j->res);
    j->res.body = NULL; /* the callee's now */
    rs_http__job_free(j);
}

/* ---- attempts ---------------------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    rs_http__job_t *j = arg;
    size_t len = size * n;
    char *p;

    if (!j->want_body)
        return len;
    if (j->resp_len + len > j->cl->o.max_response_bytes) {
        j->resp_overflow = true;
        return 0; /* curl ends the transfer with CURLE_WRITE_ERROR */
    }
    p = realloc(j->resp, j->resp_len + len + 1);
    if (p == NULL)
        return 0;
    memcpy(p + j->resp_len, data, len);
    j->resp = p;
    j->resp_len += len;
    j->resp[j->resp_len] = '\0';
    return len;
}

static svc_err_t easy_setup(rs_http__job_t *j, uint64_t attempt_deadline_ns)
{
    uint64_t now = svc_now_ns();
    long timeout_ms = attempt_deadline_ns > now
                          ? (long)((attempt_deadline_ns - now + SVC_NS_PER_MS - 1) / SVC_NS_PER_MS)
                          : 1;
    CURL *e = curl_easy_init();
    bool ok;

    if (e == NULL)
        return SVC_ENOMEM;
    j->curl_err[0] = '\0';
    ok = curl_easy_setopt(e, CURLOPT_URL, j->url) == CURLE_OK &&
         curl_easy_setopt(e, CURLOPT_PRIVATE, j) == CURLE_OK &&
         curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
         curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms) == CURLE_OK &&
         curl_easy_setopt(e, CURLOPT_HTTPHEADER, j->headers) == CURLE_OK &&
         curl_easy_setopt(e, CURLOPT_USERAGENT, j->cl->o.user_agent) == CURLE_OK &&
         curl_easy_setopt(e, CURLOPT_ERRORBUFFER, j->curl_err) == CURLE_OK &&
         curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
         curl_easy_setopt(e, CURLOPT_WRITEDATA, j) == CURLE_OK &&
         curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK;
    /* A body goes out as POSTFIELDS under whatever method was asked for. */
    if (ok && strcmp(j->method, "HEAD") == 0)
        ok = curl_easy_setopt(e, CURLOPT_NOBODY, 1L) == CURLE_OK;
    else if (ok && (j->body_len > 0 || strcmp(j->method, "POST") == 0))
        ok = curl_easy_setopt(e, CURLOPT_POSTFIELDS, j->body) == CURLE_OK &&
             curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->body_len) == CURLE_OK;
    if (ok && strcmp(j->method, "GET") != 0 && strcmp(j->method, "POST") != 0 &&
        strcmp(j->method, "HEAD") != 0)
        ok = curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, j->method) == CURLE_OK;
    if (!ok || curl_multi_add_handle(j->cl->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        return SVC_EINTERNAL;
    }
    j->easy = e;
    return SVC_OK;
}

static void next_attempt(rs_http__job_t *j)
{
    uint64_t dl;
    svc_err_t err;

    j->wake_ns = 0;
    err = rs_call_attempt(&j->call, &dl);
    if (err != SVC_OK) {
        finish(j, err); /* deadline, breaker-open, bulkhead-full: reason set */
        return;
    }
    free(j->resp);
    j->resp = NULL;
    j->resp_len = 0;
    j->resp_overflow = false;
    j->pushback_ms = RS_PUSHBACK_NONE;
    err = easy_setup(j, dl);
    if (err != SVC_OK) {
        rs_outcome_t o = RS_OUTCOME_INIT;
        o.err = err;
        o.detail = "curl easy handle setup failed";
        snprintf(j->detail, sizeof j->detail, "%s", o.detail);
        rs_decision_t d = rs_call_end_attempt(&j->call, &o);
        finish(j, d.err);
    }
}

/* Retry-After, honoured on 429 and 503 only (RFC 9110 §10.2.3). */
static int64_t retry_after(CURL *e, long status)
{
    struct curl_header *h = NULL;

    if (status != 429 && status != 503)
        return RS_PUSHBACK_NONE;
    if (curl_easy_header(e, "Retry-After", 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
        return RS_PUSHBACK_NONE;
    return rs_pushback_parse_retry_after(h->value, strlen(h->value), (int64_t)time(NULL));
}

/* The outcome of the attempt that just ended on j->easy. */
static rs_outcome_t outcome_of(rs_http__job_t *j, CURLcode rc)
{
    rs_outcome_t o = RS_OUTCOME_INIT;
    long status = 0;

    if (rc == CURLE_OK)
        curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &status);
    o.http_status = (int)status;
    j->res.status = (int)status;
    if (rc != CURLE_OK) {
        o.err = rs_http__curl_err(rc);
        o.attempt_timer_fired = rc == CURLE_OPERATION_TIMEDOUT;
        snprintf(j->detail, sizeof j->detail, "%s %.100s: %.100s", j->method, j->url,
                 j->resp_overflow         ? "response body over max_response_bytes"
                 : j->curl_err[0] != '\0' ? j->curl_err
                                          : curl_easy_strerror(rc));
    } else {
        o.err = rs_http__status_err(status);
        o.pushback_ms = retry_after(j->easy, status);
        snprintf(j->detail, sizeof j->detail, "%s %.100s: HTTP %ld", j->method, j->url, status);
    }
    j->pushback_ms = o.pushback_ms;
    if (o.pushback_ms >= 0)
        j->res.retry_after_ms = (uint32_t)(o.pushback_ms > UINT32_MAX ? UINT32_MAX : o.pushback_ms);
    o.detail = j->detail;
    return o;
}

/* A failure after a Retry-After that could not be honoured says so. */
static void explain_pushback(rs_http__job_t *j, const rs_decision_t *d)
{
    uint64_t now = svc_now_ns();

    if (j->pushback_ms < 0)
        return;
    if (d->reason == RS_REASON_DEADLINE)
        snprintf(j->res.message, sizeof j->res.message,
                 "%.140s; Retry-After %lldms does not fit in the deadline (%llums left)", j->detail,
                 (long long)j->pushback_ms,
                 (unsigned long long)(j->deadline_ns > now ? (j->deadline_ns - now) / SVC_NS_PER_MS
                                                           : 0));
    else if (d->reason == RS_REASON_PUSHBACK)
        snprintf(j->res.message, sizeof j->res.message,
                 "%.140s; Retry-After %lldms is more than max_pushback_ms", j->detail,
                 (long long)j->pushback_ms);
}

static void attempt_done(rs_http__job_t *j, CURLcode rc)
{
    rs_outcome_t o = outcome_of(j, rc);
    rs_decision_t d;

    curl_multi_remove_handle(j->cl->multi, j->easy);
    curl_easy_cleanup(j->easy);
    j->easy = NULL;
    d = rs_call_end_attempt(&j->call, &o);
    if (d.action == RS_RETRY) {
        j->wake_ns = svc_now_ns() + (uint64_t)d.delay_ms * SVC_NS_PER_MS;
        if (j->wake_ns == 0)
            j->wake_ns = 1;
        return;
    }
    if (d.action == RS_FAIL)
        explain_pushback(j, &d);
    finish(j, d.action == RS_DONE ? SVC_OK : d.err);
}

/* ---- admission ------------------------------------------------------------------------- */

static void start(rs_http__job_t *j)
{
    rs_http_client_t *cl = j->cl;
    svc_err_t err;

    cl->active[cl->n_active++] = j; /* in_flight bounds it: never past max_in_flight */
    err = rs_call_begin(j->up, j->rs_path, j->deadline_ns, &j->call);
    j->started = true;
    if (err != SVC_OK) {
        /* breaker-open or bulkhead-full: no attempt, answered at once */
        if (err == SVC_EUNAVAIL)
            j->res.retry_after_ms = rs_upstream_ms_until_trial(j->up);
        finish(j, err);
        return;
    }
    next_attempt(j);
}

/* ---- the loop -------------------------------------------------------------------------- */

/* Takes the submission queue; true when the client is stopping. */
static bool take_queue(rs_http_client_t *cl, rs_http__job_t **head)
{
    bool stop;

    pthread_mutex_lock(&cl->lock);
    *head = cl->queue_head;
    cl->queue_head = cl->queue_tail = NULL;
    stop = cl->stop;
    pthread_mutex_unlock(&cl->lock);
    return stop;
}

/* Starts the attempts whose backoff is over. */
static void fire_timers(rs_http_client_t *cl)
{
    uint64_t now = svc_now_ns();

    for (size_t i = 0; i < cl->n_active;) {
        rs_http__job_t *j = cl->active[i];
        size_t before = cl->n_active;

        if (j->wake_ns != 0 && j->wake_ns <= now)
            next_attempt(j);
        if (cl->n_active == before)
            i++; /* else j finished and another took slot i */
    }
}

/* Milliseconds until the next backoff ends (at most MAX_POLL_MS); curl's
 * own timeouts are curl_multi_poll()'s business. */
static int next_wait_ms(const rs_http_client_t *cl)
{
    uint64_t now = svc_now_ns(), next = UINT64_MAX;

    for (size_t i = 0; i < cl->n_active; i++)
        if (cl->active[i]->wake_ns != 0 && cl->active[i]->wake_ns < next)
            next = cl->active[i]->wake_ns;
    if (next <= now)
        return 0;
    if (next == UINT64_MAX || next - now >= (uint64_t)MAX_POLL_MS * SVC_NS_PER_MS)
        return MAX_POLL_MS;
    return (int)((next - now + SVC_NS_PER_MS - 1) / SVC_NS_PER_MS);
}

static void read_completions(rs_http_client_t *cl)
{
    CURLMsg *m;
    int left;

    while ((m = curl_multi_info_read(cl->multi, &left)) != NULL) {
        rs_http__job_t *j = NULL;
        if (m->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&j);
        if (j != NULL)
            attempt_done(j, m->data.result);
    }
}

/* Stopping: whatever the thread holds is answered "cancelled". */
static void cancel_all(rs_http_client_t *cl, rs_http__job_t *queued)
{
    while (queued != NULL) {
        rs_http__job_t *next = queued->next;
        snprintf(queued->res.message, sizeof queued->res.message, "client stopped");
        cl->active[cl->n_active++] = queued;
        finish(queued, SVC_ECANCELLED);
        queued = next;
    }
    while (cl->n_active > 0) {
        rs_http__job_t *j = cl->active[cl->n_active - 1];
        snprintf(j->res.message, sizeof j->res.message, "client stopped");
        finish(j, SVC_ECANCELLED);
    }
}

void *rs_http__loop(void *arg)
{
    rs_http_client_t *cl = arg;

    for (;;) {
        rs_http__job_t *q;
        int running = 0;

        if (take_queue(cl, &q)) {
            cancel_all(cl, q);
            return NULL;
        }
        while (q != NULL) {
            rs_http__job_t *next = q->next;
            start(q);
            q = next;
        }
        curl_multi_perform(cl->multi, &running);
        read_completions(cl);
        fire_timers(cl);
        curl_multi_perform(cl->multi, &running); /* attempts the timers just started */
        read_completions(cl);
        /* A completion read just now may have set a timer: computed last. */
        curl_multi_poll(cl->multi, NULL, 0, next_wait_ms(cl), NULL);
    }
}
