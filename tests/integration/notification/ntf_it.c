/* SPDX-License-Identifier: Apache-2.0 */
/* ntf_it.c - the notification test's world (ntf_it.h). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#include "http_it.h"
#include "ntf_it.h"
#include "shopmicro/events/v1/events.pb-c.h"

static char *env_or_die(const char *name)
{
    char *v = getenv(name);

    if (v == NULL)
        fprintf(stderr, "ntf_it: %s is not set (run under ctest)\n", name);
    return v;
}

static int start_sink(ntf_it_t *w)
{
    char listen[64], errbuf[SVC_ERRBUF_LEN] = "";
    const char *env[] = {listen, "NOTIFY_WEBHOOK_SECRET=" NTF_IT_SECRET, NULL};
    spawn_opts_t o;

    w->sink_port = spawn_free_port();
    snprintf(listen, sizeof listen, "NOTIFY_SINK_LISTEN=127.0.0.1:%d", w->sink_port);
    spawn_opts_init(&o);
    o.path = env_or_die("NOTIFY_SINK_BIN");
    o.env = env;
    if (o.path == NULL || spawn_start(&o, &w->sink, errbuf) != SVC_OK ||
        spawn_wait_port(w->sink, "127.0.0.1", w->sink_port, mq_it_ms(10000), errbuf) != SVC_OK) {
        fprintf(stderr, "ntf_it: notify-sink: %s\n", errbuf);
        return -1;
    }
    return 0;
}

void ntf_it_svc_start(ntf_it_t *w)
{
    char e[4][160], errbuf[SVC_ERRBUF_LEN] = "";
    const char *env[] = {e[0],
                         e[1],
                         e[2],
                         e[3],
                         "NOTIFY_CONSUMER_GROUP=notification-it",
                         "NOTIFY_CONSUMER_SESSION_TIMEOUT_MS=6000",
                         "NOTIFY_CONSUMER_BATCH_MAX=100",
                         "NOTIFY_CONSUMER_COMMIT_INTERVAL_MS=200",
                         "NOTIFY_QUEUE_BASE=" NTF_IT_BASE,
                         "NOTIFY_RETRY_TIERS_MS=1000,2000,4000",
                         "NOTIFY_WORKERS=2",
                         "NOTIFY_PREFETCH=4",
                         "NOTIFY_MAX_ATTEMPTS=4",
                         "NOTIFY_ATTEMPT_TIMEOUT_MS=1000",
                         "NOTIFY_JOB_DEADLINE_MS=5000",
                         "NOTIFY_WEBHOOK_BREAKER_COOLDOWN_MS=1500",
                         "NOTIFY_LOG_LEVEL=info",
                         "NOTIFY_WEBHOOK_SECRET=" NTF_IT_SECRET_NEW " " NTF_IT_SECRET,
                         NULL};
    spawn_opts_t o;

    if (w->admin_port == 0)
        w->admin_port = spawn_free_port();
    snprintf(e[0], sizeof e[0], "NOTIFY_KAFKA_BROKERS=%s", w->kafka.brokers);
    snprintf(e[1], sizeof e[1], "NOTIFY_RABBITMQ_PORT=%d", w->rabbit.port);
    snprintf(e[2], sizeof e[2], "NOTIFY_WEBHOOK_URL=http://127.0.0.1:%d/webhooks", w->sink_port);
    snprintf(e[3], sizeof e[3], "NOTIFY_ADMIN_LISTEN=127.0.0.1:%d", w->admin_port);
    spawn_opts_init(&o);
    o.path = env_or_die("NOTIFICATION_BIN");
    o.env = env;
    assert_non_null(o.path);
    assert_int_equal(spawn_start(&o, &w->svc, errbuf), SVC_OK);
    ntf_it_wait_log(w, "consuming worker=1", 20000);
}

int ntf_it_up(ntf_it_t *w)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    rs_http_opts_t o;

    memset(w, 0, sizeof *w);
    rs_http_opts_init(&o);
    o.name = "it";
    o.upstream.policy.max_attempts = 1;
    if (rs_http_client_new(&o, &w->http, errbuf) != SVC_OK) {
        fprintf(stderr, "ntf_it: http client: %s\n", errbuf);
        return -1;
    }
    if (rly_it_kafka(&w->kafka, "start") != SVC_OK ||
        mq_it_node(&w->rabbit, "start", NULL) != SVC_OK || start_sink(w) != 0)
        return -1;
    ntf_it_svc_start(w);
    return 0;
}

int ntf_it_down(ntf_it_t *w)
{
    int status = -1, rc = 0;

    if (w->svc != NULL) {
        spawn_signal(w->svc, SIGTERM);
        if (spawn_wait_exit(w->svc, mq_it_ms(20000), &status) != SVC_OK || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "ntf_it: notification did not exit 0 on SIGTERM\n");
            spawn_log_dump(w->svc, 40);
            rc = -1;
        }
        spawn_free(w->svc);
    }
    spawn_free(w->sink);
    rs_http_client_free(w->http);
    mq_it_node_cleanup(&w->rabbit);
    rly_it_kafka_cleanup(&w->kafka);
    return rc;
}

static size_t pack(const char *type, const char *id, uint8_t *buf, size_t cap)
{
    size_t n;

    if (strcmp(type, "cancelled") == 0) {
        Shopmicro__Events__V1__OrderCancelled m = SHOPMICRO__EVENTS__V1__ORDER_CANCELLED__INIT;
        m.order_id = (char *)id;
        m.reason = (char *)"insufficient stock";
        m.cancelled_at = (char *)"2026-12-03T20:00:00Z";
        n = shopmicro__events__v1__order_cancelled__get_packed_size(&m);
        assert_true(n <= cap);
        return shopmicro__events__v1__order_cancelled__pack(&m, buf);
    }
    if (strcmp(type, "confirmed") == 0) {
        Shopmicro__Events__V1__OrderConfirmed m = SHOPMICRO__EVENTS__V1__ORDER_CONFIRMED__INIT;
        m.order_id = (char *)id;
        m.confirmed_at = (char *)"2026-12-03T20:00:00Z";
        n = shopmicro__events__v1__order_confirmed__get_packed_size(&m);
        assert_true(n <= cap);
        return shopmicro__events__v1__order_confirmed__pack(&m, buf);
    }
    {
        Shopmicro__Events__V1__OrderCreated m = SHOPMICRO__EVENTS__V1__ORDER_CREATED__INIT;
        m.order_id = (char *)id;
        n = shopmicro__events__v1__order_created__get_packed_size(&m);
        assert_true(n <= cap);
        return shopmicro__events__v1__order_created__pack(&m, buf);
    }
}

void ntf_it_produce(ntf_it_t *w, const char *type, const char *id)
{
    char ce_type[80];
    kfk_ce_t ce = {.id = id,
                   .type = ce_type,
                   .source = "/shopmicro/order",
                   .time = "2026-12-03T20:00:00Z",
                   .request_id = "it-req"};
    kfk_header_t h[KFK_CE_MAX_HEADERS];
    uint8_t value[512];
    size_t n_h = 0, len = pack(type, id, value, sizeof value);

    snprintf(ce_type, sizeof ce_type, "shopmicro.order.v1.Order%c%s", type[0] - 32, type + 1);
    assert_int_equal(kfk_ce_headers(&ce, h, &n_h, SVC_ERRBUF_SCRATCH), SVC_OK);
    assert_int_equal(rly_it_produce(&w->kafka, "shopmicro.orders.v1", id, strlen(id), value, len, h,
                                    n_h, mq_it_ms(10000)),
                     SVC_OK);
}

void ntf_it_control(ntf_it_t *w, const char *query)
{
    char url[96];

    snprintf(url, sizeof url, "http://127.0.0.1:%d/control", w->sink_port);
    hit_control(w->http, url, query);
}

int ntf_it_received(ntf_it_t *w, const char *id)
{
    int times = 0;

    return ntf_it_recorded(w, id, &times) < 0 ? -1 : times;
}

int ntf_it_recorded(ntf_it_t *w, const char *id, int *times)
{
    static char page[1 << 20];
    char needle[128];
    const char *p, *t;
    int n = 0;

    *times = 0;
    if (rly_it_http_get(w->sink_port, "/received", page, sizeof page) != 200)
        return -1;
    snprintf(needle, sizeof needle, "\"id\":\"%s\"", id);
    for (p = strstr(page, needle); p != NULL; p = strstr(p + 1, needle)) {
        if (n++ == 0 && (t = strstr(p, "\"times\":")) != NULL)
            *times = atoi(t + 8);
    }
    return n;
}

bool ntf_it_wait_received(ntf_it_t *w, const char *id, int timeout_ms)
{
    uint64_t end = svc_now_ns() + (uint64_t)mq_it_ms(timeout_ms) * 1000000u;
    struct timespec ts = {0, 50 * 1000000L};

    while (svc_now_ns() < end) {
        if (ntf_it_received(w, id) > 0)
            return true;
        nanosleep(&ts, NULL);
    }
    return false;
}

void ntf_it_wait_log(ntf_it_t *w, const char *needle, int timeout_ms)
{
    if (spawn_log_wait(w->svc, needle, mq_it_ms(timeout_ms)) != SVC_OK) {
        fprintf(stderr, "ntf_it: no \"%s\" in the notification log\n", needle);
        spawn_log_dump(w->svc, 60);
        fail();
    }
}

double ntf_it_metric(ntf_it_t *w, const char *name)
{
    static char page[1 << 17];

    if (rly_it_http_get(w->admin_port, "/metrics", page, sizeof page) != 200)
        return -1;
    return rly_it_metric(page, name);
}

void ntf_it_wait_metric(ntf_it_t *w, const char *name, double min, int timeout_ms)
{
    uint64_t end = svc_now_ns() + (uint64_t)mq_it_ms(timeout_ms) * 1000000u;
    struct timespec ts = {0, 50 * 1000000L};
    double v = -1;

    while ((v = ntf_it_metric(w, name)) < min && svc_now_ns() < end)
        nanosleep(&ts, NULL);
    if (v < min)
        fail_msg("%s is %g, not >= %g", name, v, min);
}

int ntf_it_dlq(ntf_it_t *w, const char *verb, const char *arg, char *out, size_t cap)
{
    char port[64], log[512], errbuf[SVC_ERRBUF_LEN] = "";
    const char *env[] = {port, "NOTIFY_QUEUE_BASE=" NTF_IT_BASE, NULL};
    const char *argv[] = {"notify-dlq", verb, arg, NULL};
    int wstatus = 0;
    spawn_opts_t o;
    FILE *f;
    size_t n = 0;

    snprintf(port, sizeof port, "NOTIFY_RABBITMQ_PORT=%d", w->rabbit.port);
    spawn_log_path_make("notify-dlq", log, sizeof log);
    spawn_opts_init(&o);
    o.path = env_or_die("NOTIFY_DLQ_BIN");
    o.argv = argv;
    o.env = env;
    o.log_path = log;
    assert_non_null(o.path);
    assert_int_equal(spawn_run(&o, mq_it_ms(20000), &wstatus, errbuf), SVC_OK);
    if ((f = fopen(log, "r")) != NULL) {
        n = fread(out, 1, cap - 1, f);
        fclose(f);
    }
    out[n] = '\0';
    print_message("notify-dlq %s %s -> exit %d:\n%s", verb, arg != NULL ? arg : "",
                  WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, out);
    return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
}
