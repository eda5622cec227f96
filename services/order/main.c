/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - the order service: configuration, the catalog client, serve. Wiring only. */
#include <stdio.h>
#include <string.h>

#include "order.h"
#include "pricing.h"

int main(int argc, char **argv)
{
    char errbuf[SVC_ERRBUF_LEN] = "";
    rs_grpc_client_t *catalog = NULL;
    ord_config_t cfg;
    svc_err_t err;
    int status;

    if (svc_main_args(argc, argv, "order", ord_config_help, &status))
        return status;
    if (ord_config_load(&cfg, errbuf) != SVC_OK) {
        fprintf(stderr, "order: %s\n", errbuf);
        return 2;
    }
    svc_log_set_level_name(cfg.log_level);
    ord_config_log(&cfg);
    svc_mem_start(&cfg.mem, "order"); /* before any thread has an arena */
    rpc_init();                       /* before the catalog client starts its thread */
    err = ord_catalog_new(&cfg, &catalog, errbuf);
    if (err != SVC_OK) {
        svc_log_error("order", "catalog client: %s", errbuf);
        status = err == SVC_EINVAL ? 2 : 1;
    } else {
        status = ord_server_run(&cfg, catalog);
    }
    rs_grpc_client_free(catalog); /* the server has stopped: no call is in flight */
    rpc_shutdown();
    svc_mem_stop();
    return status;
}
