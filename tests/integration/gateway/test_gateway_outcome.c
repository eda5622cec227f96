/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_outcome.c - the message of a call whose outcome the gateway
 * cannot know, against a fake order upstream that resets the connection
 * once the call has been sent (or holds it): a CreateOrder that may have
 * been placed says so and how to retry safely; an idempotent call that was
 * retried, or a call that was never sent, says nothing more. (Split from
 * test_gateway_edge.c.)
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gw_it.h"

/* Speaks just enough HTTP/2 for a gRPC client to send its call, then resets
 * the connection (an order service that died after receiving the call), or
 * with hold set keeps it without answering (one that hangs). */
typedef struct fake_up {
    int lfd, port;
    pthread_t tid;
    atomic_bool stop, hold;
    atomic_int calls; /* requests received whole (END_STREAM) */
} fake_up_t;

typedef struct outcome {
    gw_it_t *t;
    fake_up_t fake;
    char addr[64];
    const char *env[5]; /* the gateway's, for a restart */
} outcome_t;

/* Handles the frames in buf[*off..n); true once a call has arrived whole. */
static bool fake_frames(fake_up_t *f, int fd, const unsigned char *buf, size_t n, size_t *off)
{
    static const unsigned char ack[9] = {0, 0, 0, 4, 1, 0, 0, 0, 0};

    while (n >= *off + 9) {
        const unsigned char *fr = buf + *off;
        size_t len = (size_t)fr[0] << 16 | (size_t)fr[1] << 8 | fr[2];

        if (n < *off + 9 + len)
            break;
        if (fr[3] == 4 && (fr[4] & 1) == 0) /* SETTINGS: acknowledge */
            send(fd, ack, sizeof ack, MSG_NOSIGNAL);
        *off += 9 + len;
        if ((fr[3] == 0 || fr[3] == 1) && (fr[4] & 1) != 0) { /* DATA/HEADERS, END_STREAM */
            atomic_fetch_add(&f->calls, 1);
            return true;
        }
    }
    return false;
}

static void fake_serve(fake_up_t *f, int fd)
{
    static const unsigned char settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    static unsigned char buf[65536];
    struct linger reset = {1, 0};
    size_t n = 0, off = 24; /* after the client preface */
    uint64_t until = it_now_ms() + (uint64_t)it_ms(5000);

    send(fd, settings, sizeof settings, MSG_NOSIGNAL);
    while (!atomic_load(&f->stop) && it_now_ms() < until && n < sizeof buf) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t r;

        if (poll(&p, 1, 50) <= 0)
            continue;
        r = recv(fd, buf + n, sizeof buf - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (fake_frames(f, fd, buf, n, &off) && !atomic_load(&f->hold))
            break;
    }
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    close(fd);
}

static void *fake_main(void *arg)
{
    fake_up_t *f = arg;

    while (!atomic_load(&f->stop)) {
        struct pollfd p = {f->lfd, POLLIN, 0};
        int fd;

        if (poll(&p, 1, 50) <= 0)
            continue;
        fd = accept(f->lfd, NULL, NULL);
        if (fd >= 0)
            fake_serve(f, fd);
    }
    return NULL;
}

static int fake_start(fake_up_t *f)
{
    struct sockaddr_in a;
    socklen_t sl = sizeof a;

    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* CLOEXEC: the processes the fixture starts next must not inherit the
     * listener, or it would outlive fake_stop (and hang connects). */
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    atomic_init(&f->stop, false);
    atomic_init(&f->hold, false);
    atomic_init(&f->calls, 0);
    if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(f->lfd, 16) != 0 || getsockname(f->lfd, (struct sockaddr *)&a, &sl) != 0)
        return -1;
    f->port = ntohs(a.sin_port);
    return pthread_create(&f->tid, NULL, fake_main, f) == 0 ? 0 : -1;
}

/* Stops the thread and closes the listener: nothing listens any more. A
 * connection still in the backlog is reset first, so that no gRPC client
 * waits on it for a server that will never speak. */
static void fake_stop(fake_up_t *f)
{
    struct linger reset = {1, 0};
    int fd;

    if (f->lfd < 0)
        return;
    atomic_store(&f->stop, true);
    pthread_join(f->tid, NULL);
    fcntl(f->lfd, F_SETFL, O_NONBLOCK);
    while ((fd = accept(f->lfd, NULL, NULL)) >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        close(fd);
    }
    close(f->lfd);
    f->lfd = -1;
}

static int outcome_setup(void **state)
{
    outcome_t *o = calloc(1, sizeof *o);
    void *t = NULL;

    *state = o;
    if (o == NULL || fake_start(&o->fake) != 0)
        return -1;
    snprintf(o->addr, sizeof o->addr, "GATEWAY_ORDER_ADDR=127.0.0.1:%d", o->fake.port);
    o->env[0] = o->addr;
    o->env[1] = "GATEWAY_BREAKER_FAILURES=0";
    o->env[2] = "GATEWAY_DRAIN_MS=300";
    /* One loop, so one connection to the fake, which serves one at a time
     * (a connection per loop: rs_grpc_opts_t.channels). */
    o->env[3] = "GATEWAY_THREADS=1";
    o->env[4] = NULL;
    if (gw_it_setup_env(&t, false, o->env) != 0)
        return -1;
    o->t = t;
    return 0;
}

static int outcome_teardown(void **state)
{
    outcome_t *o = *state;
    void *t;
    int rc;

    if (o == NULL)
        return 0;
    fake_stop(&o->fake);
    t = o->t;
    rc = t != NULL ? gw_it_teardown(&t) : 0;
    free(o);
    return rc;
}

#define UNKNOWN_NOTE "; the order may have been placed: retry with the same Idempotency-Key"

static bool ends_with_note(const char *body)
{
    char msg[SVC_ERRBUF_LEN * 2];
    size_t n;

    if (!gw_json_str(body, "message", msg, sizeof msg))
        return false;
    n = strlen(msg);
    return n > strlen(UNKNOWN_NOTE) && strcmp(msg + n - strlen(UNKNOWN_NOTE), UNKNOWN_NOTE) == 0;
}

static const char order_body[] =
    "{\"customer_id\":\"c1\",\"items\":[{\"product_id\":\"00000000-0000-4000-8000-000000000001\","
    "\"quantity\":1}]}";

static void create_order_reset_after_it_was_sent_may_have_been_placed(void **state)
{
    outcome_t *o = *state;
    CURL *h = curl_easy_init();
    const char *key[] = {"Idempotency-Key: edge-unknown-1", NULL};
    gw_res_t r;

    assert_non_null(h);
    gw_call(h, o->t, "POST", "/v1/orders", order_body, key, &r);
    gw_assert_error(&r, 503, 14, UNKNOWN_NOTE);
    if (!ends_with_note(r.body))
        fail_msg("the note is not at the end: %s", r.body);
    gw_res_free(&r);
    /* sent exactly once: a non-idempotent call is never retried */
    assert_int_equal(atomic_load(&o->fake.calls), 1);
    curl_easy_cleanup(h);
}

static void idempotent_get_reset_says_nothing_more(void **state)
{
    outcome_t *o = *state;
    CURL *h = curl_easy_init();
    int before = atomic_load(&o->fake.calls);
    gw_res_t r;

    assert_non_null(h);
    gw_call(h, o->t, "GET", "/v1/orders/00000000-0000-4000-8000-000000000001", NULL, NULL, &r);
    gw_assert_error(&r, 503, 14, "");
    assert_null(strstr(r.body, "may have been"));
    gw_res_free(&r);
    assert_true(atomic_load(&o->fake.calls) - before >= 2); /* retried */
    curl_easy_cleanup(h);
}

typedef struct bg_post {
    const gw_it_t *t;
    gw_res_t r;
} bg_post_t;

static void *post_in_background(void *arg)
{
    bg_post_t *b = arg;
    CURL *h = curl_easy_init();

    if (h != NULL)
        gw_call(h, b->t, "POST", "/v1/orders", order_body, NULL, &b->r);
    curl_easy_cleanup(h);
    return NULL;
}

/* The drain cancels a CreateOrder the service has received: unknown too. */
static void create_order_cancelled_by_the_drain_may_have_been_placed(void **state)
{
    outcome_t *o = *state;
    int before = atomic_load(&o->fake.calls);
    uint64_t until = it_now_ms() + (uint64_t)it_ms(5000);
    char errbuf[SVC_ERRBUF_LEN] = "";
    bg_post_t b;
    pthread_t tid;

    memset(&b, 0, sizeof b);
    b.t = o->t;
    atomic_store(&o->fake.hold, true);
    assert_int_equal(pthread_create(&tid, NULL, post_in_background, &b), 0);
    while (atomic_load(&o->fake.calls) == before && it_now_ms() < until)
        usleep(10 * 1000);
    assert_int_equal(atomic_load(&o->fake.calls), before + 1);
    spawn_signal(o->t->gw, SIGTERM);
    pthread_join(tid, NULL);
    atomic_store(&o->fake.hold, false);
    gw_assert_error(&b.r, 503, 14, "the gateway is shutting down" UNKNOWN_NOTE);
    gw_res_free(&b.r);
    assert_int_equal(gw_it_gateway_stop(o->t), 0); /* exit 0 after the drain */
    assert_int_equal(gw_it_gateway_start(o->t, o->env, errbuf), SVC_OK);
}

static void create_order_never_sent_says_nothing_more(void **state)
{
    outcome_t *o = *state;
    CURL *h = curl_easy_init();
    int before;
    gw_res_t r;

    assert_non_null(h);
    fake_stop(&o->fake);
    before = atomic_load(&o->fake.calls);
    /* Once the channel has failed to connect, a call fails at once, unsent
     * (until then one may wait for a connection and time out: "may"). */
    for (uint64_t until = it_now_ms() + (uint64_t)it_ms(5000); it_now_ms() < until;) {
        gw_admin_get(h, o->t, "/readyz", &r);
        if (strstr(r.body, "\"name\":\"order\"") != NULL &&
            strstr(strstr(r.body, "\"name\":\"order\""), "transient-failure") != NULL) {
            gw_res_free(&r);
            break;
        }
        gw_res_free(&r);
        usleep(50 * 1000);
    }
    gw_call(h, o->t, "POST", "/v1/orders", order_body, NULL, &r);
    gw_assert_error(&r, 503, 14, "");
    assert_null(strstr(r.body, "may have been"));
    gw_res_free(&r);
    assert_int_equal(atomic_load(&o->fake.calls), before);
    curl_easy_cleanup(h);
}

int main(void)
{
    const struct CMUnitTest outcome[] = {
        cmocka_unit_test(create_order_reset_after_it_was_sent_may_have_been_placed),
        cmocka_unit_test(idempotent_get_reset_says_nothing_more),
        cmocka_unit_test(create_order_cancelled_by_the_drain_may_have_been_placed),
        cmocka_unit_test(create_order_never_sent_says_nothing_more),
    };
    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = svc_test_run_group_tests_name("gateway_outcome", outcome, outcome_setup, outcome_teardown);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
