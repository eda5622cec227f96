# shellcheck shell=bash
# deploy/local/lib/components.sh: how stack.sh's verbs reach the components of its COMPONENTS
# table. Sourced by stack.sh (not a script of its own).
#
# A COMPONENTS entry is "name | function prefix | build". The component's file defines, for each
# of its units NAME (the names PREFIX_names prints one a line; without PREFIX_names, its one unit
# is the component's name):
#   PREFIX_start NAME   PREFIX_stop NAME    PREFIX_restart NAME   PREFIX_kill NAME
#   PREFIX_pause NAME   PREFIX_resume NAME  PREFIX_status_line NAME (its line of `status`)
#   PREFIX_logs NAME    follow its log (does not return)
# and, when the defaults below do not fit:
#   PREFIX_up, PREFIX_down    the whole component for `up` and `down` (default: PREFIX_start of each
#                             unit in order; PREFIX_stop of each in the reverse order)
#   PREFIX_log_files [NAME]   LOG_FILES += what `logs NAME...` follows for NAME, or, with no NAME,
#                             what a bare `logs` follows (default: $LOGS/<unit>.log)
# "build" in the third field: the component runs binaries of the build tree; `up` builds first.

# comp_parse ENTRY: COMP_NAME, COMP_PREFIX and COMP_BUILD of one COMPONENTS entry.
comp_parse() {
  local name prefix build
  IFS='|' read -r name prefix build <<<"$1"
  trim COMP_NAME "$name"
  trim COMP_PREFIX "$prefix"
  trim COMP_BUILD "$build"
}

# comp_has VERB: true when the component comp_parse parsed last defines PREFIX_VERB.
comp_has() { declare -F "${COMP_PREFIX}_$1" >/dev/null; }

# comp_units: COMP_UNITS = the unit names of the component comp_parse parsed last.
comp_units() {
  if comp_has names; then
    mapfile -t COMP_UNITS < <("${COMP_PREFIX}_names")
  else
    COMP_UNITS=("$COMP_NAME")
  fi
}

# comp_of UNIT: comp_parse the component that has UNIT; false when none has.
comp_of() {
  local entry u
  for entry in "${COMPONENTS[@]}"; do
    comp_parse "$entry"
    comp_units
    for u in "${COMP_UNITS[@]}"; do
      if [[ $u == "$1" ]]; then return 0; fi
    done
  done
  return 1
}

# service_names: every unit of every component, in table order, separated by spaces.
service_names() {
  local entry u sep=""
  for entry in "${COMPONENTS[@]}"; do
    comp_parse "$entry"
    comp_units
    for u in "${COMP_UNITS[@]}"; do printf '%s%s' "$sep" "$u"; sep=" "; done
  done
}

# Check every name before acting on any, so that a typo does nothing.
check_names() {
  local cmd=$1 n
  shift
  if (( $# == 0 )); then
    printf 'stack: error: usage: %s %s <service>...\n  services: %s\n' "$(rel "$SELF")" "$cmd" "$(service_names)" >&2
    exit 2
  fi
  for n in "$@"; do
    comp_of "$n" && continue
    printf 'stack: error: unknown service "%s"\n  services: %s\n' "$n" "$(service_names)" >&2
    exit 2
  done
}

# comp_up, comp_down, comp_log_files [NAME]: those of the component comp_parse parsed last, or the
# defaults described above.
comp_up() {
  local prefix=$COMP_PREFIX u
  if comp_has up; then "${prefix}_up"; return; fi
  comp_units
  for u in "${COMP_UNITS[@]}"; do "${prefix}_start" "$u"; done
}
comp_down() {
  local prefix=$COMP_PREFIX i
  if comp_has down; then "${prefix}_down"; return; fi
  comp_units
  for (( i = ${#COMP_UNITS[@]} - 1; i >= 0; i-- )); do "${prefix}_stop" "${COMP_UNITS[i]}"; done
}
comp_log_files() {
  local u
  if comp_has log_files; then "${COMP_PREFIX}_log_files" "$@"; return; fi
  if (( $# > 0 )); then LOG_FILES+=("$LOGS/$1.log"); return; fi
  comp_units
  for u in "${COMP_UNITS[@]}"; do LOG_FILES+=("$LOGS/$u.log"); done
}
