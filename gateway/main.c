/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - the REST gateway: configuration, then serve. Wiring only. */
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "config.h"
#include "rpc/rpc.h"
#include "server.h"

/* Every client connection is a descriptor. A soft limit of 1024 (the usual
 * default for services and containers) would stall the accept loop near
 * 1,000 connections, so take what the hard limit allows, as Go does. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    unsigned long long was;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == rl.rlim_max)
        return;
    was = (unsigned long long)rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        svc_log_warn("gateway", "cannot raise the open-file limit: %s", strerror(errno));
    else
        svc_log_info("gateway", "open files: soft limit raised from %llu to the hard limit %llu",
                     was, (unsigned long long)rl.rlim_max);
}

int main(int argc, char **argv)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    gw_config_t cfg;
    int status;

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        gw_config_help(stdout);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "gateway: unexpected argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    if (gw_config_load(&cfg, NULL, errbuf) != SVC_OK) {
        fprintf(stderr, "gateway: %s\n", errbuf);
        return 2;
    }
    svc_log_set_level_name(cfg.log_level);
    gw_config_log(&cfg);
    raise_fd_limit();
    svc_mem_start(&cfg.mem, "gateway"); /* before any thread has an arena */
    /* Before any thread exists: blocks SIGTERM/SIGINT for all of them (the
     * main thread waits for them with sigwaitinfo), ignores SIGPIPE. */
    rpc_init();
    status = gw_server_run(&cfg);
    rpc_shutdown();
    svc_mem_stop();
    return status;
}
