/* SPDX-License-Identifier: Apache-2.0 */
/* proc.c - a program's command line and stop signals (svc/core.h). */
#define _GNU_SOURCE /* signalfd */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "svc/core.h"

bool svc_main_args(int argc, char **argv, const char *prog, void (*help)(FILE *f), int *exit_code)
{
    if (argc < 2)
        return false;
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        help(stdout);
        *exit_code = 0;
    } else {
        fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, argv[1]);
        *exit_code = 2;
    }
    return true;
}

int svc_stop_fd_new(void)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        return -1;
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
        return -1;
    return signalfd(-1, &set, SFD_CLOEXEC);
}

bool svc_stop_requested(int fd, int timeout_ms, const char *module)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    struct signalfd_siginfo si;

    if (poll(&p, 1, timeout_ms) <= 0 || read(fd, &si, sizeof si) != (ssize_t)sizeof si)
        return false;
    svc_log_info(module, "%s: stopping", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
    return true;
}
