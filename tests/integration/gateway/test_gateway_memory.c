/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_memory.c - the gateway gives back the memory of connections
 * that have gone (issue 11, part 4): the real gateway and catalog; twice,
 * 2000 connections are opened, one GET /v1/products/{id} is sent on each
 * (all in flight at once), every one must be answered 200, and then they
 * are all closed.
 *
 * In a normal build the gateway's VmRSS must then come back to within
 * RSS_SLACK_PCT of what it was after the warm-up, each round. Without the
 * gateway's trim (gateway/server.c, "Freed memory") it stays at about 3.8x:
 * glibc keeps the freed pages of each loop's arena. The slack is wider than
 * the benchmark's goal (+10 %, bench/run_gateway_bench.sh) because code
 * paths first run by the rounds also add resident pages, and what a trim
 * cannot give back (pages that hold a chunk still in use) varies: 1.08x to
 * 1.34x of the warm-up after a trim in 40 rounds here, with the machine
 * busy with other tests. It still fails that
 * 3.8x (2.6x at the least seen) by a wide margin. The trim may wait up to 10 s after an earlier
 * one, so each round allows 20 s (times SVC_TEST_TIMEOUT_MULTIPLIER).
 *
 * In an ASan build the RSS bound is not checked (ASan's allocator keeps
 * freed memory in quarantine and never returns it); there the teardown's
 * exit 0 after SIGTERM is the check: LeakSanitizer finds nothing left of
 * 4000 connections and their requests.
 *
 * The test process holds 2000 sockets, so it raises its RLIMIT_NOFILE, and
 * skips when the hard limit does not allow it. The gateway raises its own.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "gw_it.h"

#define N_CONNS       2000
#define N_ROUNDS      2
#define N_IDS         20
#define FDS_NEEDED    (N_CONNS + 200) /* plus libcurl, gRPC, logs */
#define RSS_SLACK_PCT 40
#define RSS_WAIT_MS   20000

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif
#ifndef ASAN_BUILD
#define ASAN_BUILD 0
#endif

static char ids[N_IDS][37];
static int fds[N_CONNS];
static bool enough_fds;

/* The soft limit up to what the test needs, if the hard limit allows. */
static bool enough_descriptors(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return false;
    if (rl.rlim_cur >= FDS_NEEDED)
        return true;
    if (rl.rlim_max < FDS_NEEDED)
        return false;
    rl.rlim_cur = FDS_NEEDED;
    return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

static int setup(void **state)
{
    enough_fds = enough_descriptors(); /* else the test skips */
    return gw_it_setup_env(state, false, NULL);
}

/* A "VmRSS"/"VmHWM" line of /proc/<pid>/status, in kB (-1 if absent). */
static long status_kb(pid_t pid, const char *key)
{
    char path[64], line[256];
    size_t kl = strlen(key);
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (kb < 0 && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, key, kl) == 0 && line[kl] == ':')
            kb = strtol(line + kl + 1, NULL, 10);
    fclose(f);
    return kb;
}

/* Reads one whole response from fd (blocking, with SO_RCVTIMEO) and fails
 * the test unless it is a 200. */
static void expect_200(int fd, int i)
{
    char buf[4096];
    size_t len = 0;
    const char *end = NULL;
    long body = -1;

    for (;;) {
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fail_msg("connection %d: %s after %zu bytes", i, n == 0 ? "closed" : strerror(errno),
                     len);
        len += (size_t)n;
        buf[len] = '\0';
        if (end == NULL && (end = strstr(buf, "\r\n\r\n")) != NULL) {
            const char *cl = strstr(buf, "Content-Length: ");
            if (cl == NULL || cl > end)
                fail_msg("connection %d: no Content-Length in %s", i, buf);
            body = strtol(cl + 16, NULL, 10);
        }
        if (end != NULL && len >= (size_t)(end + 4 - buf) + (size_t)body)
            break;
        if (len + 1 >= sizeof buf)
            fail_msg("connection %d: response over %zu bytes", i, sizeof buf);
    }
    if (strncmp(buf, "HTTP/1.1 200 ", 13) != 0)
        fail_msg("connection %d: %s", i, buf);
}

/* N_CONNS connections, one request on each before any answer is read, all
 * answered; they stay open (idle keep-alive). */
static void open_and_ask(const gw_it_t *t)
{
    struct sockaddr_in sa;
    struct timeval tv = {it_ms(15000) / 1000, 0};

    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)t->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < N_CONNS; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0 || connect(fds[i], (const struct sockaddr *)&sa, sizeof sa) != 0)
            fail_msg("connection %d: %s", i, strerror(errno));
        setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    for (int i = 0; i < N_CONNS; i++) {
        char req[192];
        int len = snprintf(req, sizeof req,
                           "GET /v1/products/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                           "X-Request-Id: memory-%d\r\n\r\n",
                           ids[i % N_IDS], t->port, i);
        if (send(fds[i], req, (size_t)len, MSG_NOSIGNAL) != len)
            fail_msg("connection %d: send: %s", i, strerror(errno));
    }
    for (int i = 0; i < N_CONNS; i++)
        expect_200(fds[i], i);
}

static void memory_comes_back(void **state)
{
    gw_it_t *t = *state;
    pid_t pid = spawn_pid(t->gw);
    CURL *h = curl_easy_init();
    long warm, bound;
    gw_res_t r;

    if (!enough_fds) {
        fprintf(stderr, "cannot raise RLIMIT_NOFILE to %d: skipped\n", FDS_NEEDED);
        skip();
    }
    for (int i = 0; i < N_IDS; i++) {
        char name[32];
        snprintf(name, sizeof name, "memory product %d", i);
        gw_it_product(h, t, name, 100 + i, i, ids[i]);
    }
    /* Warm-up: the request path has run, on both loop threads. */
    for (int i = 0; i < 400; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/products/%s", ids[i % N_IDS]);
        gw_call(h, t, "GET", path, NULL, NULL, &r);
        gw_assert_status(&r, 200);
        gw_res_free(&r);
        if (i % 100 == 99) { /* a new connection, so that the other loop gets some */
            curl_easy_cleanup(h);
            h = curl_easy_init();
        }
    }
    curl_easy_cleanup(h);
    usleep(200 * 1000);
    warm = status_kb(pid, "VmRSS");
    bound = warm + warm * RSS_SLACK_PCT / 100;
    fprintf(stderr, "gateway pid %d: VmRSS %ld kB after the warm-up%s\n", (int)pid, warm,
            ASAN_BUILD ? " (ASan build: the RSS bound is not checked)" : "");

    for (int round = 1; round <= N_ROUNDS; round++) {
        long open_kb, closed_kb, now_kb = -1;
        uint64_t t_close, deadline;

        open_and_ask(t);
        open_kb = status_kb(pid, "VmRSS");
        for (int i = 0; i < N_CONNS; i++)
            close(fds[i]);
        t_close = it_now_ms();
        closed_kb = status_kb(pid, "VmRSS");
        deadline = t_close + (uint64_t)it_ms(RSS_WAIT_MS);
        fprintf(stderr,
                "round %d: %d connections answered 200; VmRSS %ld kB with them open, %ld kB "
                "as they closed\n",
                round, N_CONNS, open_kb, closed_kb);
        if (ASAN_BUILD)
            continue;
        while ((now_kb = status_kb(pid, "VmRSS")) > bound && it_now_ms() < deadline)
            usleep(100 * 1000);
        fprintf(stderr,
                "round %d: VmRSS %ld kB %llu ms after the close (warm-up %ld kB, bound "
                "%ld kB)\n",
                round, now_kb, (unsigned long long)(it_now_ms() - t_close), warm, bound);
        if (now_kb > bound) {
            spawn_log_dump(t->gw, 10);
            fail_msg("round %d: the gateway's VmRSS is %ld kB %d ms after %d connections "
                     "closed, more than %d %% over the %ld kB after the warm-up",
                     round, now_kb, it_ms(RSS_WAIT_MS), N_CONNS, RSS_SLACK_PCT, warm);
        }
    }
    fprintf(stderr, "the gateway logged %zu trims that returned 4 MiB or more\n",
            spawn_log_count(t->gw, "returned freed heap to the kernel"));
    if (!spawn_alive(t->gw))
        fail_msg("the gateway exited");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(memory_comes_back, setup, gw_it_teardown),
    };
    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests_name("gateway_memory", tests, NULL, NULL);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
