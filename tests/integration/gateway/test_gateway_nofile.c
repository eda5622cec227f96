/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_gateway_nofile.c - the gateway out of file descriptors.
 *
 *  - Started with a soft RLIMIT_NOFILE below its hard one (as a systemd
 *    unit's 1024), it raises the soft limit to the hard one and says so.
 *  - Its limit then lowered to a few descriptors above what it holds
 *    (prlimit on its pid), it gets more connections than it can accept:
 *    it does not spin (before: accept() failed with EMFILE, the listener
 *    stayed readable, a loop thread burnt a whole core and logged
 *    nothing), it logs why, the connections it has go on being served,
 *    and the waiting ones are served once others have closed.
 */
#define _GNU_SOURCE /* prlimit */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "gw_it.h"

#define N_CONNS  40
#define HEADROOM 8   /* descriptors the gateway may open past what it holds */
#define SOFT_LOW 256 /* the soft limit it is started with */

static int setup(void **state)
{
    static const char *const gw_env[] = {"GATEWAY_LOG_LEVEL=info", NULL};

    return gw_it_setup_nofile(state, SOFT_LOW, gw_env);
}

static int fds_of(pid_t pid)
{
    char path[64];
    int n = 0;
    DIR *d;

    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    if ((d = opendir(path)) == NULL)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n - 2; /* . and .. */
}

/* User plus system CPU of pid, in seconds. */
static double cpu_of(pid_t pid)
{
    char path[64], buf[1024], *p;
    unsigned long long ut = 0, st = 0;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
    fclose(f);
    /* After the command's closing parenthesis: state is field 3, utime 14. */
    if ((p = strrchr(buf, ')')) == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int connect_to(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (const struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends GET /healthz on each open fd not yet answered, then waits up to
 * wait_ms for answers (returning early once every open one is answered, or
 * 100 ms after the last new answer): answered[i] once "HTTP/1.1 200" came
 * back. Returns how many are answered in all. */
static int ask(const int *fd, bool *answered, bool *sent, int n, int wait_ms)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
    uint64_t until = svc_now_ns() + (uint64_t)wait_ms * SVC_NS_PER_MS, last_new = 0;
    int done = 0;

    for (int i = 0; i < n; i++) {
        if (fd[i] >= 0 && !sent[i]) {
            assert_int_equal(write(fd[i], req, sizeof req - 1), (ssize_t)(sizeof req - 1));
            sent[i] = true;
        }
    }
    while (svc_now_ns() < until) {
        struct pollfd p[N_CONNS];
        int np = 0, idx[N_CONNS];

        for (int i = 0; i < n; i++)
            if (fd[i] >= 0 && !answered[i]) {
                p[np] = (struct pollfd){fd[i], POLLIN, 0};
                idx[np++] = i;
            }
        if (np == 0 || (last_new != 0 && svc_now_ns() - last_new > 100 * SVC_NS_PER_MS))
            break;
        if (poll(p, (nfds_t)np, 20) <= 0)
            continue;
        for (int k = 0; k < np; k++) {
            char buf[512];
            ssize_t r;

            if (!(p[k].revents & POLLIN))
                continue;
            r = read(p[k].fd, buf, sizeof buf - 1);
            assert_true(r > 0); /* an answer, not a close */
            buf[r] = '\0';
            assert_non_null(strstr(buf, "HTTP/1.1 200"));
            answered[idx[k]] = true;
            last_new = svc_now_ns();
        }
    }
    for (int i = 0; i < n; i++)
        done += answered[i];
    return done;
}

static void raises_its_soft_limit(void **state)
{
    gw_it_t *t = *state;
    char soft[32], hard[32];

    assert_true(gw_it_nofile(spawn_pid(t->gw), soft, hard));
    fprintf(stderr, "gateway started with a soft limit of %d: now %s soft, %s hard\n", SOFT_LOW,
            soft, hard);
    assert_string_equal(soft, hard);
    assert_int_equal(spawn_log_wait(t->gw,
                                    "open files: soft limit raised from 256 to the hard limit",
                                    it_ms(2000)),
                     SVC_OK);
}

static void out_of_descriptors_waits_without_spinning(void **state)
{
    gw_it_t *t = *state;
    pid_t pid = spawn_pid(t->gw);
    int held = fds_of(pid), fd[N_CONNS], n_first, n_later;
    bool answered[N_CONNS] = {false}, sent[N_CONNS] = {false};
    struct rlimit low;
    double cpu0, cpu;

    assert_true(held > 0);
    low.rlim_cur = low.rlim_max = (rlim_t)(held + HEADROOM);
    assert_int_equal(prlimit(pid, RLIMIT_NOFILE, &low, NULL), 0);
    for (int i = 0; i < N_CONNS; i++)
        assert_true((fd[i] = connect_to(t->port)) >= 0); /* the backlog takes them */

    n_first = ask(fd, answered, sent, N_CONNS, 1000);
    fprintf(stderr, "%d descriptors held, limit %d: %d of %d connections answered\n", held,
            held + HEADROOM, n_first, N_CONNS);
    /* About HEADROOM of them (a descriptor the gateway held may have closed
     * meanwhile), and far from all. */
    assert_true(n_first > 0 && n_first <= HEADROOM + 2);
    /* Out of descriptors with connections waiting: the gateway idles. */
    cpu0 = cpu_of(pid);
    usleep(1000 * 1000);
    cpu = cpu_of(pid) - cpu0;
    fprintf(stderr, "gateway CPU over 1 s at the limit: %.2f s\n", cpu);
    assert_true(cpu0 >= 0 && cpu < 0.3);
    assert_int_equal(
        spawn_log_wait(t->gw, "cannot accept a connection: Too many open files", it_ms(2000)),
        SVC_OK);
    /* The answered ones close; the others get their turn. */
    for (int round = 0; round < N_CONNS && ask(fd, answered, sent, N_CONNS, 0) < N_CONNS; round++) {
        for (int i = 0; i < N_CONNS; i++)
            if (answered[i] && fd[i] >= 0) {
                close(fd[i]);
                fd[i] = -1;
            }
        ask(fd, answered, sent, N_CONNS, it_ms(1000));
    }
    n_later = ask(fd, answered, sent, N_CONNS, 0);
    fprintf(stderr, "after closing the answered ones: %d of %d answered\n", n_later, N_CONNS);
    assert_int_equal(n_later, N_CONNS);
    for (int i = 0; i < N_CONNS; i++)
        if (fd[i] >= 0)
            close(fd[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(raises_its_soft_limit),
        cmocka_unit_test(out_of_descriptors_waits_without_spinning),
    };
    int rc;

    cat_it_global_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = svc_test_run_group_tests_name("gateway_nofile", tests, setup, gw_it_teardown);
    curl_global_cleanup();
    cat_it_global_fini();
    return rc;
}
