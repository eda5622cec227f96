/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log_repeat.c - at most one line per key and window (svc/core.h, "Repeated
 * lines").
 *
 * A fixed table of keys, open-addressed by a hash of module and key, probed
 * PROBES slots deep. Fixed, because a limiter that allocates while the
 * process is failing would add a failure of its own; 64 keys cover the
 * routes x reasons of a service. A key that finds neither its slot nor a
 * free or idle one is written every time: the limiter never hides a line
 * it cannot account for.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "svc/core.h"

#define SLOTS   64
#define PROBES  8
#define KEY_MAX 96
#define MOD_MAX 32

typedef struct slot {
    uint64_t hash; /* 0: free */
    char module[MOD_MAX];
    svc_log_level_t lvl;
    uint64_t written_ns; /* the last line (or summary) of this key */
    uint64_t left_out;   /* lines left out since then */
    char key[KEY_MAX];
} slot_t;

struct svc_log_repeats {
    pthread_mutex_t mu;
    uint64_t window_ns;
    const svc_clock_t *clock; /* NULL: monotonic */
    uint64_t flushed_ns;      /* the last flush admit did on its own */
    slot_t slots[SLOTS];
};

static svc_log_repeats_t global = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .window_ns = (uint64_t)SVC_LOG_REPEAT_WINDOW_MS * SVC_NS_PER_MS,
};

svc_log_repeats_t *svc_log_repeats_new(uint32_t window_ms, const svc_clock_t *clock)
{
    svc_log_repeats_t *r = calloc(1, sizeof *r);

    if (r == NULL)
        return NULL;
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        return NULL;
    }
    r->window_ns =
        (uint64_t)(window_ms != 0 ? window_ms : SVC_LOG_REPEAT_WINDOW_MS) * SVC_NS_PER_MS;
    r->clock = clock;
    return r;
}

void svc_log_repeats_free(svc_log_repeats_t *r)
{
    if (r == NULL || r == &global)
        return;
    svc_log_repeats_flush(r, true);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

svc_log_repeats_t *svc_log_repeats_default(void)
{
    return &global;
}

/* FNV-1a over module, a NUL and the key as stored. */
static uint64_t key_hash(const char *module, const char *key)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);

    for (const char *p = module; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(0x100000001b3);
    h = (h ^ 0u) * UINT64_C(0x100000001b3);
    for (const char *p = key; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(0x100000001b3);
    return h != 0 ? h : 1;
}

/* The key as a summary line can quote it: no quote, backslash or control
 * character (keys are made from route patterns and reason names). */
static void key_copy(char *dst, const char *key)
{
    size_t n = 0;

    for (; key[n] != '\0' && n < KEY_MAX - 1; n++) {
        unsigned char c = (unsigned char)key[n];
        dst[n] = c < 0x20 || c == '"' || c == '\\' ? '_' : (char)c;
    }
    dst[n] = '\0';
}

static void write_summary(slot_t *s, uint64_t now)
{
    char kv[KEY_MAX + 64];

    snprintf(kv, sizeof kv, " repeat_key=\"%s\" repeated=%" PRIu64, s->key, s->left_out);
    svc_log_write(s->lvl, s->module, kv,
                  "left out %" PRIu64 " more lines like this key's last "
                  "one in %.1f s",
                  s->left_out, (double)(now - s->written_ns) / 1e9);
    s->left_out = 0;
    s->written_ns = now;
}

/* Called with r->mu held. */
static void flush_locked(svc_log_repeats_t *r, uint64_t now, bool all)
{
    for (size_t i = 0; i < SLOTS; i++) {
        slot_t *s = &r->slots[i];
        if (s->hash != 0 && s->left_out > 0 && (all || now - s->written_ns >= r->window_ns))
            write_summary(s, now);
    }
}

static bool slot_is(const slot_t *s, uint64_t h, const char *module, const char *key)
{
    return s->hash == h && strncmp(s->module, module, MOD_MAX - 1) == 0 && strcmp(s->key, key) == 0;
}

/* The key's slot, or a free one, or one idle for a window (its count
 * written first); NULL when the probed slots are all busy. *fresh tells a
 * slot just taken. Called with r->mu held. */
static slot_t *slot_for(svc_log_repeats_t *r, uint64_t h, const char *module, const char *key,
                        uint64_t now, bool *fresh)
{
    slot_t *free_slot = NULL, *idle = NULL;

    for (size_t i = 0; i < PROBES; i++) {
        slot_t *s = &r->slots[(h + i) % SLOTS];
        if (s->hash == 0) {
            if (free_slot == NULL)
                free_slot = s;
        } else if (slot_is(s, h, module, key)) {
            *fresh = false;
            return s;
        } else if (idle == NULL && now - s->written_ns >= r->window_ns) {
            idle = s;
        }
    }
    if (free_slot == NULL && idle != NULL && idle->left_out > 0)
        write_summary(idle, now);
    *fresh = true;
    return free_slot != NULL ? free_slot : idle;
}

bool svc_log_repeats_admit(svc_log_repeats_t *r, svc_log_level_t lvl, const char *module,
                           const char *key, uint64_t *left_out)
{
    char stored[KEY_MAX];
    uint64_t h, n = 0;
    bool write = true, fresh;
    slot_t *s;

    key_copy(stored, key); /* what the slot holds and compares */
    key = stored;
    h = key_hash(module, key);
    pthread_mutex_lock(&r->mu);
    uint64_t now = svc_clock_now(r->clock);
    s = slot_for(r, h, module, key, now, &fresh);
    if (s != NULL && fresh) {
        *s = (slot_t){.hash = h, .lvl = lvl, .written_ns = now};
        snprintf(s->module, sizeof s->module, "%s", module);
        memcpy(s->key, stored, sizeof s->key);
    } else if (s != NULL && now - s->written_ns < r->window_ns) {
        s->left_out++;
        write = false;
    } else if (s != NULL) {
        n = s->left_out;
        s->left_out = 0;
        s->written_ns = now;
    }
    /* After the key's own decision, so its count rides on its own line. */
    if (now - r->flushed_ns >= r->window_ns) {
        flush_locked(r, now, false);
        r->flushed_ns = now;
    }
    pthread_mutex_unlock(&r->mu);
    if (left_out != NULL)
        *left_out = n;
    return write;
}

void svc_log_repeats_flush(svc_log_repeats_t *r, bool all)
{
    pthread_mutex_lock(&r->mu);
    flush_locked(r, svc_clock_now(r->clock), all);
    pthread_mutex_unlock(&r->mu);
}

void svc_log_write_repeat(svc_log_level_t lvl, const char *module, const char *key, const char *kv,
                          const char *fmt, ...)
{
    char with_count[1024];
    uint64_t n;
    va_list ap;

    if (!svc_log_enabled(lvl) || !svc_log_repeats_admit(&global, lvl, module, key, &n))
        return;
    if (n > 0) {
        snprintf(with_count, sizeof with_count, "%s repeated=%" PRIu64, kv != NULL ? kv : "", n);
        kv = with_count;
    }
    va_start(ap, fmt);
    svc__log_vwrite(lvl, module, kv, fmt, ap);
    va_end(ap);
}
