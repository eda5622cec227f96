/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - the notify-sink: configuration, signals, run. Wiring only. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "server.h"

/* SIGTERM/SIGINT arrive on a signalfd that the server's poll watches, so a
 * stop is seen between two requests, never in the middle of one. */
static int stop_fd_new(void)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    signal(SIGPIPE, SIG_IGN);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
        return -1;
    return signalfd(-1, &set, SFD_CLOEXEC);
}

int main(int argc, char **argv)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    nsk_server_t *srv = NULL;
    nsk_config_t cfg;
    int stop_fd, status;

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        nsk_config_help(stdout);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "notify-sink: unexpected argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    if (nsk_config_load(&cfg, NULL, errbuf) != SVC_OK) {
        fprintf(stderr, "notify-sink: %s\n", errbuf);
        return 2;
    }
    svc_log_set_level_name(cfg.log_level);
    nsk_config_log(&cfg);
    stop_fd = stop_fd_new();
    if (stop_fd < 0) {
        svc_log_error("notify-sink", "signalfd failed");
        return 1;
    }
    if (nsk_server_new(&cfg, &srv, errbuf) != SVC_OK) {
        svc_log_error("notify-sink", "%s", errbuf);
        close(stop_fd);
        return 2;
    }
    svc_log_info("notify-sink", "listening on port %d", nsk_server_port(srv));
    status = nsk_server_run(srv, stop_fd);
    svc_log_info("notify-sink", "stopped");
    nsk_server_free(srv);
    close(stop_fd);
    return status;
}
