/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rs_http_client.c - pkg/resilience's HTTP binding against a real HTTP
 * server on loopback: the notify-sink's own server and behaviour
 * (services/notify-sink, its library), run in a thread of this process and
 * told to misbehave through its control endpoint. Waits have generous
 * bounds; nothing asserts speed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "http_it.h"
#include "support/group.h"
#include "server.h"
#include "support/spawn.h"
#include "webhook/webhook.h"

#define SECRET "whsec_dGVzdC1ycy1odHRwLWNsaWVudC13ZWJob29rLWtleSE="

typedef struct sink {
    nsk_server_t *srv;
    pthread_t thread;
    int stop[2];
    char url[64];     /* http://127.0.0.1:<port>/hooks */
    char control[64]; /* http://127.0.0.1:<port>/control */
} sink_t;

typedef struct fixture {
    sink_t a;
    rs_http_client_t *ctl; /* for /control only: its breaker is not the one under test */
    whk_key_t key;
    unsigned seq;
} fixture_t;

/* ---- the sink in a thread --------------------------------------------------------- */

static const char *sink_env(const char *name)
{
    if (strcmp(name, "NOTIFY_SINK_LISTEN") == 0)
        return "127.0.0.1:0";
    if (strcmp(name, "NOTIFY_WEBHOOK_SECRET") == 0)
        return SECRET;
    return NULL;
}

static void *sink_main(void *arg)
{
    sink_t *s = arg;

    nsk_server_run(s->srv, s->stop[0]);
    return NULL;
}

static int sink_start(sink_t *s)
{
    char errbuf[SVC_ERRBUF_LEN];
    nsk_config_t cfg;

    if (nsk_config_load(&cfg, sink_env, errbuf) != SVC_OK ||
        nsk_server_new(&cfg, &s->srv, errbuf) != SVC_OK || pipe(s->stop) != 0) {
        fprintf(stderr, "sink: %s\n", errbuf);
        return -1;
    }
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d/hooks", nsk_server_port(s->srv));
    snprintf(s->control, sizeof s->control, "http://127.0.0.1:%d/control", nsk_server_port(s->srv));
    return pthread_create(&s->thread, NULL, sink_main, s) == 0 ? 0 : -1;
}

static void sink_stop(sink_t *s)
{
    if (write(s->stop[1], "x", 1) != 1)
        abort();
    pthread_join(s->thread, NULL);
    nsk_server_free(s->srv);
    close(s->stop[0]);
    close(s->stop[1]);
}

/* ---- helpers ------------------------------------------------------------------------- */

static rs_http_client_t *client_new(void (*tune)(rs_http_opts_t *))
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    rs_http_client_t *cl = NULL;
    rs_http_opts_t o;

    rs_http_opts_init(&o);
    o.name = "test";
    o.upstream.policy.backoff_base_ms = 20;
    o.upstream.policy.backoff_cap_ms = 100;
    if (tune != NULL)
        tune(&o);
    if (rs_http_client_new(&o, &cl, errbuf) != SVC_OK)
        fail_msg("rs_http_client_new: %s", errbuf);
    return cl;
}

static void control(fixture_t *f, const char *query)
{
    hit_control(f->ctl, f->a.control, query);
}

/* A signed webhook POST with a fresh id; with an Idempotency-Key when keyed. */
static svc_err_t deliver(fixture_t *f, rs_http_client_t *cl, const char *url, uint64_t deadline_ms,
                         bool keyed, rs_http_result_t *res)
{
    char id[32];

    snprintf(id, sizeof id, "evt-%u-%u", (unsigned)getpid(), ++f->seq);
    return hit_deliver(cl, &f->key, url, id, deadline_ms, keyed, false, res);
}

/* ---- fixtures ------------------------------------------------------------------------- */

static int group_setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);

    if (f == NULL || sink_start(&f->a) != 0 ||
        whk_key_parse(SECRET, &f->key, SVC_ERRBUF_SCRATCH) != SVC_OK)
        return -1;
    f->ctl = client_new(NULL);
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    fixture_t *f = *state;

    rs_http_client_free(f->ctl);
    sink_stop(&f->a);
    free(f);
    return 0;
}

static int reset(void **state)
{
    control(*state, "reset=1");
    return 0;
}

/* ---- the tests -------------------------------------------------------------------------- */

static void short_attempts(rs_http_opts_t *o)
{
    o->upstream.policy.attempt_timeout_ms = 300;
}

static void attempt_timeout_fires_and_is_retried(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(short_attempts);
    rs_http_result_t res;

    control(f, "hang=1");
    assert_int_equal(deliver(f, cl, f->a.url, 10000, true, &res), SVC_OK);
    assert_int_equal(res.status, 200);
    assert_int_equal(res.attempts, 2);
    assert_int_equal(res.reason, RS_REASON_RETRIED);
    rs_http_client_free(cl);
}

static void status_500_is_retried_400_is_not(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(NULL);
    rs_http_result_t res;

    control(f, "fail=1");
    assert_int_equal(deliver(f, cl, f->a.url, 10000, true, &res), SVC_OK);
    assert_int_equal(res.attempts, 2);
    assert_int_equal(res.reason, RS_REASON_RETRIED);

    control(f, "fail=1&status=400");
    assert_int_equal(deliver(f, cl, f->a.url, 10000, true, &res), SVC_EINVAL);
    assert_int_equal(res.status, 400);
    assert_int_equal(res.attempts, 1);
    assert_int_equal(res.reason, RS_REASON_NOT_RETRYABLE);

    /* a POST without an Idempotency-Key is never repeated */
    control(f, "fail=1");
    assert_int_equal(deliver(f, cl, f->a.url, 10000, false, &res), SVC_EUNAVAIL);
    assert_int_equal(res.status, 500);
    assert_int_equal(res.attempts, 1);
    assert_int_equal(res.reason, RS_REASON_NOT_IDEMPOTENT);
    rs_http_client_free(cl);
}

static void retry_after_is_waited_out(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(NULL);
    rs_http_result_t res;
    char query[128], date[40];
    time_t later;
    struct tm tm;
    uint64_t t0 = svc_now_ns();

    control(f, "throttle=1&retry_after=1");
    assert_int_equal(deliver(f, cl, f->a.url, 10000, true, &res), SVC_OK);
    assert_int_equal(res.attempts, 2);
    assert_int_equal(res.retry_after_ms, 1000);
    assert_true(hit_ms_since(t0) >= 1000);

    /* the HTTP-date form, 503 this time: at least the second boundary
     * after next has to pass */
    later = time(NULL) + 2; /* now: the first half took a second of it */
    gmtime_r(&later, &tm);
    strftime(date, sizeof date, "%a,%%20%d%%20%b%%20%Y%%20%H:%M:%S%%20GMT", &tm);
    snprintf(query, sizeof query, "throttle=1&status=503&retry_after=%s", date);
    control(f, query);
    t0 = svc_now_ns();
    assert_int_equal(deliver(f, cl, f->a.url, 10000, true, &res), SVC_OK);
    assert_int_equal(res.attempts, 2);
    assert_true(hit_ms_since(t0) >= 900); /* date granularity: whole seconds */
    rs_http_client_free(cl);
}

static void retry_after_beyond_the_deadline_gives_up_at_once(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(NULL);
    rs_http_result_t res;

    control(f, "throttle=1&retry_after=10");
    assert_int_equal(deliver(f, cl, f->a.url, 3000, true, &res), SVC_EUNAVAIL);
    assert_int_equal(res.status, 429);
    assert_int_equal(res.attempts, 1);
    assert_int_equal(res.reason, RS_REASON_DEADLINE);
    assert_non_null(strstr(res.message, "Retry-After 10000ms does not fit in the deadline"));

    /* beyond max_pushback_ms (30 s) even with all the time in the world */
    control(f, "throttle=1&retry_after=120");
    assert_int_equal(deliver(f, cl, f->a.url, 200000, true, &res), SVC_EUNAVAIL);
    assert_int_equal(res.reason, RS_REASON_PUSHBACK);
    assert_int_equal(res.attempts, 1);
    rs_http_client_free(cl);
}

static void tiny_budget(rs_http_opts_t *o)
{
    o->upstream.breaker.failures = 0; /* only the budget may stop retries here */
    o->upstream.budget.percent = 0;
    o->upstream.budget.min_per_sec = 1; /* 1 retry per 1 s window */
    o->upstream.budget.window_ms = 1000;
}

static void the_budget_stops_retries_when_spent(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(tiny_budget);
    rs_http_result_t res;

    control(f, "fail=100");
    assert_int_equal(deliver(f, cl, f->a.url, 10000, true, &res), SVC_EUNAVAIL);
    assert_int_equal(res.attempts, 2); /* the one retry the budget had */
    assert_int_equal(res.reason, RS_REASON_BUDGET_EXHAUSTED);
    assert_int_equal(deliver(f, cl, f->a.url, 10000, true, &res), SVC_EUNAVAIL);
    assert_int_equal(res.attempts, 1);
    assert_int_equal(res.reason, RS_REASON_BUDGET_EXHAUSTED);
    rs_http_client_free(cl);
}

static void quick_breaker(rs_http_opts_t *o)
{
    o->upstream.breaker.failures = 2;
    o->upstream.breaker.cooldown_ms = 60000;
    o->upstream.policy.max_attempts = 1;
}

static void the_breaker_opens_per_host(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(quick_breaker);
    char dead[64], *page;
    rs_http_result_t res;
    size_t len;

    snprintf(dead, sizeof dead, "http://127.0.0.1:%d/hooks", spawn_free_port());
    for (int i = 0; i < 2; i++) {
        assert_int_equal(deliver(f, cl, dead, 5000, true, &res), SVC_EUNAVAIL);
        assert_int_equal(res.attempts, 1);
    }
    assert_int_equal(rs_http_client_breaker_state(cl, dead), RS_BREAKER_OPEN);
    assert_int_equal(deliver(f, cl, dead, 5000, true, &res), SVC_EUNAVAIL);
    assert_int_equal(res.reason, RS_REASON_BREAKER_OPEN);
    assert_int_equal(res.attempts, 0);
    assert_string_equal(res.message, "circuit open");
    assert_true(res.retry_after_ms > 0);

    /* another destination has a breaker of its own */
    assert_int_equal(deliver(f, cl, f->a.url, 5000, true, &res), SVC_OK);
    assert_int_equal(rs_http_client_breaker_state(cl, f->a.url), RS_BREAKER_CLOSED);

    assert_int_equal(rs_http_client_metrics(cl, NULL, 0, &len), SVC_ERANGE);
    page = malloc(len + 1);
    assert_non_null(page);
    assert_int_equal(rs_http_client_metrics(cl, page, len + 1, &len), SVC_OK);
    assert_non_null(strstr(page, "breaker_state{upstream=\"test-http-127.0.0.1-"));
    assert_non_null(strstr(page, "method=\"POST-keyed\",result=\"breaker-open\"} 1\n"));
    free(page);
    rs_http_client_free(cl);
}

static void connection_refused_is_retried(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(NULL);
    char dead[64];
    rs_http_result_t res;

    snprintf(dead, sizeof dead, "http://127.0.0.1:%d/hooks", spawn_free_port());
    assert_int_equal(deliver(f, cl, dead, 10000, true, &res), SVC_EUNAVAIL);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.attempts, 3);
    assert_int_equal(res.reason, RS_REASON_ATTEMPTS_EXHAUSTED);
    rs_http_client_free(cl);
}

static void patient(rs_http_opts_t *o)
{
    o->upstream.policy.max_attempts = 10;
    o->upstream.policy.backoff_base_ms = 200;
    o->upstream.policy.backoff_cap_ms = 400;
    o->upstream.policy.jitter = RS_JITTER_EQUAL;
}

/* The sink goes away (refusing connections) and comes back: the retries
 * get through once it listens again. */
static void a_sink_that_went_away_is_reached_when_back(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(patient);
    rs_http_result_t res;

    control(f, "away=1");
    assert_int_equal(deliver(f, cl, f->a.url, 15000, true, &res), SVC_OK);
    assert_true(res.attempts >= 2);
    assert_int_equal(res.reason, RS_REASON_RETRIED);
    rs_http_client_free(cl);
}

static void one_in_flight(rs_http_opts_t *o)
{
    o->max_in_flight = 1;
}

static void count_done(void *arg, rs_http_result_t *res)
{
    int *n = arg;

    assert_int_equal(res->err, SVC_ECANCELLED);
    assert_int_equal(res->reason, RS_REASON_CANCELLED);
    (*n)++;
}

/* max_in_flight is a hard bound, and freeing the client answers what it
 * still holds. */
static void in_flight_is_bounded_and_free_cancels(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(one_in_flight);
    rs_http_request_t r = {.method = "GET", .url = f->a.url, .deadline_ns = hit_in_ms(60000)};
    rs_http_result_t res;
    int done = 0;

    control(f, "hang=1");
    r.method = "POST";
    assert_int_equal(rs_http_submit(cl, &r, count_done, &done, &res), SVC_OK);
    assert_int_equal(rs_http_submit(cl, &r, count_done, &done, &res), SVC_EEXHAUSTED);
    assert_int_equal(res.reason, RS_REASON_BULKHEAD_FULL);
    r.url = "ftp://127.0.0.1/x";
    assert_int_equal(rs_http_submit(cl, &r, count_done, &done, &res), SVC_EINVAL);
    rs_http_client_free(cl);
    assert_int_equal(done, 1);
}

#define T(f) cmocka_unit_test_setup(f, reset)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(attempt_timeout_fires_and_is_retried),
        T(status_500_is_retried_400_is_not),
        T(retry_after_is_waited_out),
        T(retry_after_beyond_the_deadline_gives_up_at_once),
        T(the_budget_stops_retries_when_spent),
        T(the_breaker_opens_per_host),
        T(connection_refused_is_retried),
        T(a_sink_that_went_away_is_reached_when_back),
        T(in_flight_is_bounded_and_free_cancels),
    };

    return svc_test_run_group_tests_name("rs_http", tests, group_setup, group_teardown);
}
