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

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        cat_config_help(stdout);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "catalog: unexpected argument '%s' (see --help)\n", argv[1]);
        return 2;
    }
    if (cat_config_load(&cfg, errbuf) != SVC_OK) {
        fprintf(stderr, "catalog: %s\n", errbuf);
        return 2;
    }
    svc_log_set_level_name(cfg.log_level);
    cat_config_log(&cfg);
    rpc_init();
    status = cat_server_run(&cfg);
    rpc_shutdown();
    return status;
}
