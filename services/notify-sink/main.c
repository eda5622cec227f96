/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - the notify-sink: configuration, signals, run. Wiring only. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "server.h"

int main(int argc, char **argv)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    nsk_server_t *srv = NULL;
    nsk_config_t cfg;
    int stop_fd, status;

    if (svc_main_args(argc, argv, "notify-sink", nsk_config_help, &status))
        return status;
    if (nsk_config_load(&cfg, NULL, errbuf) != SVC_OK) {
        fprintf(stderr, "notify-sink: %s\n", errbuf);
        return 2;
    }
    svc_log_set_level_name(cfg.log_level);
    nsk_config_log(&cfg);
    stop_fd = svc_stop_fd_new(); /* before any thread starts */
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
