/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - the catalog service: configuration, then serve. Wiring only. */
#include <stdio.h>
#include <string.h>

#include "catalog.h"

int main(int argc, char **argv)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    cat_config_t cfg;
    int status;

    if (svc_main_args(argc, argv, "catalog", cat_config_help, &status))
        return status;
    if (cat_config_load(&cfg, errbuf) != SVC_OK) {
        fprintf(stderr, "catalog: %s\n", errbuf);
        return 2;
    }
    svc_log_set_level_name(cfg.log_level);
    cat_config_log(&cfg);
    svc_mem_start(&cfg.mem, "catalog"); /* before any thread has an arena */
    rpc_init();
    status = cat_server_run(&cfg);
    rpc_shutdown();
    svc_mem_stop();
    return status;
}
