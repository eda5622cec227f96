/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy.c - the per-upstream method table and the meaning of outcomes.
 *
 * The table is resolved once, when the upstream is built: every row gets a
 * complete policy (its own values, the upstream's for the rest), so a call
 * never merges anything. One extra row, "other", serves methods the table
 * does not name; it keeps metric cardinality bounded.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define PATH_MAX_LEN 255u

static const char *const cause_names[RS__CAUSE_COUNT] = {
    "unavailable", "attempt-timeout", "http-429", "http-503", "http-5xx", "shed"};

const char *rs__cause_name(rs__cause_t c)
{
    return (unsigned)c < RS__CAUSE_COUNT ? cause_names[c] : "none";
}

/* The text after the last '/', or all of path. */
static const char *short_name(const char *path)
{
    const char *slash = strrchr(path, '/');

    return slash != NULL ? slash + 1 : path;
}

static bool starts_word(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    char next;

    if (strncmp(name, prefix, n) != 0)
        return false;
    /* "GetProduct" and "List" are reads; "Getaway" and "Listen" are not. */
    next = name[n];
    return next == '\0' || (next >= 'A' && next <= 'Z') || (next >= '0' && next <= '9');
}

bool rs__idempotent_by_name(const char *path)
{
    const char *name = short_name(path);

    return starts_word(name, "Get") || starts_word(name, "List");
}

/*
 * One place decides what an outcome means, for the breaker and for retry.
 * The HTTP status, when there is one, decides retryability: a binding maps
 * 429/500/502/503/504 to UNAVAILABLE for the breaker, but by default only 429
 * and 503 (and connection errors, which have no status) are worth repeating;
 * 500, 502 and 504 only with RS_RETRY_HTTP_5XX, which a caller sets when its
 * requests are safe to repeat after the server may have acted on them (the
 * HTTP binding's idempotent requests).
 */
rs__class_t rs__classify(const rs_outcome_t *o, bool per_attempt_timer, uint32_t retry_on)
{
    rs__class_t c = {RS__VERDICT_SUCCESS, RS__CAUSE_NONE};

    if (o->dependency_failed)
        return c; /* it answered: up, and the deeper hop already retried */
    switch (o->err) {
    case SVC_OK:
        return c;
    case SVC_EUNAVAIL:
        c.verdict = RS__VERDICT_FAILURE;
        if (o->http_status == 0)
            c.cause = RS__CAUSE_UNAVAILABLE;
        break;
    case SVC_ETIMEDOUT:
        /* Only our own per-attempt timer says the upstream was slow; the
         * caller's deadline running out says nothing about it. */
        c.verdict = per_attempt_timer ? RS__VERDICT_FAILURE : RS__VERDICT_IGNORE;
        if (per_attempt_timer)
            c.cause = RS__CAUSE_ATTEMPT_TIMEOUT;
        break;
    case SVC_ECANCELLED:
    case SVC_ENOMEM:
        c.verdict = RS__VERDICT_IGNORE;
        break;
    default:
        break; /* a business answer: the upstream is up */
    }
    /* The server answered (a success for the breaker) but said when to
     * come back: the pushback it sent becomes the retry's delay. */
    if (o->err == SVC_EEXHAUSTED && o->http_status == 0 && o->pushback_ms >= 0)
        c.cause = RS__CAUSE_SHED;
    if (o->http_status == 429)
        c.cause = RS__CAUSE_HTTP_429;
    else if (o->http_status == 503)
        c.cause = RS__CAUSE_HTTP_503;
    else if (o->http_status == 500 || o->http_status == 502 || o->http_status == 504)
        c.cause = RS__CAUSE_HTTP_5XX;
    if (c.cause != RS__CAUSE_NONE && (retry_on & (1u << c.cause)) == 0)
        c.cause = RS__CAUSE_NONE;
    return c;
}

const struct rs__method *rs__method_lookup(const rs_upstream_t *u, const char *path)
{
    size_t len = strlen(path);

    /* A handful of rows: a length filter then memcmp beats hashing a
     * 50-byte path. */
    for (size_t i = 0; i < u->n_methods; i++) {
        const struct rs__method *m = &u->methods[i];
        if (m->len == len && memcmp(m->path, path, len) == 0)
            return m;
    }
    return &u->methods[u->n_methods];
}

/* ---- building the table ------------------------------------------------- */

static void inherit(rs_policy_t *p, const rs_policy_t *from)
{
    if (p->attempt_timeout_ms == 0)
        p->attempt_timeout_ms = from->attempt_timeout_ms;
    if (p->max_attempts == 0)
        p->max_attempts = from->max_attempts;
    if (p->backoff_base_ms == 0)
        p->backoff_base_ms = from->backoff_base_ms;
    if (p->backoff_cap_ms == 0)
        p->backoff_cap_ms = from->backoff_cap_ms;
    if (p->jitter == RS_JITTER_DEFAULT)
        p->jitter = from->jitter;
    if (p->retry_on == 0)
        p->retry_on = from->retry_on;
}

static svc_err_t check_policy(const rs_policy_t *p, const char *where,
                              char errbuf[static SVC_ERRBUF_LEN])
{
    if (p->max_attempts < 1 || p->max_attempts > RS_MAX_ATTEMPTS_LIMIT) {
        svc_errbuf_set(errbuf, "%s: max_attempts %u not in 1..%u", where, p->max_attempts,
                       RS_MAX_ATTEMPTS_LIMIT);
        return SVC_EINVAL;
    }
    if (p->backoff_base_ms > p->backoff_cap_ms) {
        svc_errbuf_set(errbuf, "%s: backoff_base_ms %u > backoff_cap_ms %u", where,
                       p->backoff_base_ms, p->backoff_cap_ms);
        return SVC_EINVAL;
    }
    if (p->jitter < RS_JITTER_FULL || p->jitter > RS_JITTER_NONE) {
        svc_errbuf_set(errbuf, "%s: unknown jitter kind %d", where, (int)p->jitter);
        return SVC_EINVAL;
    }
    if ((p->retry_on & ~RS_RETRY_ALL) != 0) {
        svc_errbuf_set(errbuf, "%s: unknown retry_on bits 0x%x", where, p->retry_on);
        return SVC_EINVAL;
    }
    return SVC_OK;
}

/* Labels go into Prometheus text unescaped, so they are restricted. */
bool rs__label_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > RS_NAME_MAX)
        return false;
    for (; *s != '\0'; s++)
        if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", *s) == NULL)
            return false;
    return true;
}

static bool path_ok(const char *p)
{
    if (p == NULL || p[0] != '/' || strlen(p) > PATH_MAX_LEN)
        return false;
    for (; *p != '\0'; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e || *p == '"' || *p == '\\')
            return false;
    return true;
}

static svc_err_t check_unique(const rs_upstream_t *u, size_t i, char errbuf[static SVC_ERRBUF_LEN])
{
    const struct rs__method *m = &u->methods[i];

    if (strcmp(m->label, "other") == 0) {
        svc_errbuf_set(errbuf, "method %s: label \"other\" is reserved", m->path);
        return SVC_EINVAL;
    }
    for (size_t j = 0; j < i; j++) {
        if (strcmp(u->methods[j].path, m->path) == 0) {
            svc_errbuf_set(errbuf, "method %s: listed twice", m->path);
            return SVC_EINVAL;
        }
        if (strcmp(u->methods[j].label, m->label) == 0) {
            svc_errbuf_set(errbuf, "method %s: label %s already used; set .label", m->path,
                           m->label);
            return SVC_EINVAL;
        }
    }
    return SVC_OK;
}

static svc_err_t build_row(rs_upstream_t *u, size_t i, const rs_method_t *row,
                           const rs_policy_t *defaults, char errbuf[static SVC_ERRBUF_LEN])
{
    struct rs__method *m = &u->methods[i];
    const char *label;
    svc_err_t err;

    if (!path_ok(row->path)) {
        svc_errbuf_set(errbuf, "method %zu: path must be printable ASCII starting with '/'", i);
        return SVC_EINVAL;
    }
    label = row->label != NULL ? row->label : short_name(row->path);
    if (!rs__label_ok(label)) {
        svc_errbuf_set(errbuf, "method %s: label must match [A-Za-z0-9_.-]{1,%u}", row->path,
                       RS_NAME_MAX);
        return SVC_EINVAL;
    }
    if (row->idempotency > RS_NOT_IDEMPOTENT) {
        svc_errbuf_set(errbuf, "method %s: unknown idempotency %d", row->path,
                       (int)row->idempotency);
        return SVC_EINVAL;
    }
    m->path = strdup(row->path);
    if (m->path == NULL)
        return SVC_ENOMEM;
    m->len = strlen(m->path);
    snprintf(m->label, sizeof m->label, "%s", label);
    m->policy = row->policy;
    inherit(&m->policy, defaults);
    /* Resolve the by-name rule now, so only "other" applies it per call. */
    m->idempotency = row->idempotency;
    if (m->idempotency == RS_IDEMPOTENCY_BY_NAME)
        m->idempotency = rs__idempotent_by_name(m->path) ? RS_IDEMPOTENT : RS_NOT_IDEMPOTENT;
    m->index = (uint32_t)i;
    err = check_policy(&m->policy, m->path, errbuf);
    if (err != SVC_OK)
        return err;
    return check_unique(u, i, errbuf);
}

static rs_policy_t builtin_defaults(void)
{
    rs_policy_t p = {
        RS_DEFAULT_ATTEMPT_TIMEOUT_MS, RS_DEFAULT_MAX_ATTEMPTS, RS_DEFAULT_BACKOFF_BASE_MS,
        RS_DEFAULT_BACKOFF_CAP_MS,     RS_JITTER_FULL,          RS_RETRY_DEFAULT};
    return p;
}

svc_err_t rs__methods_build(rs_upstream_t *u, const rs_upstream_opts_t *o,
                            char errbuf[static SVC_ERRBUF_LEN])
{
    rs_policy_t defaults = o->policy, builtin = builtin_defaults();
    struct rs__method *other;
    svc_err_t err;

    if (o->n_methods > RS_MAX_METHODS || (o->n_methods > 0 && o->methods == NULL)) {
        svc_errbuf_set(errbuf, "n_methods %zu: at most %u, and methods must be set", o->n_methods,
                       RS_MAX_METHODS);
        return SVC_EINVAL;
    }
    inherit(&defaults, &builtin);
    err = check_policy(&defaults, "policy", errbuf);
    if (err != SVC_OK)
        return err;
    u->methods = calloc(o->n_methods + 1, sizeof *u->methods);
    if (u->methods == NULL)
        return SVC_ENOMEM;
    u->n_methods = o->n_methods;
    for (size_t i = 0; i < o->n_methods; i++) {
        err = build_row(u, i, &o->methods[i], &defaults, errbuf);
        if (err != SVC_OK)
            return err; /* the caller frees the partial table */
    }
    other = &u->methods[o->n_methods];
    snprintf(other->label, sizeof other->label, "other");
    other->policy = defaults;
    other->idempotency = RS_IDEMPOTENCY_BY_NAME;
    other->index = (uint32_t)o->n_methods;
    return SVC_OK;
}

void rs__methods_free(rs_upstream_t *u)
{
    if (u->methods == NULL)
        return;
    for (size_t i = 0; i < u->n_methods; i++)
        free(u->methods[i].path);
    free(u->methods);
    u->methods = NULL;
}
