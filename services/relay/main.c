/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - the outbox relay: configuration, signals, run. Wiring only. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "relay.h"

int main(int argc, char **argv)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    rly_relay_t *relay = NULL;
    rly_config_t cfg;
    int stop_fd, status;

    if (svc_main_args(argc, argv, "relay", rly_config_help, &status))
        return status;
    if (rly_config_load(&cfg, errbuf) != SVC_OK) {
        fprintf(stderr, "relay: %s\n", errbuf);
        return 2;
    }
    svc_log_set_level_name(cfg.log_level);
    rly_config_log(&cfg);
    stop_fd = svc_stop_fd_new(); /* before any thread starts */
    if (stop_fd < 0) {
        svc_log_error("relay", "signalfd failed");
        return 1;
    }
    svc_mem_start(&cfg.mem, "relay"); /* before any thread has an arena */
    if (rly_relay_new(&cfg, &relay, errbuf) != SVC_OK) {
        svc_log_error("relay", "%s", errbuf);
        status = 2;
    } else {
        status = rly_relay_run(relay, stop_fd);
    }
    rly_relay_free(relay);
    svc_mem_stop();
    close(stop_fd);
    return status;
}
