/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pkg/resilience is the one retry layer: gRPC's own is off in pkg/rpc's
 * channels. The server here is a few lines of HTTP/2 on loopback that
 * answers each connection's first stream with a GOAWAY saying it processed
 * no stream, so the call was not seen by the server: the case gRPC's retry
 * layer repeats on its own, on a new connection ("transparent retry";
 * REFUSED_STREAM is not one in gRPC 1.51). With it off, each call reaches
 * the server once and ends UNAVAILABLE, so whether it is repeated is decided
 * by pkg/resilience alone (the method's idempotency, the retry budget).
 * With it on, the server sees every call twice.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/group.h"
#include "support/listen.h"

#include "grpc/health/v1/health.pb-c.h"
#include "rpc/rpc.h"

#define FRAME_HEADERS  0x1
#define FRAME_SETTINGS 0x4
#define FRAME_PING     0x6
#define FRAME_GOAWAY   0x7
#define FLAG_ACK       0x1
#define PREFACE_LEN    24 /* "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" */
#define CALLS          3

typedef struct refuser {
    int listener;
    int port;
    atomic_int streams; /* HEADERS frames seen: one per stream opened */
    atomic_bool stop;
    pthread_t thread;
} refuser_t;

static bool read_full(int fd, unsigned char *buf, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, buf, n);
        if (r <= 0)
            return false;
        buf += r;
        n -= (size_t)r;
    }
    return true;
}

static void send_frame(int fd, int type, int flags, uint32_t stream, const void *payload,
                       size_t len)
{
    unsigned char f[9 + 8];

    assert_true(len <= 8);
    f[0] = (unsigned char)(len >> 16);
    f[1] = (unsigned char)(len >> 8);
    f[2] = (unsigned char)len;
    f[3] = (unsigned char)type;
    f[4] = (unsigned char)flags;
    f[5] = (unsigned char)(stream >> 24 & 0x7f);
    f[6] = (unsigned char)(stream >> 16);
    f[7] = (unsigned char)(stream >> 8);
    f[8] = (unsigned char)stream;
    if (len > 0)
        memcpy(f + 9, payload, len);
    (void)!write(fd, f, 9 + len);
}

/* One connection: the server's SETTINGS, then every client frame read
 * until the client closes; SETTINGS and PING answered, the first stream
 * answered with GOAWAY (last stream id 0, NO_ERROR) and the end of the
 * server's side, as a server that is going away does. */
static void serve(refuser_t *s, int fd)
{
    static const unsigned char none_processed[8] = {0};
    unsigned char preface[PREFACE_LEN], h[9], payload[1 << 14];

    send_frame(fd, FRAME_SETTINGS, 0, 0, NULL, 0);
    if (!read_full(fd, preface, sizeof preface))
        return;
    while (read_full(fd, h, sizeof h)) {
        size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
        if (len > sizeof payload || !read_full(fd, payload, len))
            return;
        if (h[3] == FRAME_HEADERS) {
            atomic_fetch_add(&s->streams, 1);
            send_frame(fd, FRAME_GOAWAY, 0, 0, none_processed, sizeof none_processed);
            shutdown(fd, SHUT_WR); /* and gone: the client closes its side */
        } else if (h[3] == FRAME_SETTINGS && !(h[4] & FLAG_ACK)) {
            send_frame(fd, FRAME_SETTINGS, FLAG_ACK, 0, NULL, 0);
        } else if (h[3] == FRAME_PING && !(h[4] & FLAG_ACK) && len == 8) {
            send_frame(fd, FRAME_PING, FLAG_ACK, 0, payload, len);
        }
    }
}

static void *refuser_main(void *arg)
{
    refuser_t *s = arg;

    while (!atomic_load(&s->stop)) {
        struct pollfd p = {.fd = s->listener, .events = POLLIN};
        int fd;
        if (poll(&p, 1, 50) <= 0 || (fd = accept(s->listener, NULL, NULL)) < 0)
            continue;
        serve(s, fd);
        close(fd);
    }
    return NULL;
}

static int setup(void **state)
{
    static refuser_t s;

    memset(&s, 0, sizeof s);
    s.listener = svc_test_listen_loopback(&s.port);
    assert_true(s.listener >= 0);
    assert_int_equal(pthread_create(&s.thread, NULL, refuser_main, &s), 0);
    rpc_init();
    *state = &s;
    return 0;
}

static int teardown(void **state)
{
    refuser_t *s = *state;

    rpc_shutdown();
    atomic_store(&s->stop, true);
    shutdown(s->listener, SHUT_RDWR); /* the channel, and its connections, are gone */
    pthread_join(s->thread, NULL);
    close(s->listener);
    return 0;
}

static void a_call_the_server_did_not_see_reaches_it_once(void **state)
{
    refuser_t *s = *state;
    char target[32];
    grpc_channel *ch;

    snprintf(target, sizeof target, "127.0.0.1:%d", s->port);
    ch = rpc_channel_new(target, NULL);
    assert_non_null(ch);
    for (int i = 0; i < CALLS; i++) {
        Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
        rpc_call_opts_t o = {.deadline_ns = svc_now_ns() + 5000 * SVC_NS_PER_MS};
        ProtobufCMessage *resp = NULL;
        rpc_result_t res;
        svc_err_t err =
            rpc_call_unary(ch, "/grpc.health.v1.Health/Check", &req.base,
                           &grpc__health__v1__health_check_response__descriptor, &resp, &o, &res);
        assert_null(resp);
        assert_int_equal(err, SVC_EUNAVAIL);
        assert_int_equal(res.grpc_status, GRPC_STATUS_UNAVAILABLE);
        /* Counted before the call ends: the GOAWAY follows the HEADERS. */
        assert_int_equal(atomic_load(&s->streams), i + 1);
    }
    grpc_channel_destroy(ch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_call_the_server_did_not_see_reaches_it_once),
    };
    return svc_test_run_group_tests(tests, setup, teardown);
}
