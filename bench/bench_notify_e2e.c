/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_notify_e2e.c - bench_notify's `sinklog` and `e2e` modes (usage in
 * bench_notify.c): the notify-sink's log read for its delivery times, and
 * the join of orders, outbox rows and that log into the end-to-end latency.
 */
#define _GNU_SOURCE /* timegm */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_notify.h"
#include "bench_pct.h"

/* ------------------------------------------------------------------------
 * The sink's log: "ts=YYYY-MM-DDTHH:MM:SS.mmmZ ... event_id=ID ... verdict=accepted"
 * ------------------------------------------------------------------------ */
static bool log_delivery(const char *line, char id[64], int64_t *ms)
{
    const char *p, *e;
    struct tm tm = {0};
    int msec = 0;
    size_t n;

    if (strstr(line, "mod=notify-sink") == NULL || strstr(line, " verdict=accepted") == NULL ||
        (p = strstr(line, " event_id=")) == NULL || strncmp(line, "ts=", 3) != 0)
        return false;
    p += 10;
    e = strchr(p, ' ');
    n = e != NULL ? (size_t)(e - p) : strlen(p);
    if (n == 0 || n > 63)
        return false;
    memcpy(id, p, n);
    id[n] = '\0';
    if (sscanf(line + 3, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &msec) != 7)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *ms = (int64_t)timegm(&tm) * 1000 + msec;
    return true;
}

int bn_cmd_sinklog(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[2048], id[64];
    int64_t ms, first = 0, last = 0;
    long n = 0;

    if (f == NULL)
        bn_die("cannot read %s", path);
    while (fgets(line, sizeof line, f) != NULL) {
        if (!log_delivery(line, id, &ms))
            continue;
        if (n++ == 0)
            first = ms;
        last = ms;
    }
    fclose(f);
    printf("RESULT accepted=%ld first_ms=%" PRId64 " last_ms=%" PRId64 " span_s=%.3f per_s=%.0f\n",
           n, first, last, (double)(last - first) / 1000.0,
           last > first ? (double)(n - 1) * 1000.0 / (double)(last - first) : 0.0);
    return 0;
}

/* ------------------------------------------------------------------------
 * e2e: orders x outbox x sink log
 * ------------------------------------------------------------------------ */
typedef struct ent {
    char key[64];
    int64_t a, b, c; /* per table */
    char val[64];
    bool used;
} ent_t;

typedef struct map {
    ent_t *e;
    size_t cap;
} map_t;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static ent_t *map_get(map_t *m, const char *key, bool add)
{
    size_t i;

    if (m->e == NULL) {
        m->cap = 1 << 16;
        if ((m->e = calloc(m->cap, sizeof *m->e)) == NULL)
            bn_die("out of memory");
    }
    for (i = hash_str(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->e[i].used) {
            if (!add)
                return NULL;
            m->e[i].used = true;
            snprintf(m->e[i].key, sizeof m->e[i].key, "%s", key);
            return &m->e[i];
        }
        if (strcmp(m->e[i].key, key) == 0)
            return &m->e[i];
    }
}

static void stat_line(const char *what, double *v, size_t n)
{
    qsort(v, n, sizeof *v, bench_cmp_double);
    printf("  %-40s p50 %7.1f  p90 %7.1f  p99 %7.1f  max %7.1f ms\n", what, bench_pct(v, n, 50),
           bench_pct(v, n, 90), bench_pct(v, n, 99), n ? v[n - 1] : 0.0);
}

int bn_cmd_e2e(const char *orders_path, const char *outbox_path, const char *log_path)
{
    static map_t orders, outbox, hooks;
    char line[2048], id[64], ev[64];
    FILE *f;
    size_t n_orders = 0, n = 0, missing_event = 0, missing_hook = 0;
    double *tot, *s1, *s2;
    int64_t ms;

    if ((f = fopen(orders_path, "r")) == NULL)
        bn_die("cannot read %s", orders_path);
    while (fgets(line, sizeof line, f) != NULL) {
        long long t200;
        double call;
        if (sscanf(line, "%63s %lld %lf", id, &t200, &call) != 3)
            continue;
        map_get(&orders, id, true)->a = t200;
        n_orders++;
    }
    fclose(f);
    if ((f = fopen(outbox_path, "r")) == NULL)
        bn_die("cannot read %s", outbox_path);
    while (fgets(line, sizeof line, f) != NULL) {
        double created;
        ent_t *e;
        if (sscanf(line, "%63s %63s %lf", id, ev, &created) != 3)
            continue;
        e = map_get(&outbox, id, true);
        snprintf(e->val, sizeof e->val, "%s", ev);
        e->a = (int64_t)(created + 0.5);
    }
    fclose(f);
    if ((f = fopen(log_path, "r")) == NULL)
        bn_die("cannot read %s", log_path);
    while (fgets(line, sizeof line, f) != NULL) {
        ent_t *e;
        if (!log_delivery(line, id, &ms))
            continue;
        if ((e = map_get(&hooks, id, true))->a == 0)
            e->a = ms;
    }
    fclose(f);
    tot = calloc(n_orders + 1, sizeof *tot);
    s1 = calloc(n_orders + 1, sizeof *s1);
    s2 = calloc(n_orders + 1, sizeof *s2);
    if (!tot || !s1 || !s2)
        bn_die("out of memory");
    for (size_t i = 0; i < orders.cap; i++) {
        ent_t *o = &orders.e[i], *x, *h;
        if (!o->used)
            continue;
        if ((x = map_get(&outbox, o->key, false)) == NULL) {
            missing_event++;
            continue;
        }
        if ((h = map_get(&hooks, x->val, false)) == NULL) {
            missing_hook++;
            continue;
        }
        tot[n] = (double)(h->a - o->a);
        s1[n] = (double)(x->a - o->a);
        s2[n] = (double)(h->a - x->a);
        n++;
    }
    printf("e2e: %zu orders answered 200; %zu webhooks matched; %zu never confirmed (no "
           "OrderConfirmed row); %zu confirmed but no webhook at the sink\n",
           n_orders, n, missing_event, missing_hook);
    stat_line("CreateOrder 200 -> webhook at the sink", tot, n);
    printf("RESULT e2e_n=%zu e2e_p50_ms=%.0f e2e_p90_ms=%.0f e2e_p99_ms=%.0f e2e_max_ms=%.0f "
           "unconfirmed=%zu undelivered=%zu\n",
           n, bench_pct(tot, n, 50), bench_pct(tot, n, 90), bench_pct(tot, n, 99),
           n ? tot[n - 1] : 0.0, missing_event, missing_hook);
    printf("  stages (each sorted on its own; they do not add up exactly):\n");
    stat_line("200 -> OrderConfirmed row (the saga)", s1, n);
    /* The outbox keeps no per-row publish time (a cursor passes the rows:
     * services/relay/schema/0007), so the relay's and the notification's
     * shares are one stage. */
    stat_line("row -> webhook (relay, then notification)", s2, n);
    free(tot);
    free(s1);
    free(s2);
    return n > 0 && missing_event == 0 && missing_hook == 0 ? 0 : 1;
}
