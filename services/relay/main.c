/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - the outbox relay: configuration, signals, run. Wiring only. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "relay.h"

/* SIGTERM/SIGINT are blocked before librdkafka starts its threads (they
 * inherit the mask) and read from a signalfd, so the loop's own waits see
 * them and no thread is interrupted at a random point. */
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
    rly_relay_t *relay = NULL;
    rly_config_t cfg;
    int stop_fd, status;

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        rly_config_help(stdout);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "relay: unexpected argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    if (rly_config_load(&cfg, errbuf) != SVC_OK) {
        fprintf(stderr, "relay: %s\n", errbuf);
        return 2;
    }
    svc_log_set_level_name(cfg.log_level);
    rly_config_log(&cfg);
    stop_fd = stop_fd_new();
    if (stop_fd < 0) {
        svc_log_error("relay", "signalfd failed");
        return 1;
    }
    if (rly_relay_new(&cfg, &relay, errbuf) != SVC_OK) {
        svc_log_error("relay", "%s", errbuf);
        status = 2;
    } else {
        status = rly_relay_run(relay, stop_fd);
    }
    rly_relay_free(relay);
    close(stop_fd);
    return status;
}
