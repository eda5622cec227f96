/* SPDX-License-Identifier: Apache-2.0 */
/*
 * support/spawn.h - child processes for integration tests: start a real
 * binary with extra environment variables and its stdout+stderr in a log
 * file, wait for its port, signal it, wait for its exit with a bound, and
 * read or search its log.
 *
 * Every wait here is bounded and polls; nothing sleeps for a fixed time.
 * A child gets SIGKILL when the thread that started it exits (Linux
 * PR_SET_PDEATHSIG), so a test that crashes or hits its CTest timeout leaves
 * no server behind. Start children from a thread that outlives them (the
 * test's main thread), never from a short-lived helper thread.
 *
 * A spawn_proc_t is not thread-safe: use each from one thread (reading its
 * log from others is fine). Different handles are independent.
 */
#ifndef SUPPORT_SPAWN_H
#define SUPPORT_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "svc/core.h"

#define SPAWN_LOG_MAX (16 * 1024 * 1024) /* spawn_log_read reads at most this */

typedef struct spawn_opts {
    const char *path;        /* the binary (execve: no PATH search)        */
    const char *const *argv; /* NULL-terminated, argv[0] included; NULL:
                                { path, NULL }. Borrowed.                  */
    const char *const *env;  /* NULL-terminated "NAME=VALUE" entries added
                                to this process's environment, replacing
                                variables of the same name (the last of
                                several wins); "NAME" alone removes NAME.
                                NULL: none. Borrowed.                      */
    const char *log_path;    /* stdout+stderr go here (truncated first);
                                copied. NULL: spawn_log_path_make(path).    */
} spawn_opts_t;

typedef struct spawn_proc spawn_proc_t; /* opaque */

/* Fills o with: no argv, no env, log file chosen by spawn_start. */
void spawn_opts_init(spawn_opts_t *o);

/*
 * Starts the child. stdin is /dev/null, the signal mask is empty and every
 * signal has its default action in the child. On SVC_OK *out is owned by
 * caller (spawn_free). A binary that cannot be executed gives SVC_EINVAL
 * with the errno text in errbuf (SVC_ERRBUF_LEN, optional); *out untouched.
 */
svc_err_t spawn_start(const spawn_opts_t *o, spawn_proc_t **out,
                      char errbuf[static SVC_ERRBUF_LEN]);

/*
 * Kills the child (SIGKILL) if it still runs, reaps it and frees p.
 * The log file is kept. NULL-safe.
 */
void spawn_free(spawn_proc_t *p);

pid_t spawn_pid(const spawn_proc_t *p);
/* The log file's path; valid until spawn_free. */
const char *spawn_log_path(const spawn_proc_t *p);

/* Sends sig (SIGTERM, SIGKILL, SIGSTOP, SIGCONT, ...). SVC_EINVAL when the
 * child was already reaped. */
svc_err_t spawn_signal(spawn_proc_t *p, int sig);

/* True while the child has not exited (reaps it when it has). */
bool spawn_alive(spawn_proc_t *p);

/* True while the child is stopped by a signal (SIGSTOP, SIGTSTP), so that
 * a caller sends SIGCONT only then: a SIGCONT also discards the SIGSTOP a
 * debugger or LeakSanitizer's exit-time leak check uses to attach, and
 * that leak check then waits forever. */
bool spawn_stopped(spawn_proc_t *p);

/*
 * Waits up to timeout_ms for the child to exit. SVC_OK: it exited and
 * *wstatus (optional) is its wait status (WIFEXITED/WEXITSTATUS/WTERMSIG);
 * SVC_ETIMEDOUT: still running. Calling again after an exit returns the
 * same status.
 */
svc_err_t spawn_wait_exit(spawn_proc_t *p, int timeout_ms, int *wstatus);

/* Writes "exit 0", "exit 23", "signal 9 (Killed)" for a wait status. */
void spawn_status_text(int wstatus, char *buf, size_t len);

/*
 * Waits up to timeout_ms until host:port (numeric IPv4) accepts TCP
 * connections. SVC_OK: it did; SVC_EUNAVAIL: the child (p, optional) exited
 * first; SVC_ETIMEDOUT: neither. Detail in errbuf (optional).
 */
svc_err_t spawn_wait_port(spawn_proc_t *p, const char *host, int port, int timeout_ms,
                          char errbuf[static SVC_ERRBUF_LEN]);

/* True when host:port accepts a TCP connection right now. */
bool spawn_port_open(const char *host, int port);

/*
 * A TCP port on 127.0.0.1 that nothing is bound to at the time of the call
 * (not reserved, so use it soon). -1 on error. Picked at random below the
 * kernel's ephemeral range, as deploy/local's free_ports does: a port from
 * that range can be taken by some client connection's source port while
 * the service on it restarts (a test that kill -9's and restarts a service
 * on the same port met that).
 */
int spawn_free_port(void);

/*
 * The whole log file as a NUL-terminated string (at most SPAWN_LOG_MAX
 * bytes), owned by caller (free()); NULL if it cannot be read.
 */
char *spawn_log_read(const spawn_proc_t *p);
/* True when the log contains needle now. */
bool spawn_log_contains(const spawn_proc_t *p, const char *needle);
/* How many times needle occurs in the log now. */
size_t spawn_log_count(const spawn_proc_t *p, const char *needle);
/*
 * Waits up to timeout_ms until the log contains needle. SVC_OK: found;
 * SVC_EUNAVAIL: the child exited and its log does not contain it;
 * SVC_ETIMEDOUT: not (yet) found.
 */
svc_err_t spawn_log_wait(spawn_proc_t *p, const char *needle, int timeout_ms);
/* Prints the last max_lines lines of the log to stderr, framed with its
 * path: call it when an assertion about the child is about to fail. */
void spawn_log_dump(const spawn_proc_t *p, int max_lines);

/*
 * A fresh log path for a child named after `name` (its basename is used):
 * "$SVC_TEST_LOG_DIR/<name>-<pid>-<n>.log", or under $TMPDIR or /tmp when
 * SVC_TEST_LOG_DIR is unset. The directory is created. Writes at most len
 * bytes (NUL included).
 */
void spawn_log_path_make(const char *name, char *buf, size_t len);

/* Runs argv to completion (log as for spawn_start) and returns its wait
 * status in *wstatus. SVC_ETIMEDOUT (child killed) after timeout_ms. */
svc_err_t spawn_run(const spawn_opts_t *o, int timeout_ms, int *wstatus,
                    char errbuf[static SVC_ERRBUF_LEN]);

#endif /* SUPPORT_SPAWN_H */
