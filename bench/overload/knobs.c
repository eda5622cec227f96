/* SPDX-License-Identifier: Apache-2.0 */
/* knobs.c - a one-request HTTP/1.1 client for the catalog's /debug/fault. */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "overload.h"

static int dial(const char *hostport)
{
    char host[128];
    const char *colon = strrchr(hostport, ':');
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    struct timeval tv = {1, 0}; /* a knob change must not stall the ticker */
    int fd = -1;

    if (colon == NULL || (size_t)(colon - hostport) >= sizeof host)
        return -1;
    snprintf(host, sizeof host, "%.*s", (int)(colon - hostport), hostport);
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
        return -1;
    fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    return fd;
}

static int64_t json_int(const char *body, const char *key)
{
    char pat[48];
    const char *p;

    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(body, pat);
    return p != NULL ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

bool ov_knobs_set(const char *admin, const char *form, int64_t *in_flight, int64_t *rejected)
{
    char req[512], resp[2048];
    size_t len = 0;
    ssize_t n;
    int fd = dial(admin), status = 0, m;
    const char *body;

    if (fd < 0)
        return false;
    m = snprintf(req, sizeof req,
                 "POST /debug/fault HTTP/1.1\r\nHost: %s\r\nContent-Length: %zu\r\n\r\n%s", admin,
                 strlen(form), form);
    if (m < 0 || (size_t)m >= sizeof req || send(fd, req, (size_t)m, MSG_NOSIGNAL) != m) {
        close(fd);
        return false;
    }
    while (len + 1 < sizeof resp && (n = recv(fd, resp + len, sizeof resp - 1 - len, 0)) > 0)
        len += (size_t)n;
    resp[len] = '\0';
    close(fd);
    if (sscanf(resp, "HTTP/1.1 %d", &status) != 1 || status != 200 ||
        (body = strstr(resp, "\r\n\r\n")) == NULL)
        return false;
    *in_flight = json_int(body, "in_flight");
    *rejected = json_int(body, "rejected");
    return true;
}
