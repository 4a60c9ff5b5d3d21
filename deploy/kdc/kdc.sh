#!/usr/bin/env bash
# A throwaway MIT Kerberos KDC on this machine, one per work dir, for tests of SPNEGO
# (Kerberized HTTP) against the local Hadoop cluster (deploy/hadoop/cluster.sh). See
# docs/hadoop-local.md, or run with --help.
set -euo pipefail

readonly DEFAULT_REALM=PREEMPTOR.TEST
# Set in the environment of the krb5kdc this script starts: `down` finds it by it even
# when the pid file is gone.
readonly MARKER_VAR=PREEMPTOR_KDC
# Java 17 and MIT krb5 1.20 both do these; nothing older (no DES, no RC4).
readonly ENCTYPES="aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96"

usage() {
  cat <<EOF
Usage: kdc.sh [--work-dir DIR] COMMAND [OPTIONS]

A throwaway MIT Kerberos KDC (krb5kdc) for tests: its own realm, database, configuration
and port, everything in the work dir, listening on 127.0.0.1 only. No kadmind is
started; principals are added with kadmin.local. Needs Debian's krb5-kdc,
krb5-admin-server and krb5-user (krb5kdc, kdb5_util, kadmin.local, kinit, klist).

Commands:
  up [OPTIONS]        stop whatever an earlier 'up' of the work dir left, write
                      DIR/kdc.conf and DIR/krb5.conf, create a new database (random
                      master password, stashed), start krb5kdc in the background, wait
                      until it accepts TCP connections, then print on stdout:
                        KRB5_CONFIG=DIR/krb5.conf
                        KDC_PORT=PORT
                        KRB5_REALM=REALM
                      so that  eval "\$(kdc.sh --work-dir DIR up)"  sets them.
      --realm R             the realm (default $DEFAULT_REALM)
      --port P              the KDC's UDP and TCP port on 127.0.0.1 (default: a free
                            port picked at random in 20000-32000); checked to be free
      --timeout S           seconds to wait for the KDC (default 30)
  principal NAME... [OPTIONS]
                      add each principal (random key; kept as it is if it exists) and
                      export all of them into one keytab (mode 600), without changing
                      their keys, so earlier keytabs of the same principals stay valid;
                      prints the keytab's path. NAME without '@' is in the KDC's realm.
      --keytab FILE         the keytab (default DIR/keytabs/NAME.keytab, NAME the first
                            principal with '/' and '@' made '_'); added to if it exists
      --max-life SECONDS    the principals' maximum ticket life (set on existing ones
                            too), e.g. 60 to test expiry; default the realm's (1 day)
  down [--timeout S]  stop the KDC (SIGTERM, then SIGKILL after S seconds, default 5);
                      safe to run twice or where nothing runs. Files stay.
  status              exit 0 when this work dir's KDC runs (and print its pid), 3 if not
  env                 print the assignments of 'up' again

Work dir: --work-dir DIR (before the command or right after it), else
\$PREEMPTOR_KDC_WORK_DIR, else \${TMPDIR:-/tmp}/preemptor-kdc. Two KDCs with different
work dirs run side by side. Layout: DIR/kdc.conf (KRB5_KDC_PROFILE of krb5kdc and
kadmin.local), DIR/krb5.conf (for clients: kinit, curl, and Java through
-Djava.security.krb5.conf), DIR/principal* (database), DIR/stash, DIR/kadm5.acl,
DIR/kdc.env, DIR/krb5kdc.pid, DIR/logs/krb5kdc.log, DIR/keytabs/.

DIR/krb5.conf: default_realm, the realm's kdc 127.0.0.1:PORT, localhost mapped to the
realm, no DNS lookups (dns_lookup_kdc, dns_lookup_realm, dns_canonicalize_hostname and
rdns all false, so 'curl --negotiate https://localhost:PORT' asks for HTTP/localhost),
udp_preference_limit = 1 (TCP), the AES enctypes Java 17 accepts, ticket_lifetime 10h
(shorter with kinit -l or --max-life), and default_ccache_name FILE:DIR/ccache, so a
kinit with this KRB5_CONFIG does not touch the machine's default ticket cache
(KRB5CCNAME overrides it).

Examples:
  eval "\$(deploy/kdc/kdc.sh --work-dir /tmp/k up)"
  deploy/kdc/kdc.sh --work-dir /tmp/k principal HTTP/localhost     # prints the keytab
  deploy/kdc/kdc.sh --work-dir /tmp/k principal preemptor --keytab /tmp/k/client.keytab
  KRB5_CONFIG=/tmp/k/krb5.conf kinit -kt /tmp/k/client.keytab preemptor
  KRB5_CONFIG=/tmp/k/krb5.conf klist
  deploy/kdc/kdc.sh --work-dir /tmp/k down
EOF
}

log() { printf 'kdc.sh: %s\n' "$*" >&2; }
die() {
  printf 'kdc.sh: error: %s\n' "$*" >&2
  exit 1
}

default_work_dir() { printf '%s\n' "${PREEMPTOR_KDC_WORK_DIR:-${TMPDIR:-/tmp}/preemptor-kdc}"; }

abs_path() {
  case "$1" in
  /*) printf '%s\n' "$1" ;;
  *) printf '%s/%s\n' "$PWD" "$1" ;;
  esac
}

# Absolute path of an executable, also where /usr/sbin is not on PATH.
find_tool() {
  local t=$1 p
  p=$(PATH="$PATH:/usr/sbin:/sbin" command -v "$t") ||
    die "$t not found: apt-get install krb5-kdc krb5-admin-server krb5-user"
  printf '%s\n' "$p"
}

pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

# True when pid $1 is alive and carries this work dir's marker (a pid may be reused).
pid_ours() {
  pid_alive "$1" || return 1
  tr '\0' '\n' 2>/dev/null <"/proc/$1/environ" | grep -qxF "$MARKER_VAR=$WORK"
}

# Every process with this work dir's marker.
marked_pids() {
  local d
  for d in /proc/[0-9]*; do
    [[ "${d#/proc/}" == "$$" || "${d#/proc/}" == "$BASHPID" ]] && continue
    tr '\0' '\n' 2>/dev/null <"$d/environ" | grep -qxF "$MARKER_VAR=$WORK" &&
      printf '%s\n' "${d#/proc/}"
  done
  return 0
}

# A TCP or UDP socket of any state has port $1 as its local port.
port_in_use() {
  local hex
  hex=$(printf ':%04X ' "$1")
  awk 'NR > 1 { print $2 " " }' /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6 \
    2>/dev/null | grep -q -- "$hex"
}

# A socket listens on 127.0.0.1:$1 or on any address (TCP state 0A).
tcp_listening() {
  local hex
  hex=$(printf '%04X' "$1")
  awk -v a="0100007F:$hex" -v b="00000000:$hex" \
    'NR > 1 && $4 == "0A" && ($2 == a || $2 == b) { found = 1 } END { exit !found }' \
    /proc/net/tcp 2>/dev/null
}

pick_port() {
  local p tries=0
  p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
  while port_in_use "$p"; do
    p=$((p + 1))
    ((p < 32000)) || p=20000
    tries=$((tries + 1))
    ((tries < 12000)) || die "no free port in 20000-32000"
  done
  printf '%s\n' "$p"
}

# Lock the work dir against a concurrent up/down/principal of this script.
lock_work() {
  exec 9>"$WORK/.kdc.lock"
  flock -w 60 9 || die "another kdc.sh command holds $WORK/.kdc.lock"
}

# The environment of the KDC tools for this work dir.
kdc_env() {
  export KRB5_KDC_PROFILE="$WORK/kdc.conf" KRB5_CONFIG="$WORK/krb5.conf"
}

load_env() {
  [[ -f "$WORK/kdc.env" ]] || die "no KDC in $WORK (no kdc.env): run 'kdc.sh --work-dir $WORK up' first"
  # shellcheck source=/dev/null
  . "$WORK/kdc.env"
}

print_env() {
  printf 'KRB5_CONFIG=%q\n' "$WORK/krb5.conf"
  printf 'KDC_PORT=%s\n' "$KDC_PORT"
  printf 'KRB5_REALM=%q\n' "$REALM"
}

# Stop the KDC of this work dir: SIGTERM, then SIGKILL after $1 seconds.
stop_kdc() {
  local timeout=$1 pid deadline
  local -a pids=()
  if [[ -f "$WORK/krb5kdc.pid" ]]; then
    pid=$(cat "$WORK/krb5kdc.pid")
    pid_ours "$pid" && pids+=("$pid")
  fi
  mapfile -t -O "${#pids[@]}" pids < <(marked_pids)
  if ((${#pids[@]} == 0)); then
    rm -f "$WORK/krb5kdc.pid"
    return 0
  fi
  mapfile -t pids < <(printf '%s\n' "${pids[@]}" | sort -un)
  log "stopping krb5kdc of $WORK (pid ${pids[*]})"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  deadline=$((SECONDS + timeout))
  while :; do
    local alive=()
    for pid in "${pids[@]}"; do pid_alive "$pid" && alive+=("$pid"); done
    ((${#alive[@]} == 0)) && break
    if ((SECONDS >= deadline)); then
      log "SIGKILL to ${alive[*]}, alive after $timeout s"
      kill -KILL "${alive[@]}" 2>/dev/null || true
      sleep 0.5
      for pid in "${alive[@]}"; do
        pid_alive "$pid" && die "krb5kdc (pid $pid) survived SIGKILL"
      done
      break
    fi
    sleep 0.1
  done
  rm -f "$WORK/krb5kdc.pid"
}

# ---------------------------------------------------------------- commands

cmd_up() {
  local port="" timeout=30
  REALM=$DEFAULT_REALM
  while (($#)); do
    case "$1" in
    --realm) REALM=${2:?--realm needs a value} && shift 2 ;;
    --port) port=${2:?--port needs a value} && shift 2 ;;
    --timeout) timeout=${2:?--timeout needs a value} && shift 2 ;;
    --work-dir) WORK=${2:?--work-dir needs a value} && shift 2 ;;
    -h | --help) usage && exit 0 ;;
    *) die "up: unknown option '$1' (see --help)" ;;
    esac
  done
  [[ "$REALM" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "not a realm name: '$REALM'"
  [[ "$timeout" =~ ^[1-9][0-9]*$ ]] || die "--timeout: not a positive integer: '$timeout'"
  if [[ -n "$port" ]]; then
    if ! [[ "$port" =~ ^[1-9][0-9]*$ ]] || ((port > 65535)); then
      die "--port: not a port: '$port'"
    fi
  fi
  local krb5kdc kdb5_util
  krb5kdc=$(find_tool krb5kdc)
  kdb5_util=$(find_tool kdb5_util)
  find_tool kadmin.local >/dev/null
  WORK=$(abs_path "$WORK")
  mkdir -p "$WORK"
  WORK=$(cd "$WORK" && pwd -P)
  [[ "$WORK" != / ]] || die "the work dir cannot be /"
  local t0=$SECONDS
  lock_work

  # Whatever an earlier `up` left: stop it, remove its state.
  stop_kdc 5
  rm -rf "$WORK/keytabs" "$WORK/logs" "$WORK"/principal* "$WORK/stash" "$WORK/kadm5.acl" \
    "$WORK/kdc.conf" "$WORK/krb5.conf" "$WORK/kdc.env" "$WORK/ccache"
  mkdir -p "$WORK/keytabs" "$WORK/logs"
  chmod 700 "$WORK/keytabs"

  if [[ -n "$port" ]]; then
    port_in_use "$port" && die "port $port is in use"
  else
    port=$(pick_port)
  fi
  KDC_PORT=$port

  local enctypes_kdc="" e
  for e in $ENCTYPES; do enctypes_kdc+="${enctypes_kdc:+ }$e:normal"; done
  cat >"$WORK/kdc.conf" <<EOF
# Generated by deploy/kdc/kdc.sh; rewritten by every "up". KRB5_KDC_PROFILE of krb5kdc,
# kdb5_util and kadmin.local for this work dir.
[kdcdefaults]
    kdc_listen = 127.0.0.1:$KDC_PORT
    kdc_tcp_listen = 127.0.0.1:$KDC_PORT

[realms]
    $REALM = {
        database_name = $WORK/principal
        key_stash_file = $WORK/stash
        acl_file = $WORK/kadm5.acl
        kdc_listen = 127.0.0.1:$KDC_PORT
        kdc_tcp_listen = 127.0.0.1:$KDC_PORT
        master_key_type = aes256-cts-hmac-sha1-96
        supported_enctypes = $enctypes_kdc
        max_life = 1d
        max_renewable_life = 7d
    }

[logging]
    kdc = FILE:$WORK/logs/krb5kdc.log
    admin_server = FILE:$WORK/logs/kadmin.log
    default = FILE:$WORK/logs/krb5lib.log
EOF
  local lower
  lower=$(tr '[:upper:]' '[:lower:]' <<<"$REALM")
  cat >"$WORK/krb5.conf" <<EOF
# Generated by deploy/kdc/kdc.sh; rewritten by every "up". For kinit, klist, curl
# (KRB5_CONFIG) and Java (-Djava.security.krb5.conf).
[libdefaults]
    default_realm = $REALM
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 10h
    renew_lifetime = 7d
    forwardable = true
    default_ccache_name = FILE:$WORK/ccache
    permitted_enctypes = $ENCTYPES
    default_tkt_enctypes = $ENCTYPES
    default_tgs_enctypes = $ENCTYPES

[realms]
    $REALM = {
        kdc = 127.0.0.1:$KDC_PORT
    }

[domain_realm]
    localhost = $REALM
    .$lower = $REALM
    $lower = $REALM
EOF
  printf '*/admin@%s *\n' "$REALM" >"$WORK/kadm5.acl"
  kdc_env

  local master
  master=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  if ! "$kdb5_util" -r "$REALM" create -s -P "$master" >"$WORK/logs/kdb5_util.log" 2>&1; then
    cat "$WORK/logs/kdb5_util.log" >&2
    die "kdb5_util create failed"
  fi

  # -n: no fork, so $! is krb5kdc's pid. setsid: a session of its own, away from the
  # caller's terminal and process group.
  env "$MARKER_VAR=$WORK" setsid "$krb5kdc" -n -r "$REALM" \
    </dev/null >"$WORK/logs/krb5kdc.out" 2>&1 9>&- &
  local pid=$!
  disown "$pid"
  printf '%s\n' "$pid" >"$WORK/krb5kdc.pid"
  {
    printf '# Written by deploy/kdc/kdc.sh up; read by its other commands.\n'
    printf 'REALM=%q\nKDC_PORT=%q\n' "$REALM" "$KDC_PORT"
  } >"$WORK/kdc.env"

  local deadline=$((SECONDS + timeout))
  until tcp_listening "$KDC_PORT"; do
    if ! pid_alive "$pid"; then
      tail -n 20 "$WORK/logs/krb5kdc.out" "$WORK/logs/krb5kdc.log" >&2 2>/dev/null || true
      die "krb5kdc (pid $pid) exited during startup (logs in $WORK/logs)"
    fi
    if ((SECONDS >= deadline)); then
      stop_kdc 2 || true
      die "krb5kdc did not listen on 127.0.0.1:$KDC_PORT within $timeout s"
    fi
    sleep 0.1
  done
  log "krb5kdc (pid $pid) of realm $REALM on 127.0.0.1:$KDC_PORT (TCP and UDP) after $((SECONDS - t0)) s"
  print_env
}

cmd_principal() {
  local keytab="" max_life=""
  local -a names=()
  while (($#)); do
    case "$1" in
    --keytab) keytab=${2:?--keytab needs a value} && shift 2 ;;
    --max-life) max_life=${2:?--max-life needs a value} && shift 2 ;;
    --work-dir) WORK=${2:?--work-dir needs a value} && shift 2 ;;
    -h | --help) usage && exit 0 ;;
    -*) die "principal: unknown option '$1' (see --help)" ;;
    *) names+=("$1") && shift ;;
    esac
  done
  ((${#names[@]})) || die "principal: which principal? (e.g. HTTP/localhost)"
  [[ -z "$max_life" || "$max_life" =~ ^[1-9][0-9]*$ ]] ||
    die "--max-life: not a positive number of seconds: '$max_life'"
  [[ -d "$WORK" ]] || die "no work dir $WORK: run 'kdc.sh up' first"
  WORK=$(cd "$WORK" && pwd -P)
  load_env
  local kadmin
  kadmin=$(find_tool kadmin.local)
  kdc_env
  local name full
  local -a fulls=()
  for name in "${names[@]}"; do
    [[ "$name" =~ ^[A-Za-z0-9._/@-]+$ ]] || die "not a principal name: '$name'"
    full=$name
    [[ "$full" == *@* ]] || full="$name@$REALM"
    fulls+=("$full")
  done
  if [[ -z "$keytab" ]]; then
    local base=${names[0]%@*}
    keytab="$WORK/keytabs/${base//\//_}.keytab"
  fi
  keytab=$(abs_path "$keytab")
  mkdir -p "$(dirname "$keytab")"
  lock_work
  local out
  for full in "${fulls[@]}"; do
    if "$kadmin" -r "$REALM" -q "getprinc $full" 2>/dev/null | grep -q '^Principal: '; then
      if [[ -n "$max_life" ]]; then
        out=$("$kadmin" -r "$REALM" -q "modprinc -maxlife \"$max_life seconds\" $full" 2>&1)
        grep -q '^Principal "[^"]*" modified' <<<"$out" || die "modprinc $full failed: $out"
      fi
    else
      out=$("$kadmin" -r "$REALM" -q \
        "addprinc -randkey ${max_life:+-maxlife \"$max_life seconds\" }$full" 2>&1)
      grep -q '^Principal "[^"]*" created' <<<"$out" || die "addprinc $full failed: $out"
    fi
  done
  # -norandkey: export the current keys; a plain ktadd would make new ones and so
  # invalidate every keytab made before.
  out=$(umask 077 && "$kadmin" -r "$REALM" -q "ktadd -k $keytab -norandkey ${fulls[*]}" 2>&1) ||
    die "ktadd into $keytab failed: $out"
  # kadmin.local exits 0 whatever a query does: count what it says it added.
  (($(grep -c 'added to keytab' <<<"$out") >= ${#fulls[@]})) ||
    die "ktadd into $keytab failed: $out"
  chmod 600 "$keytab"
  log "$(printf '%s ' "${fulls[@]}")in $keytab"
  printf '%s\n' "$keytab"
}

cmd_down() {
  local timeout=5
  while (($#)); do
    case "$1" in
    --timeout) timeout=${2:?--timeout needs a value} && shift 2 ;;
    --work-dir) WORK=${2:?--work-dir needs a value} && shift 2 ;;
    -h | --help) usage && exit 0 ;;
    *) die "down: unknown option '$1'" ;;
    esac
  done
  [[ -d "$WORK" ]] || {
    log "no work dir $WORK: nothing to stop"
    return 0
  }
  WORK=$(cd "$WORK" && pwd -P)
  lock_work
  stop_kdc "$timeout"
}

cmd_status() {
  while (($#)); do
    case "$1" in
    --work-dir) WORK=${2:?--work-dir needs a value} && shift 2 ;;
    *) die "status: unknown option '$1'" ;;
    esac
  done
  if [[ ! -d "$WORK" ]]; then
    echo "work dir $WORK: none"
    return 3
  fi
  WORK=$(cd "$WORK" && pwd -P)
  local pid
  pid=$(cat "$WORK/krb5kdc.pid" 2>/dev/null || true)
  if pid_ours "$pid"; then
    load_env
    echo "krb5kdc pid $pid, realm $REALM, 127.0.0.1:$KDC_PORT"
    return 0
  fi
  echo "no KDC runs in $WORK"
  return 3
}

cmd_env() {
  while (($#)); do
    case "$1" in
    --work-dir) WORK=${2:?--work-dir needs a value} && shift 2 ;;
    *) die "env: unknown option '$1'" ;;
    esac
  done
  [[ -d "$WORK" ]] || die "no work dir $WORK"
  WORK=$(cd "$WORK" && pwd -P)
  load_env
  print_env
}

main() {
  WORK=$(default_work_dir)
  while (($#)); do
    case "$1" in
    --work-dir) WORK=${2:?--work-dir needs a value} && shift 2 ;;
    -h | --help | help) usage && exit 0 ;;
    *) break ;;
    esac
  done
  local cmd=${1:-}
  [[ -n "$cmd" ]] || {
    usage >&2
    exit 2
  }
  shift
  case "$cmd" in
  up) cmd_up "$@" ;;
  principal) cmd_principal "$@" ;;
  down) cmd_down "$@" ;;
  status) cmd_status "$@" ;;
  env) cmd_env "$@" ;;
  *) die "unknown command '$cmd' (see --help)" ;;
  esac
}

main "$@"
