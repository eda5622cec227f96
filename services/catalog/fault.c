/* SPDX-License-Identifier: Apache-2.0 */
/* fault.c - the catalog's test-only fault knobs (see fault.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault.h"

struct cat_fault {
    /* Settings: written by the admin thread, read by every worker. */
    _Atomic uint32_t latency_ms, slots, pushback_ms, error_pct, queue;
    /* Counters: written by the workers, read by the admin thread. */
    _Atomic int64_t in_flight; /* calls between enter and leave       */
    _Atomic int64_t held;      /* of which hold a slot (<= slots)     */
    _Atomic int64_t waiting;   /* of which wait in the queue          */
    /* The queue: tickets in arrival order; only the waiter whose ticket is
     * `head` may take a slot, so it is first come first served. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t tail, head; /* under mu */
    atomic_ullong calls, rejected, errors;
    atomic_ullong rng; /* for error_pct; shared, contention is fine at test rates */
};

svc_err_t cat_fault_new(cat_fault_t **out)
{
    cat_fault_t *f = calloc(1, sizeof *f);

    *out = f;
    if (f == NULL)
        return SVC_ENOMEM;
    if (pthread_mutex_init(&f->mu, NULL) != 0) {
        free(f);
        *out = NULL;
        return SVC_ENOMEM;
    }
    if (pthread_cond_init(&f->cv, NULL) != 0) {
        pthread_mutex_destroy(&f->mu);
        free(f);
        *out = NULL;
        return SVC_ENOMEM;
    }
    atomic_store(&f->rng, (unsigned long long)svc_now_ns() | 1u);
    return SVC_OK;
}

void cat_fault_free(cat_fault_t *f)
{
    if (f == NULL)
        return;
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* Every waiter re-checks: a slot came free, or the limit changed. */
static void wake_waiters(cat_fault_t *f)
{
    pthread_mutex_lock(&f->mu);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

svc_err_t cat_fault_set(cat_fault_t *f, const cat_fault_settings_t *s,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    const char *bad = s->latency_ms > CAT_FAULT_MAX_LATENCY_MS     ? "latency_ms"
                      : s->slots > CAT_FAULT_MAX_SLOTS             ? "slots"
                      : s->pushback_ms > CAT_FAULT_MAX_PUSHBACK_MS ? "pushback_ms"
                      : s->error_pct > 100                         ? "error_pct"
                      : s->queue > CAT_FAULT_MAX_QUEUE             ? "queue"
                                                                   : NULL;

    if (bad != NULL) {
        svc_errbuf_set(errbuf,
                       "%s out of range (latency_ms, pushback_ms <= 60000, slots <= %u, "
                       "error_pct <= 100, queue <= %u)",
                       bad, CAT_FAULT_MAX_SLOTS, CAT_FAULT_MAX_QUEUE);
        return SVC_EINVAL;
    }
    atomic_store(&f->latency_ms, s->latency_ms);
    atomic_store(&f->slots, s->slots);
    atomic_store(&f->pushback_ms, s->pushback_ms);
    atomic_store(&f->error_pct, s->error_pct);
    atomic_store(&f->queue, s->queue);
    wake_waiters(f);
    return SVC_OK;
}

void cat_fault_get(cat_fault_t *f, cat_fault_settings_t *s)
{
    s->latency_ms = atomic_load(&f->latency_ms);
    s->slots = atomic_load(&f->slots);
    s->pushback_ms = atomic_load(&f->pushback_ms);
    s->error_pct = atomic_load(&f->error_pct);
    s->queue = atomic_load(&f->queue);
}

/* A non-blocking P() on the counting semaphore whose size is the current
 * `slots`: a CAS loop, so that the size can change at run time (a smaller
 * size admits nobody until enough holders have left). */
static bool take_slot(cat_fault_t *f, uint32_t slots)
{
    int64_t n = atomic_load(&f->held);

    while (n < (int64_t)slots)
        if (atomic_compare_exchange_weak(&f->held, &n, n + 1))
            return true;
    return false;
}

static void sleep_ms(uint32_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

typedef enum { ADMIT_REJECT, ADMIT_SLOT, ADMIT_UNLIMITED } admit_t;

/* Waits in the queue for a slot (or for the limit to be lifted). Rejects
 * when `queue` calls already wait. Never looks at the call's deadline: see
 * fault.h. The waiting count rises before the first take_slot so that a
 * leaver who reads it as 0 is sure nobody can miss its wake-up. */
static admit_t wait_for_slot(cat_fault_t *f, uint32_t queue)
{
    admit_t got = ADMIT_SLOT;
    uint64_t ticket;

    pthread_mutex_lock(&f->mu);
    if (atomic_load(&f->waiting) >= (int64_t)queue) {
        pthread_mutex_unlock(&f->mu);
        return ADMIT_REJECT;
    }
    ticket = f->tail++;
    atomic_fetch_add(&f->waiting, 1);
    for (;;) {
        uint32_t slots = atomic_load(&f->slots);
        if (ticket == f->head && (slots == 0 || take_slot(f, slots))) {
            got = slots == 0 ? ADMIT_UNLIMITED : ADMIT_SLOT;
            break;
        }
        pthread_cond_wait(&f->cv, &f->mu);
    }
    f->head++;
    atomic_fetch_sub(&f->waiting, 1);
    pthread_cond_broadcast(&f->cv); /* the next ticket may go now */
    pthread_mutex_unlock(&f->mu);
    return got;
}

/* A slot at once, else the queue, else a rejection. Newcomers queue behind
 * waiters instead of overtaking them. */
static admit_t admit(cat_fault_t *f, uint32_t slots)
{
    uint32_t queue = atomic_load(&f->queue);

    if ((queue == 0 || atomic_load(&f->waiting) == 0) && take_slot(f, slots))
        return ADMIT_SLOT;
    return queue == 0 ? ADMIT_REJECT : wait_for_slot(f, queue);
}

/* xorshift64 on a shared state; a lost update only repeats a number. */
static uint32_t roll_pct(cat_fault_t *f)
{
    unsigned long long x = atomic_load_explicit(&f->rng, memory_order_relaxed);

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    atomic_store_explicit(&f->rng, x, memory_order_relaxed);
    return (uint32_t)(x % 100);
}

static svc_err_t reject(cat_fault_t *f, rpc_ctx_t *ctx, uint32_t slots,
                        char errbuf[static SVC_ERRBUF_LEN])
{
    uint32_t pb = atomic_load(&f->pushback_ms);

    atomic_fetch_add(&f->rejected, 1);
    if (ctx != NULL) {
        rpc_ctx_set_pushback_ms(ctx, pb);
        rpc_ctx_set_error_reason(ctx, "OVERLOADED");
    }
    svc_errbuf_set(errbuf, "catalog overloaded: all %u slots busy (fault knob), retry in %u ms",
                   slots, pb);
    return SVC_EEXHAUSTED;
}

svc_err_t cat_fault_enter(cat_fault_t *f, rpc_ctx_t *ctx, cat_fault_pass_t *pass,
                          char errbuf[static SVC_ERRBUF_LEN])
{
    uint32_t slots, latency, pct;

    pass->slot = false;
    if (f == NULL)
        return SVC_OK;
    atomic_fetch_add(&f->in_flight, 1);
    atomic_fetch_add(&f->calls, 1);
    slots = atomic_load(&f->slots);
    if (slots > 0) {
        admit_t a = admit(f, slots);
        pass->slot = a == ADMIT_SLOT;
        if (a == ADMIT_REJECT)
            return reject(f, ctx, slots, errbuf);
    }
    latency = atomic_load(&f->latency_ms);
    if (latency > 0)
        sleep_ms(latency);
    pct = atomic_load(&f->error_pct);
    if (pct > 0 && roll_pct(f) < pct) {
        atomic_fetch_add(&f->errors, 1);
        svc_errbuf_set(errbuf, "injected error (fault knob error_pct=%u)", pct);
        if (ctx != NULL)
            rpc_ctx_set_error_reason(ctx, "INJECTED_FAULT");
        return SVC_EUNAVAIL;
    }
    return SVC_OK;
}

void cat_fault_leave(cat_fault_t *f, const cat_fault_pass_t *pass)
{
    if (f == NULL)
        return;
    if (pass->slot) {
        atomic_fetch_sub(&f->held, 1);
        if (atomic_load(&f->waiting) > 0)
            wake_waiters(f);
    }
    atomic_fetch_sub(&f->in_flight, 1);
}

void cat_fault_counts(cat_fault_t *f, cat_fault_counts_t *c)
{
    c->in_flight = atomic_load(&f->in_flight);
    c->held = atomic_load(&f->held);
    c->queued = atomic_load(&f->waiting);
    c->calls = atomic_load(&f->calls);
    c->rejected = atomic_load(&f->rejected);
    c->errors = atomic_load(&f->errors);
}

void cat_fault_metrics(cat_fault_t *f, admin_buf_t *out)
{
    cat_fault_settings_t s;
    cat_fault_counts_t c;

    cat_fault_get(f, &s);
    cat_fault_counts(f, &c);
    admin_buf_printf(out,
                     "# HELP shopmicro_catalog_fault_setting Test-only fault knobs (0 = off).\n"
                     "# TYPE shopmicro_catalog_fault_setting gauge\n"
                     "shopmicro_catalog_fault_setting{knob=\"latency_ms\"} %u\n"
                     "shopmicro_catalog_fault_setting{knob=\"slots\"} %u\n"
                     "shopmicro_catalog_fault_setting{knob=\"pushback_ms\"} %u\n"
                     "shopmicro_catalog_fault_setting{knob=\"error_pct\"} %u\n"
                     "shopmicro_catalog_fault_setting{knob=\"queue\"} %u\n",
                     s.latency_ms, s.slots, s.pushback_ms, s.error_pct, s.queue);
    admin_buf_printf(
        out,
        "# HELP shopmicro_catalog_in_flight CatalogService calls being served now.\n"
        "# TYPE shopmicro_catalog_in_flight gauge\n"
        "shopmicro_catalog_in_flight %lld\n"
        "# HELP shopmicro_catalog_fault_slots_held Calls holding a slot of the limit.\n"
        "# TYPE shopmicro_catalog_fault_slots_held gauge\n"
        "shopmicro_catalog_fault_slots_held %lld\n"
        "# HELP shopmicro_catalog_fault_queued Calls waiting for a slot.\n"
        "# TYPE shopmicro_catalog_fault_queued gauge\n"
        "shopmicro_catalog_fault_queued %lld\n",
        (long long)c.in_flight, (long long)c.held, (long long)c.queued);
    admin_buf_printf(
        out,
        "# HELP shopmicro_catalog_calls_total CatalogService calls received.\n"
        "# TYPE shopmicro_catalog_calls_total counter\n"
        "shopmicro_catalog_calls_total %llu\n"
        "# HELP shopmicro_catalog_fault_rejected_total Calls refused: every slot busy.\n"
        "# TYPE shopmicro_catalog_fault_rejected_total counter\n"
        "shopmicro_catalog_fault_rejected_total %llu\n"
        "# HELP shopmicro_catalog_fault_errors_total Injected UNAVAILABLE answers.\n"
        "# TYPE shopmicro_catalog_fault_errors_total counter\n"
        "shopmicro_catalog_fault_errors_total %llu\n",
        (unsigned long long)c.calls, (unsigned long long)c.rejected, (unsigned long long)c.errors);
}

/* ---- the admin port's /debug/fault ------------------------------------ */

static void state_json(cat_fault_t *f, admin_buf_t *out)
{
    cat_fault_settings_t s;
    cat_fault_counts_t c;

    cat_fault_get(f, &s);
    cat_fault_counts(f, &c);
    admin_buf_printf(out,
                     "{\"latency_ms\":%u,\"slots\":%u,\"pushback_ms\":%u,\"error_pct\":%u,"
                     "\"queue\":%u,\"in_flight\":%lld,\"queued\":%lld,\"calls\":%llu,"
                     "\"rejected\":%llu,\"errors\":%llu}\n",
                     s.latency_ms, s.slots, s.pushback_ms, s.error_pct, s.queue,
                     (long long)c.in_flight, (long long)c.queued, (unsigned long long)c.calls,
                     (unsigned long long)c.rejected, (unsigned long long)c.errors);
}

/* One "key=value" of a form into s. false with the reason in errbuf. */
static bool apply_pair(const char *pair, size_t n, cat_fault_settings_t *s,
                       char errbuf[static SVC_ERRBUF_LEN])
{
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"latency_ms", offsetof(cat_fault_settings_t, latency_ms)},
        {"slots", offsetof(cat_fault_settings_t, slots)},
        {"pushback_ms", offsetof(cat_fault_settings_t, pushback_ms)},
        {"error_pct", offsetof(cat_fault_settings_t, error_pct)},
        {"queue", offsetof(cat_fault_settings_t, queue)},
    };
    const char *eq = memchr(pair, '=', n);
    char val[16], *end;
    unsigned long v;

    if (eq == NULL || (size_t)(pair + n - eq - 1) >= sizeof val || eq + 1 == pair + n) {
        svc_errbuf_set(errbuf, "'%.*s' is not key=number", (int)(n > 40 ? 40 : n), pair);
        return false;
    }
    memcpy(val, eq + 1, (size_t)(pair + n - eq - 1));
    val[pair + n - eq - 1] = '\0';
    v = strtoul(val, &end, 10);
    if (*end != '\0' || val[0] == '-' || v > UINT32_MAX) {
        svc_errbuf_set(errbuf, "'%.*s': not a number", (int)(n > 40 ? 40 : n), pair);
        return false;
    }
    if ((size_t)(eq - pair) == 3 && memcmp(pair, "off", 3) == 0) {
        if (v != 0)
            memset(s, 0, sizeof *s);
        return true;
    }
    for (size_t i = 0; i < SVC_COUNTOF(keys); i++) {
        if (strlen(keys[i].key) == (size_t)(eq - pair) &&
            memcmp(keys[i].key, pair, (size_t)(eq - pair)) == 0) {
            *(uint32_t *)((char *)s + keys[i].off) = (uint32_t)v;
            return true;
        }
    }
    svc_errbuf_set(errbuf,
                   "unknown knob '%.*s' (latency_ms, slots, pushback_ms, error_pct, queue, off)",
                   (int)(eq - pair > 40 ? 40 : eq - pair), pair);
    return false;
}

/* Applies every pair of an "a=1&b=2" form (newlines end it too, for curl -d). */
static bool apply_form(const char *form, cat_fault_settings_t *s,
                       char errbuf[static SVC_ERRBUF_LEN])
{
    while (*form != '\0') {
        size_t n = strcspn(form, "&\r\n");
        if (n > 0 && !apply_pair(form, n, s, errbuf))
            return false;
        form += n;
        form += *form != '\0';
    }
    return true;
}

int cat_fault_debug(void *ctx, const admin_request_t *req, admin_buf_t *out)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    cat_fault_t *f = ctx;
    cat_fault_settings_t s;

    if (strcmp(req->path, "/debug/fault") != 0) {
        admin_buf_printf(out, "{\"error\":\"not found: the only knob page is /debug/fault\"}\n");
        return 404;
    }
    if (strcmp(req->method, "GET") != 0) {
        cat_fault_get(f, &s);
        if (!apply_form(req->query, &s, errbuf) || !apply_form(req->body, &s, errbuf) ||
            cat_fault_set(f, &s, errbuf) != SVC_OK) {
            admin_buf_printf(out, "{\"error\":");
            admin_buf_json_str(out, errbuf);
            admin_buf_printf(out, "}\n");
            return 400;
        }
    }
    state_json(f, out);
    return 200;
}
