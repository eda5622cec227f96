/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - notify-dlq: the command line, the service's configuration, then dlq_run (dlq.h). */
#include <stdio.h>
#include <stdlib.h>

#include "dlq.h"

int main(int argc, char **argv)
{
    static ntf_config_t cfg; /* about 10 KB of strings: not on the stack */
    char errbuf[SVC_ERRBUF_LEN] = "";
    dlq_args_t a;

    if (dlq_parse_args(argc, argv, &a, errbuf) != SVC_OK) {
        fprintf(stderr, "notify-dlq: %s (notify-dlq --help)\n", errbuf);
        return DLQ_EXIT_USAGE;
    }
    if (a.verb == DLQ_HELP) {
        dlq_help(stdout);
        return DLQ_EXIT_OK;
    }
    if (ntf_config_load(&cfg, errbuf) != SVC_OK) {
        fprintf(stderr, "notify-dlq: configuration: %s\n", errbuf);
        return DLQ_EXIT_USAGE;
    }
    /* pkg/mq logs its connects at info and a lost connection at warn; a CLI
     * reports its one error itself, so those lines appear only when asked
     * for with NOTIFY_LOG_LEVEL. */
    if (getenv("NOTIFY_LOG_LEVEL") != NULL)
        (void)svc_log_set_level_name(cfg.log_level);
    else
        svc_log_set_level(SVC_LOG_ERROR);
    return dlq_run(&a, &cfg, stdout, stderr);
}
