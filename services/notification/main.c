/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - the notification service: configuration, start, wait for SIGTERM. Wiring only. */
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

#include "service.h"

int main(int argc, char **argv)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    ntf_service_t *svc = NULL;
    struct pollfd pfd;
    ntf_config_t cfg;
    int status;

    if (svc_main_args(argc, argv, "notification", ntf_config_help, &status))
        return status;
    if (ntf_config_load(&cfg, errbuf) != SVC_OK) {
        fprintf(stderr, "notification: %s\n", errbuf);
        return 2;
    }
    svc_log_set_level_name(cfg.log_level);
    ntf_config_log(&cfg);
    pfd.fd = svc_stop_fd_new(); /* before any thread starts */
    pfd.events = POLLIN;
    if (pfd.fd < 0) {
        svc_log_error("notification", "signalfd failed");
        return 1;
    }
    svc_mem_start(&cfg.mem, "notification"); /* before any thread has an arena */
    if (ntf_service_start(&cfg, &svc, errbuf) != SVC_OK) {
        svc_log_error("notification", "%s", errbuf);
        svc_mem_stop();
        close(pfd.fd);
        return 2;
    }
    while (poll(&pfd, 1, -1) < 0)
        ; /* EINTR: only the signalfd ends the wait */
    svc_log_info("notification", "stopping: deliveries in flight finish");
    ntf_service_stop(svc);
    svc_log_info("notification", "stopped");
    svc_mem_stop();
    close(pfd.fd);
    return 0;
}
