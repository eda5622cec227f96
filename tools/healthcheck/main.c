/* SPDX-License-Identifier: Apache-2.0 */
/*
 * healthcheck - one health question, answered by the exit status:
 *
 *   healthcheck grpc HOST:PORT [SERVICE]  grpc.health.v1.Health/Check; 0 when
 *                                         SERVING (what grpc_health_probe does)
 *   healthcheck http HOST:PORT PATH       GET PATH; 0 when the status is 200
 *
 * --timeout-ms N (default 2000) bounds the whole question. It prints one line
 * (the status, or why there is none) and exits 1 for "not healthy", 2 for a
 * usage error. Used by deploy/compose's healthchecks; the image has no curl.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "grpc/health/v1/health.pb-c.h"
#include "rpc/rpc.h"

static int usage(void)
{
    fprintf(stderr, "usage: healthcheck [--timeout-ms N] grpc HOST:PORT [SERVICE]\n"
                    "       healthcheck [--timeout-ms N] http HOST:PORT PATH\n");
    return 2;
}

static int ask_grpc(const char *target, const char *service, int timeout_ms)
{
    Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    rpc_call_opts_t o = {0};
    rpc_result_t res;
    ProtobufCMessage *resp = NULL;
    grpc_channel *ch;
    int rc = 1;

    grpc_init();
    ch = rpc_channel_new(target, NULL);
    req.service = (char *)service;
    o.deadline_ns = svc_now_ns() + (uint64_t)timeout_ms * SVC_NS_PER_MS;
    o.wait_for_ready = true; /* a port still connecting is "not yet", not "refused" */
    if (rpc_call_unary(ch, "/grpc.health.v1.Health/Check", &req.base,
                       &grpc__health__v1__health_check_response__descriptor, &resp, &o,
                       &res) != SVC_OK) {
        printf("%s: %s\n", svc_err_name(res.err), res.message);
    } else {
        const Grpc__Health__V1__HealthCheckResponse *r = (const void *)resp;
        const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
            &grpc__health__v1__health_check_response__serving_status__descriptor, (int)r->status);
        printf("%s\n", v != NULL ? v->name : "?");
        rc = r->status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING ? 0 : 1;
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    grpc_channel_destroy(ch);
    grpc_shutdown();
    return rc;
}

/* Connects to host:port within the timeout; -1 with errno's reason printed. */
static int dial(const char *target, int timeout_ms)
{
    char host[256];
    const char *colon = strrchr(target, ':');
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int fd = -1;

    if (colon == NULL || (size_t)(colon - target) >= sizeof host)
        return -1;
    memcpy(host, target, (size_t)(colon - target));
    host[colon - target] = '\0';
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || ai == NULL) {
        printf("cannot resolve %s\n", target);
        return -1;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (poll(&p, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) ||
            soerr != 0) {
            printf("cannot connect to %s: %s\n", target, soerr ? strerror(soerr) : "timed out");
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    return fd;
}

static int ask_http(const char *target, const char *path, int timeout_ms)
{
    char req[512], line[256];
    size_t got = 0;
    int fd = dial(target, timeout_ms), status = 0, n;

    if (fd < 0)
        return 1;
    n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, target);
    if (n < 0 || (size_t)n >= sizeof req || write(fd, req, (size_t)n) != n) {
        printf("cannot send the request\n");
        close(fd);
        return 1;
    }
    while (got < sizeof line - 1 && memchr(line, '\n', got) == NULL) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t r;
        if (poll(&p, 1, timeout_ms) != 1 || (r = read(fd, line + got, sizeof line - 1 - got)) <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    line[got] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    if (sscanf(line, "HTTP/%*d.%*d %d", &status) != 1) {
        printf("no HTTP answer from %s\n", target);
        return 1;
    }
    printf("%s\n", line);
    return status == 200 ? 0 : 1;
}

int main(int argc, char **argv)
{
    int timeout_ms = 2000, i = 1;

    if (argc > 2 && strcmp(argv[1], "--timeout-ms") == 0) {
        timeout_ms = atoi(argv[2]);
        i = 3;
    }
    if (timeout_ms <= 0 || argc - i < 2)
        return usage();
    if (strcmp(argv[i], "grpc") == 0 && argc - i <= 3)
        return ask_grpc(argv[i + 1], argc - i == 3 ? argv[i + 2] : "", timeout_ms);
    if (strcmp(argv[i], "http") == 0 && argc - i == 3)
        return ask_http(argv[i + 1], argv[i + 2], timeout_ms);
    return usage();
}
