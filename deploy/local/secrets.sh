# shellcheck shell=bash
# deploy/local/secrets.sh: the webhook signing secret of the local stack (issue 37): one random
# Standard Webhooks secret in the run folder, made once, that the notification service signs with
# and the notify-sink verifies with. Sourced by stack.sh (not a script of its own); uses
# lib/common.sh. Starting a service whose SERVICES line names @WEBHOOK_SECRET_FILE@ (services.sh)
# calls webhook_secret_ensure first; `up` does too.
#
# The secret goes to the programs as a file path (NOTIFY_WEBHOOK_SECRET_FILE), never as a value:
# not on a command line, not in the environment every child inherits.

# webhook_secret_paths: WEBHOOK_SECRET_FILE of the current run folder (a function, not a variable
# set once: `test` moves the run folder).
webhook_secret_paths() {
  WEBHOOK_SECRET_FILE="$RUN/webhook-secret"
}

# webhook_secret_ensure: the secret, created (mode 0600) when it does not exist; kept otherwise (a
# new one would make every delivery signed with the old one fail at a receiver still holding it).
webhook_secret_ensure() {
  local tmp
  webhook_secret_paths
  if [[ -s $WEBHOOK_SECRET_FILE ]]; then
    say "secrets: keeping the webhook secret $(rel "$WEBHOOK_SECRET_FILE")"
    return 0
  fi
  mkdir -p "$RUN"
  tmp="$WEBHOOK_SECRET_FILE.tmp.$$"
  # 32 random bytes (the Standard Webhooks minimum is 24). printf is a shell builtin, so the value
  # is on no process's command line; umask 077 makes the file 0600 from its first byte.
  ( umask 077 && printf 'whsec_%s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$tmp" ) ||
    die "secrets: cannot write $(rel "$tmp")"
  mv -f "$tmp" "$WEBHOOK_SECRET_FILE" || die "secrets: cannot create $(rel "$WEBHOOK_SECRET_FILE")"
  say "secrets: new webhook secret $(rel "$WEBHOOK_SECRET_FILE") (mode 0600; the notification service and notify-sink read it)"
}
