/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sink.c - the notify-sink's behaviour: deliveries (verify, dedupe, record,
 * log), the control endpoint's misbehaviour, /received and /metrics. The
 * routes are listed in sink.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sink.h"

#define MOD             "notify-sink"
#define KEY_MAX         WHK_ID_MAX
#define RETRY_AFTER_MAX 64
#define AWAY_MAX_S      3600

/* Verdicts in logs and metrics; the pkg/webhook refusals keep their names. */
typedef enum {
    V_ACCEPTED,
    V_DUPLICATE,
    V_MISSING_HEADER,
    V_BAD_TIMESTAMP,
    V_STALE_TIMESTAMP,
    V_BAD_SIGNATURE,
    V_INJECTED_FAIL,
    V_INJECTED_THROTTLE,
    V_INJECTED_HANG,
    V_BAD_ID,
    V_RECORDS_FULL,
    V__COUNT
} verdict_t;

static const char *const verdict_names[V__COUNT] = {
    "accepted",        "duplicate",     "missing-header", "bad-timestamp",
    "stale-timestamp", "bad-signature", "injected-fail",  "injected-throttle",
    "injected-hang",   "bad-id",        "records-full",
};

typedef enum { M_NONE, M_FAIL, M_THROTTLE, M_HANG } sink_mode_t;

static const char *const mode_names[] = {"none", "fail", "throttle", "hang"};

typedef struct record {
    char id[KEY_MAX + 1];  /* webhook-id: the dedupe key */
    char key[KEY_MAX + 1]; /* Idempotency-Key as first sent (shown, not compared) */
    uint64_t hash;         /* of id: the scan compares this first */
    int64_t received_at;   /* Unix seconds */
    int64_t keep_until;    /* webhook-timestamp + tolerance: a replay is stale after it */
    size_t bytes;
    uint32_t times; /* 1 + duplicates */
} record_t;

struct nsk_sink {
    nsk_sink_opts_t o;
    nsk_http_t *http;
    record_t *records; /* ring of o.max_records */
    size_t n_records, next;
    uint64_t counts[V__COUNT];
    sink_mode_t mode;
    uint32_t left;
    int status;
    char retry_after[RETRY_AFTER_MAX];
    char *body; /* the last response body */
    size_t body_len, body_cap;
};

/* ---- response bodies ------------------------------------------------------- */

static void out_reset(nsk_sink_t *s)
{
    s->body_len = 0;
}

static void out_printf(nsk_sink_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void out_printf(nsk_sink_t *s, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (s->body_len + (size_t)n + 1 > s->body_cap) {
        size_t cap = (s->body_len + (size_t)n + 1) * 2;
        char *p = realloc(s->body, cap);
        if (p == NULL)
            return; /* the body comes out short; the sink is a test double */
        s->body = p;
        s->body_cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(s->body + s->body_len, s->body_cap - s->body_len, fmt, ap);
    va_end(ap);
    s->body_len += (size_t)n;
}

static void answer(nsk_sink_t *s, nsk_resp_t *resp, int status, const char *ctype)
{
    resp->status = status;
    resp->ctype = ctype;
    resp->body = s->body;
    resp->body_len = s->body_len;
}

/* ---- records ------------------------------------------------------------------ */

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static record_t *find(nsk_sink_t *s, const char *id)
{
    uint64_t h = fnv1a(id);

    for (size_t i = 0; i < s->n_records; i++)
        if (s->records[i].hash == h && strcmp(s->records[i].id, id) == 0)
            return &s->records[i];
    return NULL;
}

/* Seconds until the record add() would overwrite may go: 0 when there is
 * room or it is past its keep_until. Forgetting an id earlier would let a
 * captured delivery be replayed as new while its timestamp still passes. */
static int64_t full_for(const nsk_sink_t *s, int64_t now)
{
    const record_t *r = &s->records[s->next];

    return s->n_records < s->o.max_records || r->keep_until < now ? 0 : r->keep_until - now + 1;
}

static void add(nsk_sink_t *s, const char *id, const char *key, int64_t keep_until, size_t bytes)
{
    record_t *r = &s->records[s->next];

    snprintf(r->id, sizeof r->id, "%s", id);
    snprintf(r->key, sizeof r->key, "%s", key);
    r->hash = fnv1a(id);
    r->received_at = (int64_t)time(NULL);
    r->keep_until = keep_until;
    r->bytes = bytes;
    r->times = 1;
    s->next = (s->next + 1) % s->o.max_records;
    if (s->n_records < s->o.max_records)
        s->n_records++;
}

/* ---- deliveries ------------------------------------------------------------------ */

/* Only a value that is a valid key goes into a log line or a record: it
 * has no spaces, quotes or control bytes to break either. */
static const char *printable(const char *v)
{
    return v != NULL && strlen(v) <= KEY_MAX && svc_idempotency_key_valid(v, strlen(v)) ? v : "-";
}

static void log_delivery(const nsk_req_t *req, verdict_t v, int status, const char *key)
{
    const char *id = printable(nsk_req_header(req, "webhook-id"));
    char kv[3 * KEY_MAX];

    if (!svc_log_enabled(SVC_LOG_INFO))
        return;
    snprintf(kv, sizeof kv,
             " event_id=%s idempotency_key=%s verdict=%s duplicate=%s status=%d bytes=%zu", id, key,
             verdict_names[v], v == V_DUPLICATE ? "true" : "false", status, req->body_len);
    svc_log_write(SVC_LOG_INFO, MOD, kv, "delivery %s %s", id, verdict_names[v]);
}

/* Misbehaviour, if any is pending; true when it answered. */
static bool misbehave(nsk_sink_t *s, const nsk_req_t *req, nsk_resp_t *resp)
{
    verdict_t v = s->mode == M_FAIL       ? V_INJECTED_FAIL
                  : s->mode == M_THROTTLE ? V_INJECTED_THROTTLE
                                          : V_INJECTED_HANG;
    const char *key = nsk_req_header(req, "Idempotency-Key");

    if (s->mode == M_NONE || s->left == 0)
        return false;
    if (--s->left == 0)
        s->mode = M_NONE;
    s->counts[v]++;
    out_reset(s);
    if (v == V_INJECTED_HANG) {
        resp->status = 0;
        log_delivery(req, v, 0, printable(key));
        return true;
    }
    if (v == V_INJECTED_THROTTLE)
        snprintf(resp->extra, sizeof resp->extra, "Retry-After: %s", s->retry_after);
    out_printf(s, "{\"injected\":\"%s\"}\n", verdict_names[v]);
    answer(s, resp, s->status, "application/json");
    log_delivery(req, v, resp->status, printable(key));
    return true;
}

static verdict_t from_whk(whk_verdict_t w)
{
    switch (w) {
    case WHK_VALID:
        return V_ACCEPTED;
    case WHK_MISSING_HEADER:
        return V_MISSING_HEADER;
    case WHK_BAD_TIMESTAMP:
        return V_BAD_TIMESTAMP;
    case WHK_STALE_TIMESTAMP:
        return V_STALE_TIMESTAMP;
    case WHK_BAD_ID:
        return V_BAD_ID;
    case WHK_BAD_SIGNATURE:
        break;
    }
    return V_BAD_SIGNATURE;
}

static void deliver(nsk_sink_t *s, const nsk_req_t *req, nsk_resp_t *resp)
{
    const char *id = nsk_req_header(req, "webhook-id");
    const char *ts = nsk_req_header(req, "webhook-timestamp");
    const char *key = nsk_req_header(req, "Idempotency-Key");
    int64_t now = (int64_t)time(NULL), wait_s;
    verdict_t v;
    record_t *r;
    int status;

    if (misbehave(s, req, resp))
        return;
    v = from_whk(whk_verify_any(&s->o.keys, id, ts, nsk_req_header(req, "webhook-signature"),
                                req->body, req->body_len, now, s->o.tolerance_s));
    /* The signed webhook-id is the dedupe key (the spec: it is the
     * idempotency key). The Idempotency-Key header is not signed: deduping
     * on it would let a captured delivery be replayed with a new one. */
    if (key == NULL || strcmp(printable(key), "-") == 0)
        key = id;
    out_reset(s);
    if (v != V_ACCEPTED) {
        status = v == V_MISSING_HEADER || v == V_BAD_ID ? 400 : 401;
        s->counts[v]++;
        out_printf(s, "{\"error\":\"%s\"}\n", verdict_names[v]);
        answer(s, resp, status, "application/json");
        log_delivery(req, v, status, printable(key));
        return;
    }
    r = find(s, id);
    if (r != NULL) {
        r->times++;
        v = V_DUPLICATE;
    } else if ((wait_s = full_for(s, now)) > 0) {
        /* Every slot holds an id that could still be replayed: refuse for
         * now (the sender retries a 503) instead of forgetting one. */
        s->counts[V_RECORDS_FULL]++;
        snprintf(resp->extra, sizeof resp->extra, "Retry-After: %lld", (long long)wait_s);
        out_printf(s, "{\"error\":\"%s\"}\n", verdict_names[V_RECORDS_FULL]);
        answer(s, resp, 503, "application/json");
        log_delivery(req, V_RECORDS_FULL, 503, printable(key));
        return;
    } else {
        add(s, id, key, strtoll(ts, NULL, 10) + s->o.tolerance_s, req->body_len);
    }
    s->counts[v]++;
    out_printf(s, "{\"duplicate\":%s}\n", v == V_DUPLICATE ? "true" : "false");
    answer(s, resp, 200, "application/json");
    log_delivery(req, v, 200, printable(key));
}

/* ---- the control endpoint ------------------------------------------------------------ */

/* Percent-decodes one query value (and '+' as a space) into out. */
static void query_value(const char *query, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name), o = 0;

    out[0] = '\0';
    for (const char *p = query; *p != '\0';) {
        const char *amp = strchr(p, '&');
        size_t len = amp != NULL ? (size_t)(amp - p) : strlen(p);
        if (len > n && strncmp(p, name, n) == 0 && p[n] == '=') {
            for (size_t i = n + 1; i < len && o + 1 < cap; i++) {
                unsigned hex;
                if (p[i] == '%' && i + 2 < len && sscanf(p + i + 1, "%2x", &hex) == 1) {
                    out[o++] = (char)hex;
                    i += 2;
                } else {
                    out[o++] = p[i] == '+' ? ' ' : p[i];
                }
            }
            out[o] = '\0';
            return;
        }
        p += len + (amp != NULL);
    }
}

/* A query number in [min, max]; def when absent; -1 when malformed. */
static long query_num(const char *query, const char *name, long min, long max, long def)
{
    char v[32], *stop;
    long n;

    query_value(query, name, v, sizeof v);
    if (v[0] == '\0')
        return def;
    n = strtol(v, &stop, 10);
    return *stop == '\0' && n >= min && n <= max ? n : -1;
}

static bool set_mode(nsk_sink_t *s, const char *q)
{
    long fail = query_num(q, "fail", 1, 1000000, 0), thr = query_num(q, "throttle", 1, 1000000, 0);
    long hang = query_num(q, "hang", 1, 1000000, 0);
    long status = query_num(q, "status", 200, 599, thr > 0 ? 429 : 500);

    if (fail < 0 || thr < 0 || hang < 0 || status < 0 || (fail > 0) + (thr > 0) + (hang > 0) != 1)
        return false;
    s->mode = fail > 0 ? M_FAIL : thr > 0 ? M_THROTTLE : M_HANG;
    s->left = (uint32_t)(fail + thr + hang);
    s->status = (int)status;
    query_value(q, "retry_after", s->retry_after, sizeof s->retry_after);
    if (s->mode == M_THROTTLE && s->retry_after[0] == '\0')
        return false;
    for (char *c = s->retry_after; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            return false; /* it goes into a response header */
    return true;
}

static void control(nsk_sink_t *s, const nsk_req_t *req, nsk_resp_t *resp)
{
    long away = query_num(req->query, "away", 1, AWAY_MAX_S, 0);

    out_reset(s);
    if (query_num(req->query, "reset", 1, 1, 0) == 1) {
        s->mode = M_NONE;
        s->left = 0;
        s->n_records = s->next = 0;
        memset(s->counts, 0, sizeof s->counts);
        out_printf(s, "{\"mode\":\"none\",\"reset\":true}\n");
    } else if (away > 0) {
        nsk_http_go_away(s->http, (uint32_t)away * 1000u);
        out_printf(s, "{\"mode\":\"away\",\"seconds\":%ld}\n", away);
        svc_log_warn(MOD, "control: going away for %ld s (listener and connections closed)", away);
    } else if (set_mode(s, req->query)) {
        out_printf(s, "{\"mode\":\"%s\",\"left\":%u,\"status\":%d,\"retry_after\":\"%s\"}\n",
                   mode_names[s->mode], s->left, s->status, s->retry_after);
        svc_log_info(MOD, "control: %s the next %u deliveries (status %d)", mode_names[s->mode],
                     s->left, s->status);
    } else {
        s->mode = M_NONE;
        out_printf(s, "{\"error\":\"one of fail=N, throttle=N&retry_after=V, hang=N, away=S, "
                      "reset=1; status in 200..599\"}\n");
        answer(s, resp, 400, "application/json");
        return;
    }
    answer(s, resp, 200, "application/json");
}

/* ---- read-only pages -------------------------------------------------------------------- */

static void received(nsk_sink_t *s, nsk_resp_t *resp)
{
    size_t first = s->n_records < s->o.max_records ? 0 : s->next;

    out_reset(s);
    out_printf(s, "{\"count\":%zu,\"duplicates\":%llu,\"deliveries\":[", s->n_records,
               (unsigned long long)s->counts[V_DUPLICATE]);
    for (size_t i = 0; i < s->n_records; i++) {
        const record_t *r = &s->records[(first + i) % s->o.max_records];
        /* ids and keys are printable without '"' or '\\' problems: checked
         * by printable() except for those two characters, escaped here. */
        out_printf(s, "%s{\"id\":\"", i > 0 ? "," : "");
        for (const char *c = r->id; *c != '\0'; c++)
            out_printf(s, "%s%c", *c == '"' || *c == '\\' ? "\\" : "", *c);
        out_printf(s, "\",\"idempotency_key\":\"");
        for (const char *c = r->key; *c != '\0'; c++)
            out_printf(s, "%s%c", *c == '"' || *c == '\\' ? "\\" : "", *c);
        out_printf(s, "\",\"received_at\":%lld,\"bytes\":%zu,\"times\":%u}",
                   (long long)r->received_at, r->bytes, r->times);
    }
    out_printf(s, "]}\n");
    answer(s, resp, 200, "application/json");
}

static void metrics(nsk_sink_t *s, nsk_resp_t *resp)
{
    out_reset(s);
    out_printf(s, "# HELP shopmicro_notify_sink_deliveries_total Deliveries received, by verdict.\n"
                  "# TYPE shopmicro_notify_sink_deliveries_total counter\n");
    for (int v = 0; v < V__COUNT; v++)
        out_printf(s, "shopmicro_notify_sink_deliveries_total{verdict=\"%s\"} %llu\n",
                   verdict_names[v], (unsigned long long)s->counts[v]);
    out_printf(s,
               "# HELP shopmicro_notify_sink_recorded Distinct deliveries held (dedupe window).\n"
               "# TYPE shopmicro_notify_sink_recorded gauge\n"
               "shopmicro_notify_sink_recorded %zu\n",
               s->n_records);
    answer(s, resp, 200, "text/plain; version=0.0.4");
}

void nsk_sink_handle(void *ctx, const nsk_req_t *req, nsk_resp_t *resp)
{
    nsk_sink_t *s = ctx;
    bool get = strcmp(req->method, "GET") == 0, post = strcmp(req->method, "POST") == 0;

    out_reset(s);
    if (get && strcmp(req->path, "/healthz") == 0) {
        out_printf(s, "ok\n");
        answer(s, resp, 200, NULL);
    } else if (get && strcmp(req->path, "/metrics") == 0) {
        metrics(s, resp);
    } else if (get && strcmp(req->path, "/received") == 0) {
        received(s, resp);
    } else if (post && strcmp(req->path, "/control") == 0) {
        control(s, req, resp);
    } else if (post) {
        deliver(s, req, resp);
    } else {
        out_printf(s, "not found\n");
        answer(s, resp, get ? 404 : 405, NULL);
    }
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

svc_err_t nsk_sink_new(const nsk_sink_opts_t *o, nsk_sink_t **out)
{
    nsk_sink_t *s;

    if (o->max_records == 0 || o->tolerance_s < 0)
        return SVC_EINVAL;
    s = calloc(1, sizeof *s);
    if (s == NULL)
        return SVC_ENOMEM;
    s->o = *o;
    s->records = calloc(o->max_records, sizeof *s->records);
    if (s->records == NULL) {
        free(s);
        return SVC_ENOMEM;
    }
    *out = s;
    return SVC_OK;
}

void nsk_sink_free(nsk_sink_t *s)
{
    if (s == NULL)
        return;
    free(s->records);
    free(s->body);
    free(s);
}

void nsk_sink_attach(nsk_sink_t *s, nsk_http_t *h)
{
    s->http = h;
}
