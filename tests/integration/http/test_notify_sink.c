/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_notify_sink.c - the notify-sink as a real process on a free port,
 * driven through pkg/resilience's HTTP binding (an end-to-end test of
 * both): a signed delivery is accepted and logged, a bad signature is 401
 * and not recorded, a repeated Idempotency-Key is recorded once, and each
 * misbehaviour is seen from the client: 500 x3 then delivered on the 4th
 * attempt, 429 Retry-After: 2 waited out, a hang cut by the attempt
 * timeout, a 2 s absence (connections refused) outlasted; SIGTERM exits 0.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "http_it.h"
#include "support/group.h"
#include "support/spawn.h"
#include "webhook/webhook.h"

#define SECRET "whsec_dGVzdC1ub3RpZnktc2luay1zZWNyZXQtMzItYnl0ZXM="

typedef struct fixture {
    spawn_proc_t *sink;
    int port;
    char url[80], control[80], received[80];
    rs_http_client_t *ctl;
    whk_key_t key;
    unsigned seq;
} fixture_t;

static uint32_t timeouts(uint32_t ms)
{
    const char *m = getenv("SVC_TEST_TIMEOUT_MULTIPLIER");

    return ms * (m != NULL && atoi(m) > 0 ? (uint32_t)atoi(m) : 1u);
}

static rs_http_client_t *client_new(uint32_t max_attempts, uint32_t attempt_timeout_ms)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    rs_http_client_t *cl = NULL;
    rs_http_opts_t o;

    rs_http_opts_init(&o);
    o.name = "sink-it";
    o.upstream.policy.max_attempts = max_attempts;
    o.upstream.policy.attempt_timeout_ms = attempt_timeout_ms;
    o.upstream.policy.backoff_base_ms = 200;
    o.upstream.policy.backoff_cap_ms = 400;
    o.upstream.policy.jitter = RS_JITTER_EQUAL;
    if (rs_http_client_new(&o, &cl, errbuf) != SVC_OK)
        fail_msg("rs_http_client_new: %s", errbuf);
    return cl;
}

static void control(fixture_t *f, const char *query)
{
    hit_control(f->ctl, f->control, query);
}

/* GET /received, as text. Owned by caller. */
static char *received(fixture_t *f)
{
    rs_http_request_t r = {
        .method = "GET", .url = f->received, .deadline_ns = hit_in_ms(5000), .want_body = true};
    rs_http_result_t res;

    assert_int_equal(rs_http_do(f->ctl, &r, &res), SVC_OK);
    assert_non_null(res.body);
    return res.body;
}

static bool received_has(fixture_t *f, const char *needle)
{
    char *page = received(f);
    bool has = strstr(page, needle) != NULL;

    if (!has)
        print_message("GET /received: %s\n", page);
    free(page);
    return has;
}

/* A signed, keyed delivery with id (NULL: a fresh one); the body is kept. */
static svc_err_t deliver(fixture_t *f, rs_http_client_t *cl, const whk_key_t *key,
                         const char *id_in, rs_http_result_t *res)
{
    char id[64];

    if (id_in != NULL)
        snprintf(id, sizeof id, "%s", id_in);
    else
        snprintf(id, sizeof id, "evt-it-%u-%u", (unsigned)getpid(), ++f->seq);
    return hit_deliver(cl, key, f->url, id, 20000, true, true, res);
}

/* A delivery with the webhook headers given as they are, signed with key
 * over "<id>.<ts>.<body>" by hand (so that ids pkg/webhook refuses to sign
 * can be sent too); idem NULL: no Idempotency-Key. */
static svc_err_t post_signed(rs_http_client_t *cl, const char *url, const whk_key_t *key,
                             const char *id, int64_t ts, const char *idem, rs_http_result_t *res)
{
    static const char body[] = "{\"type\":\"OrderConfirmed\",\"order\":\"o-2\"}";
    char h_id[300], h_ts[64], h_sig[128], h_idem[300], msg[512];
    unsigned char mac[EVP_MAX_MD_SIZE], b64[64];
    unsigned mac_len = 0;
    const char *headers[4] = {h_id, h_ts, h_sig, h_idem};
    rs_http_request_t r = {.method = "POST",
                           .url = url,
                           .body = body,
                           .body_len = strlen(body),
                           .headers = headers,
                           .n_headers = idem != NULL ? 4 : 3,
                           .deadline_ns = hit_in_ms(10000),
                           .want_body = true};
    int n = snprintf(msg, sizeof msg, "%s.%lld.%s", id, (long long)ts, body);

    assert_non_null(HMAC(EVP_sha256(), key->bytes, (int)key->len, (const unsigned char *)msg,
                         (size_t)n, mac, &mac_len));
    EVP_EncodeBlock(b64, mac, (int)mac_len);
    snprintf(h_id, sizeof h_id, "webhook-id: %s", id);
    snprintf(h_ts, sizeof h_ts, "webhook-timestamp: %lld", (long long)ts);
    snprintf(h_sig, sizeof h_sig, "webhook-signature: v1,%s", (const char *)b64);
    snprintf(h_idem, sizeof h_idem, "Idempotency-Key: %s", idem != NULL ? idem : "");
    return rs_http_do(cl, &r, res);
}

/* ---- fixture: one sink process for the group ------------------------------------------ */

static int group_setup(void **state)
{
    static fixture_t fx;
    char listen[64], errbuf[SVC_ERRBUF_LEN] = "";
    const char *env[4] = {listen, "NOTIFY_WEBHOOK_SECRET=" SECRET, "NOTIFY_SINK_LOG_LEVEL=info",
                          NULL};
    spawn_opts_t so;

    fx.port = spawn_free_port();
    snprintf(listen, sizeof listen, "NOTIFY_SINK_LISTEN=127.0.0.1:%d", fx.port);
    snprintf(fx.url, sizeof fx.url, "http://127.0.0.1:%d/webhooks", fx.port);
    snprintf(fx.control, sizeof fx.control, "http://127.0.0.1:%d/control", fx.port);
    snprintf(fx.received, sizeof fx.received, "http://127.0.0.1:%d/received", fx.port);
    spawn_opts_init(&so);
    so.path = getenv("NOTIFY_SINK_BIN");
    so.env = env;
    if (so.path == NULL || spawn_start(&so, &fx.sink, errbuf) != SVC_OK ||
        spawn_wait_port(fx.sink, "127.0.0.1", fx.port, (int)timeouts(10000), errbuf) != SVC_OK) {
        fprintf(stderr, "notify-sink: %s\n", errbuf);
        return -1;
    }
    if (whk_key_parse(SECRET, &fx.key, errbuf) != SVC_OK)
        return -1;
    fx.ctl = client_new(1, 5000);
    *state = &fx;
    return 0;
}

static int group_teardown(void **state)
{
    fixture_t *f = *state;
    int ws = -1;
    svc_err_t err;

    rs_http_client_free(f->ctl);
    spawn_signal(f->sink, SIGTERM);
    err = spawn_wait_exit(f->sink, (int)timeouts(10000), &ws);
    if (err != SVC_OK || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "notify-sink did not exit 0 on SIGTERM\n");
        spawn_log_dump(f->sink, 30);
        spawn_free(f->sink);
        return -1;
    }
    spawn_free(f->sink);
    return 0;
}

static int reset(void **state)
{
    control(*state, "reset=1");
    return 0;
}

/* ---- verification and dedupe ---------------------------------------------------------------- */

static void a_signed_delivery_is_accepted_and_logged(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(1, 5000);
    rs_http_result_t res;

    assert_int_equal(deliver(f, cl, &f->key, "evt-accepted-1", &res), SVC_OK);
    assert_int_equal(res.status, 200);
    assert_non_null(strstr(res.body, "\"duplicate\":false"));
    rs_http_result_dispose(&res);
    assert_true(received_has(f, "\"count\":1,"));
    assert_true(received_has(f, "\"id\":\"evt-accepted-1\""));
    assert_int_equal(spawn_log_wait(f->sink,
                                    "event_id=evt-accepted-1 idempotency_key=evt-accepted-1 "
                                    "verdict=accepted duplicate=false status=200",
                                    (int)timeouts(5000)),
                     SVC_OK);
    rs_http_client_free(cl);
}

static void a_bad_signature_is_401_and_not_recorded(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(1, 5000);
    rs_http_result_t res;
    whk_key_t wrong;

    assert_int_equal(
        whk_key_parse("whsec_d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldA==", &wrong, SVC_ERRBUF_SCRATCH),
        SVC_OK);
    assert_int_equal(deliver(f, cl, &wrong, "evt-forged-1", &res), SVC_EUNAUTH);
    assert_int_equal(res.status, 401);
    assert_int_equal(res.attempts, 1);
    assert_non_null(strstr(res.body, "bad-signature"));
    rs_http_result_dispose(&res);
    assert_true(received_has(f, "\"count\":0,"));
    assert_int_equal(spawn_log_wait(f->sink,
                                    "event_id=evt-forged-1 idempotency_key=evt-forged-1 "
                                    "verdict=bad-signature",
                                    (int)timeouts(5000)),
                     SVC_OK);
    rs_http_client_free(cl);
}

static void a_repeated_idempotency_key_is_recorded_once(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(1, 5000);
    rs_http_result_t res;

    for (int i = 0; i < 3; i++) {
        assert_int_equal(deliver(f, cl, &f->key, "evt-dup-1", &res), SVC_OK);
        assert_non_null(strstr(res.body, i == 0 ? "\"duplicate\":false" : "\"duplicate\":true"));
        rs_http_result_dispose(&res);
    }
    assert_true(received_has(f, "\"count\":1,\"duplicates\":2,"));
    assert_true(received_has(f, "\"times\":3}"));
    assert_int_equal(spawn_log_wait(f->sink,
                                    "event_id=evt-dup-1 idempotency_key=evt-dup-1 "
                                    "verdict=duplicate duplicate=true",
                                    (int)timeouts(5000)),
                     SVC_OK);
    rs_http_client_free(cl);
}

/* The signed webhook-id is the dedupe key: a captured delivery replayed
 * within the tolerance with another (unsigned) Idempotency-Key is a
 * duplicate, not a second event. */
static void a_replay_with_a_new_idempotency_key_is_a_duplicate(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(1, 5000);
    rs_http_result_t res;
    int64_t ts = (int64_t)time(NULL);

    assert_int_equal(post_signed(cl, f->url, &f->key, "evt-replay-1", ts, "key-a", &res), SVC_OK);
    assert_non_null(strstr(res.body, "\"duplicate\":false"));
    rs_http_result_dispose(&res);
    assert_int_equal(post_signed(cl, f->url, &f->key, "evt-replay-1", ts, "key-b", &res), SVC_OK);
    assert_non_null(strstr(res.body, "\"duplicate\":true"));
    rs_http_result_dispose(&res);
    assert_int_equal(post_signed(cl, f->url, &f->key, "evt-replay-1", ts, NULL, &res), SVC_OK);
    assert_non_null(strstr(res.body, "\"duplicate\":true"));
    rs_http_result_dispose(&res);
    assert_true(received_has(f, "\"count\":1,\"duplicates\":2,"));
    rs_http_client_free(cl);
}

/* The spec: a webhook-id must not hold a '.', the separator of the signed
 * content ("<id>.<timestamp>.<body>"). Refused even when the signature
 * matches. */
static void an_id_with_a_dot_is_refused(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(1, 5000);
    rs_http_result_t res;

    assert_int_not_equal(
        post_signed(cl, f->url, &f->key, "evt.dot.1", (int64_t)time(NULL), "evt-dot-1", &res),
        SVC_OK);
    assert_int_equal(res.status, 400);
    assert_non_null(strstr(res.body, "bad-id"));
    rs_http_result_dispose(&res);
    assert_true(received_has(f, "\"count\":0,"));
    rs_http_client_free(cl);
}

/* A sink that holds 2 ids: a third new id within the tolerance is refused
 * (503, Retry-After) rather than forgetting one that could still be
 * replayed; the replay of the first is still a duplicate. */
static void ids_are_kept_for_the_tolerance(void **state)
{
    fixture_t *f = *state;
    char listen[64], url[80], errbuf[SVC_ERRBUF_LEN] = "";
    const char *env[] = {listen, "NOTIFY_WEBHOOK_SECRET=" SECRET, "NOTIFY_SINK_MAX_RECORDS=2",
                         NULL};
    rs_http_client_t *cl = client_new(1, 5000);
    spawn_proc_t *p = NULL;
    rs_http_result_t res;
    int64_t ts = (int64_t)time(NULL);
    int port = spawn_free_port(), ws = -1;
    spawn_opts_t so;

    snprintf(listen, sizeof listen, "NOTIFY_SINK_LISTEN=127.0.0.1:%d", port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/webhooks", port);
    spawn_opts_init(&so);
    so.path = getenv("NOTIFY_SINK_BIN");
    so.env = env;
    assert_int_equal(spawn_start(&so, &p, errbuf), SVC_OK);
    assert_int_equal(spawn_wait_port(p, "127.0.0.1", port, (int)timeouts(10000), errbuf), SVC_OK);
    for (int i = 1; i <= 2; i++) {
        char id[32];

        snprintf(id, sizeof id, "evt-keep-%d", i);
        assert_int_equal(post_signed(cl, url, &f->key, id, ts, id, &res), SVC_OK);
        rs_http_result_dispose(&res);
    }
    assert_int_not_equal(post_signed(cl, url, &f->key, "evt-keep-3", ts, "evt-keep-3", &res),
                         SVC_OK);
    assert_int_equal(res.status, 503);
    rs_http_result_dispose(&res);
    assert_int_equal(post_signed(cl, url, &f->key, "evt-keep-1", ts, "evt-keep-1", &res), SVC_OK);
    assert_non_null(strstr(res.body, "\"duplicate\":true"));
    rs_http_result_dispose(&res);
    spawn_signal(p, SIGTERM);
    assert_int_equal(spawn_wait_exit(p, (int)timeouts(10000), &ws), SVC_OK);
    spawn_free(p);
    rs_http_client_free(cl);
}

/* A rotation on the receiving side, configured through a file: a sink that
 * holds "<new> <old>" in NOTIFY_WEBHOOK_SECRET_FILE accepts a delivery
 * signed with either and refuses one signed with neither. */
#define OTHER_SECRET "whsec_cm90YXRpb24tbmV3LWtleS1mb3ItdGhlLXNpbmstaXQ="

static void a_sink_with_two_secrets_accepts_either(void **state)
{
    fixture_t *f = *state;
    char listen[64], url[80], file_env[300], path[256], errbuf[SVC_ERRBUF_LEN] = "";
    const char *env[] = {listen, file_env, NULL};
    rs_http_client_t *cl = client_new(1, 5000);
    spawn_proc_t *p = NULL;
    rs_http_result_t res;
    whk_key_t other, wrong;
    int port = spawn_free_port(), ws = -1;
    spawn_opts_t so;
    FILE *fp;

    assert_int_equal(whk_key_parse(OTHER_SECRET, &other, errbuf), SVC_OK);
    assert_int_equal(
        whk_key_parse("whsec_d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldA==", &wrong, SVC_ERRBUF_SCRATCH),
        SVC_OK);
    snprintf(path, sizeof path, "%s/sink-secrets-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "%s\n%s\n", OTHER_SECRET, SECRET);
    fclose(fp);
    snprintf(file_env, sizeof file_env, "NOTIFY_WEBHOOK_SECRET_FILE=%s", path);
    snprintf(listen, sizeof listen, "NOTIFY_SINK_LISTEN=127.0.0.1:%d", port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/webhooks", port);
    spawn_opts_init(&so);
    so.path = getenv("NOTIFY_SINK_BIN");
    so.env = env;
    assert_int_equal(spawn_start(&so, &p, errbuf), SVC_OK);
    assert_int_equal(spawn_wait_port(p, "127.0.0.1", port, (int)timeouts(10000), errbuf), SVC_OK);
    assert_int_equal(hit_deliver(cl, &f->key, url, "evt-rot-old", 5000, true, true, &res), SVC_OK);
    rs_http_result_dispose(&res);
    assert_int_equal(hit_deliver(cl, &other, url, "evt-rot-new", 5000, true, true, &res), SVC_OK);
    rs_http_result_dispose(&res);
    assert_int_equal(hit_deliver(cl, &wrong, url, "evt-rot-wrong", 5000, true, true, &res),
                     SVC_EUNAUTH);
    rs_http_result_dispose(&res);
    spawn_signal(p, SIGTERM);
    assert_int_equal(spawn_wait_exit(p, (int)timeouts(10000), &ws), SVC_OK);
    spawn_free(p);
    unlink(path);
    rs_http_client_free(cl);
}

/* ---- misbehaviour, seen from the client ---------------------------------------------------- */

static void three_500s_then_delivered_on_the_4th_attempt(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(4, 5000);
    rs_http_result_t res;

    control(f, "fail=3");
    assert_int_equal(deliver(f, cl, &f->key, NULL, &res), SVC_OK);
    assert_int_equal(res.attempts, 4);
    assert_int_equal(res.reason, RS_REASON_RETRIED);
    rs_http_result_dispose(&res);
    assert_true(received_has(f, "\"count\":1,"));
    rs_http_client_free(cl);
}

static void retry_after_2_is_waited_out(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(3, 5000);
    rs_http_result_t res;
    uint64_t t0;

    control(f, "throttle=1&retry_after=2");
    t0 = svc_now_ns();
    assert_int_equal(deliver(f, cl, &f->key, NULL, &res), SVC_OK);
    assert_int_equal(res.attempts, 2);
    assert_true(hit_ms_since(t0) >= 2000);
    rs_http_result_dispose(&res);
    rs_http_client_free(cl);
}

static void a_hang_is_cut_by_the_attempt_timeout(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(3, 500);
    rs_http_result_t res;

    control(f, "hang=1");
    assert_int_equal(deliver(f, cl, &f->key, NULL, &res), SVC_OK);
    assert_int_equal(res.attempts, 2);
    rs_http_result_dispose(&res);
    assert_int_equal(spawn_log_wait(f->sink, "verdict=injected-hang", (int)timeouts(5000)), SVC_OK);
    rs_http_client_free(cl);
}

static void an_absent_sink_is_reached_when_back(void **state)
{
    fixture_t *f = *state;
    rs_http_client_t *cl = client_new(10, 5000);
    rs_http_result_t res;

    control(f, "away=2");
    /* The sink closes its listener after it has answered the control
     * request, on its next loop turn: wait for that (bounded) rather than
     * race it. */
    for (int i = 0; i < 200 && spawn_port_open("127.0.0.1", f->port); i++)
        usleep(5 * 1000);
    assert_false(spawn_port_open("127.0.0.1", f->port));
    assert_int_equal(deliver(f, cl, &f->key, NULL, &res), SVC_OK);
    assert_true(res.attempts >= 2);
    rs_http_result_dispose(&res);
    assert_int_equal(spawn_log_wait(f->sink, "listening again", (int)timeouts(5000)), SVC_OK);
    rs_http_client_free(cl);
}

static void help_lists_every_variable(void **state)
{
    const char *argv[] = {getenv("NOTIFY_SINK_BIN"), "--help", NULL};
    spawn_opts_t so;
    spawn_proc_t *p = NULL;
    int ws = -1;

    (void)state;
    spawn_opts_init(&so);
    so.path = argv[0];
    so.argv = argv;
    assert_int_equal(spawn_start(&so, &p, SVC_ERRBUF_SCRATCH), SVC_OK);
    assert_int_equal(spawn_wait_exit(p, (int)timeouts(5000), &ws), SVC_OK);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    assert_true(spawn_log_contains(p, "NOTIFY_WEBHOOK_SECRET"));
    assert_true(spawn_log_contains(p, "NOTIFY_SINK_LISTEN"));
    spawn_free(p);
}

/* The sink's start with env; its exit status (it must not start: 2 s). */
static int start_fails(const char *const *env, const char *needle)
{
    spawn_opts_t so;
    spawn_proc_t *p = NULL;
    int ws = -1;

    spawn_opts_init(&so);
    so.path = getenv("NOTIFY_SINK_BIN");
    so.env = env;
    assert_int_equal(spawn_start(&so, &p, SVC_ERRBUF_SCRATCH), SVC_OK);
    if (spawn_wait_exit(p, (int)timeouts(2000), &ws) != SVC_OK) {
        spawn_signal(p, SIGKILL);
        (void)spawn_wait_exit(p, (int)timeouts(5000), &ws);
        spawn_free(p);
        fail_msg("notify-sink started with %s", env[1]);
    }
    if (!spawn_log_contains(p, needle)) {
        spawn_log_dump(p, 10);
        fail_msg("notify-sink's error does not say \"%s\"", needle);
    }
    spawn_free(p);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

/* No secret, the old development secret, the old k8s placeholder, a key of
 * 23 bytes: each a start-up error naming the variable. */
static void refuses_to_start_without_a_real_secret(void **state)
{
    char listen[64];
    const char *none[] = {listen, "NOTIFY_WEBHOOK_SECRET=", NULL};
    const char *dev[] = {listen, "NOTIFY_WEBHOOK_SECRET=whsec_c2hvcG1pY3JvLWxvY2FsLWRldi1zZWNyZXQh",
                         NULL};
    const char *k8s[] = {
        listen, "NOTIFY_WEBHOOK_SECRET=whsec_Q0hBTkdFLU1FLW5vdC1hLXJlYWwtc2lnbmluZy1rZXk=", NULL};
    const char *short_key[] = {
        listen, "NOTIFY_WEBHOOK_SECRET=whsec_dGVzdC1ub3RpZnktc2luay1zZWNyZXQ=", NULL};
    const char *missing_file[] = {listen, "NOTIFY_WEBHOOK_SECRET_FILE=/nonexistent/secret", NULL};

    (void)state;
    snprintf(listen, sizeof listen, "NOTIFY_SINK_LISTEN=127.0.0.1:%d", spawn_free_port());
    assert_int_not_equal(start_fails(none, "NOTIFY_WEBHOOK_SECRET"), 0);
    assert_int_not_equal(start_fails(dev, "public development or placeholder"), 0);
    assert_int_not_equal(start_fails(k8s, "public development or placeholder"), 0);
    assert_int_not_equal(start_fails(short_key, "at least 24"), 0);
    assert_int_not_equal(start_fails(missing_file, "NOTIFY_WEBHOOK_SECRET_FILE"), 0);
}

#define T(f) cmocka_unit_test_setup(f, reset)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(a_signed_delivery_is_accepted_and_logged),
        T(a_bad_signature_is_401_and_not_recorded),
        T(a_repeated_idempotency_key_is_recorded_once),
        T(a_replay_with_a_new_idempotency_key_is_a_duplicate),
        T(an_id_with_a_dot_is_refused),
        T(ids_are_kept_for_the_tolerance),
        T(a_sink_with_two_secrets_accepts_either),
        T(three_500s_then_delivered_on_the_4th_attempt),
        T(retry_after_2_is_waited_out),
        T(a_hang_is_cut_by_the_attempt_timeout),
        T(an_absent_sink_is_reached_when_back),
        T(help_lists_every_variable),
        T(refuses_to_start_without_a_real_secret),
    };

    return svc_test_run_group_tests(tests, group_setup, group_teardown);
}
