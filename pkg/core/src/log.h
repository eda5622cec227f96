/* SPDX-License-Identifier: Apache-2.0 */
/* log.h - what log.c shares with log_repeat.c; not part of the API. */
#ifndef SVC_CORE_LOG_H
#define SVC_CORE_LOG_H

#include <stdarg.h>

#include "svc/core.h"

/* svc_log_write with a va_list. */
void svc__log_vwrite(svc_log_level_t lvl, const char *module, const char *kv, const char *fmt,
                     va_list ap) __attribute__((format(printf, 4, 0)));

#endif
