#!/usr/bin/env bash
# A real Apache Hadoop YARN cluster on this machine, for tests, the demo and users:
# one ResourceManager and N NodeManagers as separate JVMs, from Hadoop's jars as Maven
# resolves them (deploy/hadoop/pom.xml). See docs/hadoop-local.md, or run with --help.
set -euo pipefail

readonly HADOOP_VERSION=3.5.0
readonly EXAMPLES_VERSION=3.4.2
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR
readonly POM="$SCRIPT_DIR/pom.xml"
readonly REPO_DIR="$SCRIPT_DIR/../.."
readonly RM_CLASS=org.apache.hadoop.yarn.server.resourcemanager.ResourceManager
readonly NM_CLASS=org.apache.hadoop.yarn.server.nodemanager.NodeManager
readonly EXAMPLES_JAR_NAME="hadoop-mapreduce-examples-$EXAMPLES_VERSION.jar"
readonly TESTS_JAR_NAME="hadoop-mapreduce-client-jobclient-$HADOOP_VERSION-tests.jar"
# Set in the environment of every process this script starts, and inherited by the
# containers the NodeManagers launch: `down` finds stragglers by it.
readonly MARKER_VAR=PREEMPTOR_HADOOP_CLUSTER
# How often `up` picks new ports when a daemon finds one taken by another process.
readonly PORT_ATTEMPTS=3

usage() {
  cat <<EOF
Usage: cluster.sh [--work-dir DIR] COMMAND [OPTIONS]

A local Apache Hadoop YARN $HADOOP_VERSION cluster: one ResourceManager and N NodeManagers
as separate JVMs on 127.0.0.1, the default file system the local one (file:///), the
MapReduce shuffle service on every NodeManager, and DefaultContainerExecutor containers.
Hadoop's jars come from Maven (deploy/hadoop/pom.xml, cached in ~/.m2; the first run
downloads about 100 MB). Needs java (17), mvn and curl.

Commands:
  up [OPTIONS]        start a cluster in the work dir (stopping and cleaning whatever a
                      previous 'up' of that work dir left), wait until every NodeManager
                      is RUNNING, then print shell assignments on stdout:
                        RM_WEBAPP=http://127.0.0.1:PORT
                        HADOOP_CONF_DIR=WORK/conf
                        HADOOP_EXAMPLES_JAR=WORK/jars/$EXAMPLES_JAR_NAME
                        HADOOP_TESTS_JAR=WORK/jars/$TESTS_JAR_NAME  (SleepJob)
                        PREEMPTOR_HADOOP_WORK_DIR=WORK
                        NM_WEBAPPS=http://127.0.0.1:P1,http://127.0.0.1:P2,...
                      so that  eval "\$(cluster.sh up)"  sets them. Progress goes to stderr.
      --nodes N             NodeManagers (default 2)
      --node-memory-mb M    memory of each NodeManager, MB (default 4096)
      --node-vcores V       vcores of each NodeManager (default 4)
      --conf-dir DIR        take capacity-scheduler.xml from DIR (default: the
                            repository's hadoop-conf/). Only that file is used; core-,
                            yarn- and mapred-site.xml are generated in WORK/conf.
      --yarn-preemption     turn YARN's own preemption monitor on
                            (yarn.resourcemanager.scheduler.monitor.enable; off otherwise)
      --default-queue Q     queue that clients run by this script submit to
                            (mapreduce.job.queuename; default: 'default' if the scheduler
                            has such a leaf queue, else its first leaf queue)
      --set KEY=VALUE       extra yarn-site.xml property for every daemon and client;
                            repeatable (e.g. --set yarn.acl.enable=true
                            --set yarn.admin.acl=yarn)
      --base-port P         use ports P, P+1, ... (default: free ports picked at random
                            in 20000-32000); every port is checked to be free. A daemon
                            that finds one taken by the time it binds makes up pick new
                            ports and start again (3 attempts in all)
      --timeout S           seconds to wait for the ResourceManager and the
                            NodeManagers (default 180)
    Secure web endpoints (RPC stays simple: hadoop.security.authentication=simple):
      --spnego-principal P  the RM's and NMs' web apps (REST API and UI) authenticate
      --spnego-keytab FILE  callers with Kerberos SPNEGO (HTTP 'Negotiate'; cookie
      --krb5-conf FILE      hadoop.auth afterwards), as principal P (HTTP/localhost@REALM)
                            with its key from FILE; every JVM gets
                            -Djava.security.krb5.conf. All three go together (see
                            deploy/kdc/kdc.sh for a KDC). The printed URLs then use the
                            host localhost, so that a client asks for HTTP/localhost.
                            The script itself authenticates as P (kinit -kt into
                            WORK/krb5cc; needs kinit and a curl with SPNEGO).
      --https               yarn.http.policy=HTTPS_ONLY: the RM's and NMs' web apps
                            serve HTTPS on the same ports, with a certificate for
                            localhost and 127.0.0.1 signed by a throwaway CA made in
                            WORK/ssl (needs openssl and keytool); URLs use
                            https://localhost, and 'up' also prints
                              HADOOP_CA_FILE=WORK/ssl/ca.pem  (curl --cacert)
  down [--timeout S]  stop every process of the cluster: the daemons 'up' started, the
                      containers the NodeManagers launched and the hadoop/yarn/mapred
                      commands still running against it (SIGTERM to each process and
                      its process group, then SIGKILL to what is alive after S seconds,
                      default 10)
  status              what is running: pids, RM state, nodes; exit 0 when the RM and
                      every NodeManager answer, 1 when partly, 3 when nothing runs
  env                 print the assignments of 'up' again
  jars                resolve the jars with Maven into the work dir and start nothing
                      (what 'up' does first; .ci/run runs it as a step of its own)
  hadoop ARGS...      the hadoop command against the cluster: hadoop jar JAR ...,
                      hadoop fs ..., hadoop version, hadoop classpath, hadoop CLASS ...
  yarn ARGS...        the yarn command: application, applicationattempt, container,
                      node, queue, rmadmin, schedulerconf, cluster, logs, top, jar,
                      version, classpath, nodeattributes
  mapred ARGS...      the mapred command: job, queue, version, classpath

Work dir: --work-dir DIR (before the command, or right after it), else
\$PREEMPTOR_HADOOP_WORK_DIR, else \${TMPDIR:-/tmp}/preemptor-hadoop. Two clusters with
different work dirs run side by side. Layout: WORK/cluster.env (ports, pids), WORK/conf
(client and RM configuration), WORK/logs/{rm,nm-I}.log, WORK/nm-I/ (each NodeManager's
configuration, local dirs and container logs), WORK/lib (links to the jars in ~/.m2).

Secure example (a KDC of deploy/kdc/kdc.sh; curl checks the certificate and does SPNEGO):
  eval "\$(deploy/kdc/kdc.sh --work-dir /tmp/k up)" && export KRB5_CONFIG
  ktab=\$(deploy/kdc/kdc.sh --work-dir /tmp/k principal HTTP/localhost)
  eval "\$(deploy/hadoop/cluster.sh up --https --spnego-principal \\
      HTTP/localhost@\$KRB5_REALM --spnego-keytab \$ktab --krb5-conf \$KRB5_CONFIG)"
  kinit -kt "\$(deploy/kdc/kdc.sh --work-dir /tmp/k principal preemptor)" preemptor
  curl --negotiate -u : --cacert "\$HADOOP_CA_FILE" "\$RM_WEBAPP/ws/v1/cluster/info"

Environment: JAVA_HOME (else the java on PATH), MVN (default mvn), HADOOP_CLIENT_OPTS
(extra JVM options of hadoop/yarn/mapred), HADOOP_CLASSPATH (appended to their
classpath), HADOOP_ROOT_LOGGER (their log4j root, default INFO,console on stderr),
PREEMPTOR_HADOOP_WORK_DIR.

Examples:
  eval "\$(deploy/hadoop/cluster.sh up --nodes 2)"
  deploy/hadoop/cluster.sh hadoop jar "\$HADOOP_EXAMPLES_JAR" pi 2 10
  deploy/hadoop/cluster.sh yarn application -list -appStates ALL
  HADOOP_CLASSPATH="\$HADOOP_TESTS_JAR" deploy/hadoop/cluster.sh hadoop \\
      org.apache.hadoop.mapreduce.SleepJob -Dmapreduce.job.queuename=long -m 4 -r 1 -mt 60000
  curl -s "\$RM_WEBAPP/ws/v1/cluster/nodes"
  deploy/hadoop/cluster.sh down
EOF
}

log() { printf 'cluster.sh: %s\n' "$*" >&2; }
die() {
  printf 'cluster.sh: error: %s\n' "$*" >&2
  exit 1
}

# ---------------------------------------------------------------- common helpers

default_work_dir() { printf '%s\n' "${PREEMPTOR_HADOOP_WORK_DIR:-${TMPDIR:-/tmp}/preemptor-hadoop}"; }

# Absolute path, whether or not it exists yet.
abs_path() {
  case "$1" in
  /*) printf '%s\n' "$1" ;;
  *) printf '%s/%s\n' "$PWD" "$1" ;;
  esac
}

find_java() {
  if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
    JAVA="$JAVA_HOME/bin/java"
  else
    local j
    j=$(command -v java) || die "java not found: install Java 17 or set JAVA_HOME"
    j=$(readlink -f "$j")
    JAVA_HOME=$(dirname "$(dirname "$j")")
    JAVA="$j"
  fi
  export JAVA_HOME
}

# JVM options every Hadoop JVM of this cluster gets. Hadoop 3.5 on Java 17 reflects into
# java.base in a few places (the same packages mapreduce.jvm.add-opens-as-default opens
# for MapReduce containers).
java_base_opts() {
  local p
  for p in java.lang java.lang.reflect java.io java.net java.nio java.util \
    java.util.concurrent java.util.concurrent.atomic sun.nio.ch sun.nio.cs \
    sun.security.action sun.util.calendar; do
    printf -- '--add-opens=java.base/%s=ALL-UNNAMED\n' "$p"
  done
  printf -- '-Djava.net.preferIPv4Stack=true\n'
  [[ -n "$KRB5_CONF" ]] && printf -- '-Djava.security.krb5.conf=%s\n' "$KRB5_CONF"
  # C1 only: quicker start-up and less JIT work on a small machine.
  printf -- '-XX:TieredStopAtLevel=1\n'
}

# XML-escape a value.
xml_escape() {
  local s=$1
  s=${s//&/&amp;}
  s=${s//</&lt;}
  s=${s//>/&gt;}
  printf '%s' "$s"
}

# conf_file FILE KEY VALUE KEY VALUE ...: a Hadoop <configuration> file.
conf_file() {
  local file=$1
  shift
  {
    printf '<?xml version="1.0"?>\n'
    printf '<!-- Generated by deploy/hadoop/cluster.sh; rewritten by every "up". -->\n'
    printf '<configuration>\n'
    while (($# >= 2)); do
      printf '  <property><name>%s</name><value>%s</value></property>\n' \
        "$(xml_escape "$1")" "$(xml_escape "$2")"
      shift 2
    done
    printf '</configuration>\n'
  } >"$file.tmp"
  # Atomic: a running daemon may read the file at any time.
  mv -f "$file.tmp" "$file"
}

load_env() {
  local env="$WORK/cluster.env"
  [[ -f "$env" ]] || die "no cluster in $WORK (no cluster.env): run 'cluster.sh up --work-dir $WORK' first"
  # shellcheck source=/dev/null
  . "$env"
}

pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

# True when pid $1 is alive and carries this work dir's marker (a pid may be reused).
pid_ours() {
  pid_alive "$1" || return 1
  local env
  env=$(tr '\0' '\n' 2>/dev/null <"/proc/$1/environ") || return 1
  grep -qxF "$MARKER_VAR=$WORK" <<<"$env"
}

# Every process of this work dir, by its environment: the marker, which this script
# gives the daemons and clients and yarn.nodemanager.admin-env gives containers, or a
# container's LOG_DIRS under the work dir.
marked_pids() {
  local d pid
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [[ "$pid" == "$$" || "$pid" == "$BASHPID" ]] && continue
    if tr '\0' '\n' 2>/dev/null <"$d/environ" |
      awk -v a="$MARKER_VAR=$WORK" -v b="LOG_DIRS=$WORK/" \
        '$0 == a || index($0, b) == 1 { found = 1; exit } END { exit !found }'; then
      printf '%s\n' "$pid"
    fi
  done
}

# All descendants of the given pids (by parent pid), the pids themselves excluded.
descendants() {
  local -A children=()
  local d pid ppid stat
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    stat=$(cat "$d/stat" 2>/dev/null) || continue
    stat=${stat##*) }
    read -r _ ppid _ <<<"$stat"
    children[$ppid]+=" $pid"
  done
  local -a queue=("$@")
  while ((${#queue[@]})); do
    pid=${queue[0]}
    queue=("${queue[@]:1}")
    for d in ${children[$pid]:-}; do
      printf '%s\n' "$d"
      queue+=("$d")
    done
  done
}

# ---------------------------------------------------------------- ports

port_in_use() {
  local hex
  hex=$(printf ':%04X ' "$1")
  # Local address column of every TCP socket, any state.
  awk 'NR > 1 { print $2 " " }' /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q -- "$hex"
}

# pick_ports COUNT: COUNT distinct free ports into the array PORTS.
pick_ports() {
  local count=$1 p
  PORTS=()
  if [[ -n "$BASE_PORT" ]]; then
    p=$BASE_PORT
    while ((${#PORTS[@]} < count)); do
      ((p < 65536)) || die "ran out of ports above --base-port $BASE_PORT"
      port_in_use "$p" || PORTS+=("$p")
      p=$((p + 1))
    done
    return
  fi
  # A random start below the kernel's ephemeral range, so that two clusters started at
  # the same time rarely collide (and a collision shows as a bind error in the logs).
  p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
  while ((${#PORTS[@]} < count)); do
    ((p < 32000)) || p=20000
    port_in_use "$p" || PORTS+=("$p")
    p=$((p + 1))
  done
}

# ---------------------------------------------------------------- jars

# WORK/lib: links to the cluster's jars in the local Maven repository; WORK/jars: the
# examples and jobclient tests jars. Resolved again only when the pom changes.
resolve_jars() {
  local stamp_file="$WORK/lib/.pom.sha256" want
  want=$(sha256sum "$POM" | cut -d' ' -f1)
  if [[ -f "$stamp_file" && "$(cat "$stamp_file")" == "$want" ]] &&
    [[ -f "$WORK/jars/$EXAMPLES_JAR_NAME" && -f "$WORK/jars/$TESTS_JAR_NAME" ]] &&
    find "$WORK/lib" -maxdepth 1 -type l -name '*.jar' | grep -q . &&
    ! find "$WORK/lib" -maxdepth 1 -xtype l | grep -q .; then
    return
  fi
  local mvn=${MVN:-mvn}
  command -v "$mvn" >/dev/null || die "mvn not found: install Maven 3 (or set MVN)"
  log "resolving Hadoop $HADOOP_VERSION jars with Maven (the first run downloads ~100 MB into ~/.m2)"
  rm -rf "${WORK:?}/lib" "${WORK:?}/jars"
  mkdir -p "$WORK/lib" "$WORK/jars"
  local cp_file="$WORK/lib/.classpath" mvn_log="$WORK/logs/maven.log" t0=$SECONDS
  if ! (cd "$WORK" && "$mvn" -B -f "$POM" \
    dependency:build-classpath@lib dependency:copy@examples \
    -Dmdep.outputFile="$cp_file" -Dmdep.includeScope=runtime \
    -Dpreemptor.examples.dir="$WORK/jars") >"$mvn_log" 2>&1; then
    tail -n 40 "$mvn_log" >&2
    die "Maven could not resolve the jars (whole log: $mvn_log)"
  fi
  local jar n=0
  local -a jars
  IFS=: read -r -a jars <"$cp_file" || true  # no newline at its end
  for jar in "${jars[@]}"; do
    [[ -f "$jar" ]] || die "Maven listed a missing jar: $jar"
    ln -sf "$jar" "$WORK/lib/"
    n=$((n + 1))
  done
  ((n > 0)) || die "Maven resolved no jars (log: $mvn_log)"
  printf '%s\n' "$want" >"$stamp_file"
  log "resolved $n jars in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- configuration

# WORK/conf/mapred-site.xml, for clients and containers; MAPRED keeps its properties.
write_mapred_site() {
  MAPRED=(
    mapreduce.framework.name yarn
    yarn.app.mapreduce.am.staging-dir "$WORK/staging"
    mapreduce.application.classpath "$WORK/conf,$WORK/lib/*"
    mapreduce.jvm.add-opens-as-default true
    yarn.app.mapreduce.am.resource.mb 768
    yarn.app.mapreduce.am.resource.cpu-vcores 1
    yarn.app.mapreduce.am.command-opts "-Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true"
    mapreduce.map.memory.mb 512
    mapreduce.map.cpu.vcores 1
    mapreduce.map.java.opts "-Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true"
    mapreduce.reduce.memory.mb 512
    mapreduce.reduce.cpu.vcores 1
    mapreduce.reduce.java.opts "-Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true"
    mapreduce.task.io.sort.mb 64
    mapreduce.job.ubertask.enable false
    mapreduce.jobhistory.address "127.0.0.1:$JHS_PORT"
    mapreduce.jobhistory.webapp.address "127.0.0.1:$JHS_WEBAPP_PORT"
  )
  [[ -n "$DEFAULT_QUEUE" ]] && MAPRED+=(mapreduce.job.queuename "$DEFAULT_QUEUE")
  conf_file "$WORK/conf/mapred-site.xml" "${MAPRED[@]}"
}

# A random secret, hex.
random_hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# WORK/ssl: a throwaway CA (ca.pem) and a server certificate for localhost and 127.0.0.1
# signed by it, as the PKCS12 keystore the web apps serve (server.p12) and a PKCS12
# truststore with the CA (truststore.p12) for Hadoop's own HTTPS clients. Files with
# private keys (and the passwords' files) are mode 600.
make_certs() {
  local ssl="$WORK/ssl" keytool="$JAVA_HOME/bin/keytool"
  command -v openssl >/dev/null || die "--https needs openssl"
  [[ -x "$keytool" ]] || keytool=$(command -v keytool) || die "--https needs keytool (JDK)"
  rm -rf "$ssl"
  mkdir -p "$ssl"
  chmod 700 "$ssl"
  SSL_PASSWORD=$(random_hex 16)
  local out="$WORK/logs/ssl.log"
  if ! (
    set -e
    umask 077
    cd "$ssl"
    openssl req -x509 -new -newkey rsa:2048 -nodes -sha256 -days 365 \
      -keyout ca.key -out ca.pem -subj "/CN=Preemptor test CA $(random_hex 4)" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
    openssl req -new -newkey rsa:2048 -nodes -sha256 -keyout server.key -out server.csr \
      -subj /CN=localhost
    printf '%s\n' 'subjectAltName=DNS:localhost,IP:127.0.0.1' 'basicConstraints=CA:FALSE' \
      'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth' \
      >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial "0x$(random_hex 8)" \
      -days 365 -sha256 -extfile server.ext -out server.pem
    openssl pkcs12 -export -in server.pem -inkey server.key -certfile ca.pem -name server \
      -out server.p12 -passout "pass:$SSL_PASSWORD"
    "$keytool" -importcert -noprompt -alias ca -file ca.pem -keystore truststore.p12 \
      -storetype PKCS12 -storepass "$SSL_PASSWORD"
    chmod 644 ca.pem server.pem truststore.p12
    rm -f server.csr server.ext
  ) >"$out" 2>&1; then
    cat "$out" >&2
    die "could not make the certificates in $ssl (log: $out)"
  fi
  chmod 755 "$ssl"
  CA_FILE="$ssl/ca.pem"
}

# The configuration of --https and --spnego-*: WORK/conf/ssl-server.xml and
# ssl-client.xml, and the properties in CORE_SECURE (core-site.xml of every daemon and
# client) and YARN_SECURE (yarn-site.xml).
write_secure_confs() {
  local conf="$WORK/conf"
  CORE_SECURE=() YARN_SECURE=()
  if [[ "$HTTPS" == 1 ]]; then
    make_certs
    YARN_SECURE+=(
      yarn.http.policy HTTPS_ONLY
      yarn.resourcemanager.webapp.https.address "127.0.0.1:$RM_WEBAPP_PORT"
    )
    (
      umask 077
      conf_file "$conf/ssl-server.xml" \
        ssl.server.keystore.location "$WORK/ssl/server.p12" \
        ssl.server.keystore.type pkcs12 \
        ssl.server.keystore.password "$SSL_PASSWORD" \
        ssl.server.keystore.keypassword "$SSL_PASSWORD"
    )
    conf_file "$conf/ssl-client.xml" \
      ssl.client.truststore.location "$WORK/ssl/truststore.p12" \
      ssl.client.truststore.type pkcs12 \
      ssl.client.truststore.password "$SSL_PASSWORD"
  fi
  if [[ -n "$SPNEGO_PRINCIPAL" ]]; then
    (umask 077 && random_hex 32 >"$conf/http-auth-signature-secret")
    # With hadoop.security.authentication=simple the RM keeps this initializer as it is
    # (RMWebAppUtil replaces it by the RM's own only in secure mode) and the NM uses it
    # too, so both web apps get Hadoop's AuthenticationFilter with the Kerberos handler.
    CORE_SECURE+=(
      hadoop.http.filter.initializers org.apache.hadoop.security.AuthenticationFilterInitializer
      hadoop.http.authentication.type kerberos
      hadoop.http.authentication.kerberos.principal "$SPNEGO_PRINCIPAL"
      hadoop.http.authentication.kerberos.keytab "$SPNEGO_KEYTAB"
      hadoop.http.authentication.signature.secret.file "$conf/http-auth-signature-secret"
    )
  fi
}

write_confs() {
  local conf="$WORK/conf" lib="$WORK/lib"
  mkdir -p "$conf"
  cp "$CONF_DIR/capacity-scheduler.xml" "$conf/capacity-scheduler.xml"
  write_secure_confs

  cat >"$conf/log4j.properties" <<'EOF'
# Generated by deploy/hadoop/cluster.sh. Daemons log to ${hadoop.log.dir}/${hadoop.log.file}
# (RFA); the hadoop/yarn/mapred commands to stderr (console).
hadoop.root.logger=INFO,console
hadoop.log.dir=.
hadoop.log.file=hadoop.log
log4j.rootLogger=${hadoop.root.logger}
log4j.threshold=ALL
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{yy/MM/dd HH:mm:ss} %p %c{2}: %m%n
log4j.appender.RFA=org.apache.log4j.RollingFileAppender
log4j.appender.RFA.File=${hadoop.log.dir}/${hadoop.log.file}
log4j.appender.RFA.MaxFileSize=64MB
log4j.appender.RFA.MaxBackupIndex=3
log4j.appender.RFA.layout=org.apache.log4j.PatternLayout
log4j.appender.RFA.layout.ConversionPattern=%d{ISO8601} %p %c: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
log4j.logger.org.apache.hadoop.conf.Configuration.deprecation=WARN
log4j.logger.org.eclipse.jetty=WARN
EOF

  # fs.file.impl.disable.cache: a MapReduce task sets the working directory of the
  # default file system to the submitting client's; with file:/// as the default that
  # is the very LocalFileSystem instance tasks use for files in their container
  # directory (TeraSort's _partition.lst), unless the instances are not shared.
  conf_file "$conf/core-site.xml" \
    fs.defaultFS file:/// \
    fs.file.impl.disable.cache true \
    hadoop.tmp.dir "$WORK/tmp" \
    hadoop.security.authentication simple \
    ${CORE_SECURE[@]+"${CORE_SECURE[@]}"}

  write_mapred_site

  local monitor=false
  [[ "$YARN_PREEMPTION" == 1 ]] && monitor=true
  YARN_COMMON=(
    yarn.resourcemanager.hostname 127.0.0.1
    yarn.resourcemanager.address "127.0.0.1:$RM_PORT"
    yarn.resourcemanager.scheduler.address "127.0.0.1:$RM_SCHEDULER_PORT"
    yarn.resourcemanager.resource-tracker.address "127.0.0.1:$RM_TRACKER_PORT"
    yarn.resourcemanager.admin.address "127.0.0.1:$RM_ADMIN_PORT"
    yarn.resourcemanager.webapp.address "127.0.0.1:$RM_WEBAPP_PORT"
    yarn.resourcemanager.scheduler.class
    org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler
    yarn.resourcemanager.scheduler.monitor.enable "$monitor"
    yarn.resourcemanager.recovery.enabled false
    yarn.resourcemanager.connect.max-wait.ms 60000
    yarn.resourcemanager.connect.retry-interval.ms 1000
    yarn.node-attribute.fs-store.root-dir "file://$WORK/rm/node-attribute"
    yarn.node-labels.fs-store.root-dir "file://$WORK/rm/node-labels"
    yarn.acl.enable false
    yarn.timeline-service.enabled false
    yarn.system-metrics-publisher.enabled false
    yarn.scheduler.minimum-allocation-mb 256
    yarn.scheduler.maximum-allocation-mb "$NODE_MEMORY_MB"
    yarn.scheduler.minimum-allocation-vcores 1
    yarn.scheduler.maximum-allocation-vcores "$NODE_VCORES"
    yarn.application.classpath "$conf,$lib/*"
    yarn.nodemanager.aux-services mapreduce_shuffle
    yarn.nodemanager.aux-services.mapreduce_shuffle.class org.apache.hadoop.mapred.ShuffleHandler
    yarn.nodemanager.container-executor.class
    org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor
    yarn.nodemanager.resource.memory-mb "$NODE_MEMORY_MB"
    yarn.nodemanager.resource.cpu-vcores "$NODE_VCORES"
    yarn.nodemanager.admin-env "MALLOC_ARENA_MAX=\$MALLOC_ARENA_MAX,$MARKER_VAR=$WORK"
    yarn.nodemanager.vmem-check-enabled false
    yarn.nodemanager.recovery.enabled false
    yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage 99.0
    yarn.log-aggregation-enable false
    ${YARN_SECURE[@]+"${YARN_SECURE[@]}"}
  )
  local kv
  for kv in ${SETTINGS[@]+"${SETTINGS[@]}"}; do
    YARN_COMMON+=("${kv%%=*}" "${kv#*=}")
  done
  conf_file "$conf/yarn-site.xml" "${YARN_COMMON[@]}"
}

# Each NodeManager: its own conf dir, with its ports and directories.
write_nm_confs() {
  local conf="$WORK/conf" i nm
  local -a nm_https
  for ((i = 1; i <= NODES; i++)); do
    nm="$WORK/nm-$i"
    nm_https=()
    # HTTPS_ONLY: the web app port serves HTTPS (the HTTP address is not bound).
    [[ "$HTTPS" == 1 ]] && nm_https=(yarn.nodemanager.webapp.https.address "127.0.0.1:$(nm_port "$i" 1)")
    mkdir -p "$nm/conf" "$nm/local" "$nm/logs" "$nm/tmp" "$nm/recovery"
    cp "$conf/log4j.properties" "$nm/conf/"
    # The shuffle port goes in mapred-site.xml: the ShuffleHandler's configuration loads
    # mapred-default.xml (port 13562) after yarn-site.xml, so yarn-site.xml cannot set it.
    conf_file "$nm/conf/mapred-site.xml" "${MAPRED[@]}" \
      mapreduce.shuffle.port "$(nm_port "$i" 3)"
    conf_file "$nm/conf/core-site.xml" \
      fs.defaultFS file:/// \
      hadoop.tmp.dir "$nm/tmp" \
      hadoop.security.authentication simple \
      ${CORE_SECURE[@]+"${CORE_SECURE[@]}"}
    [[ "$HTTPS" == 1 ]] && cp -p "$conf/ssl-server.xml" "$nm/conf/"
    conf_file "$nm/conf/yarn-site.xml" "${YARN_COMMON[@]}" \
      yarn.nodemanager.hostname 127.0.0.1 \
      yarn.nodemanager.address "127.0.0.1:$(nm_port "$i" 0)" \
      yarn.nodemanager.webapp.address "127.0.0.1:$(nm_port "$i" 1)" \
      yarn.nodemanager.localizer.address "127.0.0.1:$(nm_port "$i" 2)" \
      yarn.nodemanager.local-dirs "$nm/local" \
      yarn.nodemanager.log-dirs "$nm/logs" \
      yarn.nodemanager.recovery.dir "$nm/recovery" \
      ${nm_https[@]+"${nm_https[@]}"}
  done
}

# nm_port I K: the K-th port (0 address, 1 webapp, 2 localizer, 3 shuffle) of NM I.
nm_port() { printf '%s\n' "${NM_PORTS[$((($1 - 1) * 4 + $2))]}"; }

# ---------------------------------------------------------------- daemons

start_daemon() {
  local name=$1 class=$2 confdir=$3 heap=$4
  local -a opts
  mapfile -t opts < <(java_base_opts)
  mkdir -p "$WORK/logs" "$WORK/tmp/$name"
  # setsid: the daemon leads a process group of its own, which `down` signals whole.
  # Inside a non-interactive script the background child is no group leader, so
  # setsid execs in place and $! is the JVM's pid.
  env "$MARKER_VAR=$WORK" \
    setsid "$JAVA" "-Xmx$heap" -XX:+UseSerialGC "${opts[@]}" \
    -Dproc_"$name" \
    -Djava.io.tmpdir="$WORK/tmp/$name" \
    -Dhadoop.log.dir="$WORK/logs" -Dhadoop.log.file="$name.log" \
    -Dyarn.log.dir="$WORK/logs" -Dyarn.log.file="$name.log" \
    -Dhadoop.root.logger=INFO,RFA -Dhadoop.id.str="$USER_NAME" \
    -cp "$confdir:$WORK/lib/*" "$class" \
    </dev/null >"$WORK/logs/$name.out" 2>&1 9>&- &
  local pid=$!
  disown "$pid"
  printf '%s\n' "$pid" >"$WORK/pids/$name.pid"
  log "started $name (pid $pid, log $WORK/logs/$name.log)"
}

# port_taken NAME: the daemon died because a port it was given was bound by another
# process since pick_ports found it free. Sets PORT_TAKEN.
port_taken() {
  local f bound
  for f in "$WORK/logs/$1.log" "$WORK/logs/$1.out"; do
    grep -qs 'java.net.BindException: Address already in use' "$f" || continue
    bound=$(grep -os 'Problem binding to \[[^]]*\]' "$f" | tail -n 1 || true)
    bound=${bound#Problem binding to \[}
    PORT_TAKEN="$1${bound:+ (${bound%]})}"
    return 0
  done
  return 1
}

# Last lines of a daemon's log and .out, for an error message.
show_log_tail() {
  local name=$1 f
  for f in "$WORK/logs/$name.out" "$WORK/logs/$name.log"; do
    [[ -s "$f" ]] || continue
    printf '==> %s (last 30 lines) <==\n' "$f" >&2
    tail -n 30 "$f" >&2
  done
}

# With --spnego-*: a ticket of the SPNEGO principal in WORK/krb5cc, for the script's
# own requests; a new one when there is none or it expired.
spnego_login() {
  [[ -n "$SPNEGO_PRINCIPAL" ]] || return 0
  local -a env=(KRB5_CONFIG="$KRB5_CONF" KRB5CCNAME="FILE:$WORK/krb5cc")
  env "${env[@]}" klist -s 2>/dev/null && return 0
  local out
  out=$(umask 077 && env "${env[@]}" kinit -kt "$SPNEGO_KEYTAB" "$SPNEGO_PRINCIPAL" 2>&1) ||
    die "kinit -kt $SPNEGO_KEYTAB $SPNEGO_PRINCIPAL (KRB5_CONFIG=$KRB5_CONF) failed: $out"
}

# GET a REST URL in JSON, as user.name=the current user (simple authentication: works
# whether or not the web apps allow anonymous requests); with --spnego-* by SPNEGO as
# the SPNEGO principal, with --https checking the certificate against WORK's CA.
http_get() {
  local url=$1 sep='?'
  local -a secure=()
  [[ "$url" == *\?* ]] && sep='&'
  [[ -n "$CA_FILE" ]] && secure+=(--cacert "$CA_FILE")
  if [[ -n "$SPNEGO_PRINCIPAL" ]]; then
    spnego_login
    secure+=(--negotiate -u :)
    KRB5_CONFIG="$KRB5_CONF" KRB5CCNAME="FILE:$WORK/krb5cc" \
      curl -fsS --max-time 5 -H 'Accept: application/json' "${secure[@]}" "$url"
    return
  fi
  curl -fsS --max-time 5 -H 'Accept: application/json' ${secure[@]+"${secure[@]}"} \
    "$url${sep}user.name=${USER_NAME:-$(id -un)}"
}

wait_for_rm() {
  local deadline=$((SECONDS + TIMEOUT)) pid
  pid=$(cat "$WORK/pids/rm.pid")
  while :; do
    if ! pid_alive "$pid"; then
      show_log_tail rm
      port_taken rm && return 0
      die "the ResourceManager (pid $pid) exited during startup"
    fi
    if http_get "$RM_WEBAPP/ws/v1/cluster/info" 2>/dev/null | grep -q '"state" *: *"STARTED"'; then
      return
    fi
    if ((SECONDS >= deadline)); then
      show_log_tail rm
      die "the ResourceManager did not start within $TIMEOUT s"
    fi
    sleep 0.5
  done
}

# Every NodeManager RUNNING in the RM's view, found by its web address.
wait_for_nodes() {
  local deadline=$((SECONDS + TIMEOUT)) i nodes missing pid
  local rm_pid
  rm_pid=$(cat "$WORK/pids/rm.pid")
  while :; do
    if ! pid_alive "$rm_pid"; then
      show_log_tail rm
      # Its web app answers STARTED before its client RPC port is bound.
      port_taken rm && return 0
      die "the ResourceManager (pid $rm_pid) exited"
    fi
    nodes=$(http_get "$RM_WEBAPP/ws/v1/cluster/nodes?states=RUNNING" 2>/dev/null || true)
    missing=()
    for ((i = 1; i <= NODES; i++)); do
      pid=$(cat "$WORK/pids/nm-$i.pid")
      if ! pid_alive "$pid"; then
        show_log_tail "nm-$i"
        port_taken "nm-$i" && return 0
        die "NodeManager nm-$i (pid $pid) exited during startup"
      fi
      grep -q "\"nodeHTTPAddress\" *: *\"[^\"]*:$(nm_port "$i" 1)\"" <<<"$nodes" ||
        missing+=("nm-$i")
    done
    ((${#missing[@]} == 0)) && return
    if ((SECONDS >= deadline)); then
      for i in "${missing[@]}"; do show_log_tail "$i"; done
      # Each node as the RM sees it (an UNHEALTHY one says why in its healthReport).
      log "the RM's nodes: $(http_get "$RM_WEBAPP/ws/v1/cluster/nodes" 2>&1 |
        grep -o '"\(nodeHTTPAddress\|state\|healthReport\)" *: *"[^"]*"' | tr '\n' ' ' || true)"
      die "not RUNNING after $TIMEOUT s: ${missing[*]} (RM nodes: $RM_WEBAPP/ws/v1/cluster/nodes)"
    fi
    sleep 0.5
  done
}

# Leaf queues of the running scheduler, in its order.
leaf_queues() {
  http_get "$RM_WEBAPP/ws/v1/cluster/scheduler" 2>/dev/null |
    grep -o '"type" *: *"capacitySchedulerLeafQueueInfo"[^{}]*"queueName" *: *"[^"]*"' |
    sed 's/.*"queueName" *: *"\([^"]*\)"$/\1/' || true
}

# KEY=VALUE for the shell, quoted only when the value needs it.
assign() {
  if [[ "$2" =~ ^[A-Za-z0-9_./:,=@%+-]*$ ]]; then
    printf '%s=%s\n' "$1" "$2"
  else
    printf '%s=%q\n' "$1" "$2"
  fi
}

print_env() {
  local i webapps=""
  for ((i = 1; i <= NODES; i++)); do
    webapps+="${webapps:+,}$WEB_SCHEME://$WEB_HOST:$(nm_port "$i" 1)"
  done
  assign RM_WEBAPP "$RM_WEBAPP"
  assign HADOOP_CONF_DIR "$WORK/conf"
  assign HADOOP_EXAMPLES_JAR "$WORK/jars/$EXAMPLES_JAR_NAME"
  assign HADOOP_TESTS_JAR "$WORK/jars/$TESTS_JAR_NAME"
  assign PREEMPTOR_HADOOP_WORK_DIR "$WORK"
  assign NM_WEBAPPS "$webapps"
  [[ -n "$CA_FILE" ]] && assign HADOOP_CA_FILE "$CA_FILE"
  return 0
}

# ---------------------------------------------------------------- stopping

# Stop everything of this work dir: the daemons' process groups, their descendants and
# every process with the marker (containers the NodeManagers launched included).
stop_all() {
  local -a daemons=() all=()
  local f pid
  for f in "$WORK"/pids/*.pid; do
    [[ -f "$f" ]] || continue
    pid=$(cat "$f")
    pid_ours "$pid" && daemons+=("$pid")
  done
  mapfile -t all < <({
    ((${#daemons[@]})) && printf '%s\n' "${daemons[@]}" && descendants "${daemons[@]}"
    marked_pids
  } | sort -un)
  if ((${#all[@]} == 0)); then
    rm -f "$WORK"/pids/*.pid
    return 0
  fi
  log "stopping ${#daemons[@]} daemon(s) and $((${#all[@]} - ${#daemons[@]})) other process(es) of $WORK"
  # SIGTERM to all at once: each daemon as a process group, each other process as a
  # group too (the NodeManager starts containers with setsid) and by pid. A NodeManager
  # waits for its containers' applications, so containers are not left to it. Then
  # SIGKILL to whatever outlives STOP_TIMEOUT.
  local sig
  for sig in TERM KILL; do
    if [[ "$sig" == KILL ]]; then
      mapfile -t all < <({
        for pid in "${all[@]}"; do pid_alive "$pid" && echo "$pid"; done
        marked_pids
      } | sort -un)
      ((${#all[@]} == 0)) && break
      log "SIGKILL to ${#all[@]} process(es) alive after ${STOP_TIMEOUT} s: ${all[*]}"
    fi
    for pid in "${all[@]}"; do
      kill "-$sig" -- "-$pid" 2>/dev/null || true
      kill "-$sig" "$pid" 2>/dev/null || true
    done
    if [[ "$sig" == TERM ]]; then
      wait_gone "$STOP_TIMEOUT" "${all[@]}" && all=() && break
    fi
  done
  if ((${#all[@]})) && ! wait_gone 5 "${all[@]}"; then
    die "processes survived SIGKILL: ${all[*]}"
  fi
  rm -f "$WORK"/pids/*.pid
}

# wait_gone SECS PID...: true once none of the pids is alive and no process of the
# work dir is left.
wait_gone() {
  local deadline=$((SECONDS + $1)) pid alive
  shift
  while :; do
    alive=0
    for pid in "$@"; do pid_alive "$pid" && alive=1 && break; done
    ((alive == 0)) && [[ -z "$(marked_pids)" ]] && return 0
    ((SECONDS >= deadline)) && return 1
    sleep 0.25
  done
}

# ---------------------------------------------------------------- commands

# Resolves the jars into the work dir (and ~/.m2) and starts nothing: a CI step of its own.
cmd_jars() {
  (($# == 0)) || die "jars takes no options (see --help)"
  mkdir -p "$WORK/logs"
  resolve_jars
  log "jars of Hadoop $HADOOP_VERSION in $WORK/lib ($(find "$WORK/lib" -maxdepth 1 -name '*.jar' | wc -l) jars)"
}

cmd_up() {
  NODES=2 NODE_MEMORY_MB=4096 NODE_VCORES=4 CONF_DIR="$REPO_DIR/hadoop-conf"
  YARN_PREEMPTION=0 BASE_PORT="" TIMEOUT=180 DEFAULT_QUEUE="" SETTINGS=()
  local queue_given=0
  while (($#)); do
    case "$1" in
    --nodes) NODES=${2:?--nodes needs a value} && shift 2 ;;
    --node-memory-mb) NODE_MEMORY_MB=${2:?--node-memory-mb needs a value} && shift 2 ;;
    --node-vcores) NODE_VCORES=${2:?--node-vcores needs a value} && shift 2 ;;
    --conf-dir) CONF_DIR=${2:?--conf-dir needs a value} && shift 2 ;;
    --work-dir) WORK=${2:?--work-dir needs a value} && shift 2 ;;
    --yarn-preemption) YARN_PREEMPTION=1 && shift ;;
    --default-queue) DEFAULT_QUEUE=${2:?--default-queue needs a value} && queue_given=1 && shift 2 ;;
    --set)
      [[ "${2:-}" == *=* ]] || die "--set needs KEY=VALUE"
      SETTINGS+=("$2") && shift 2
      ;;
    --base-port) BASE_PORT=${2:?--base-port needs a value} && shift 2 ;;
    --timeout) TIMEOUT=${2:?--timeout needs a value} && shift 2 ;;
    --spnego-principal) SPNEGO_PRINCIPAL=${2:?--spnego-principal needs a value} && shift 2 ;;
    --spnego-keytab) SPNEGO_KEYTAB=${2:?--spnego-keytab needs a value} && shift 2 ;;
    --krb5-conf) KRB5_CONF=${2:?--krb5-conf needs a value} && shift 2 ;;
    --https) HTTPS=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) die "up: unknown option '$1' (see --help)" ;;
    esac
  done
  local n
  for n in "$NODES" "$NODE_MEMORY_MB" "$NODE_VCORES" "$TIMEOUT" ${BASE_PORT:+"$BASE_PORT"}; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "not a positive integer: '$n'"
  done
  ((NODE_MEMORY_MB >= 1024)) || die "--node-memory-mb must be at least 1024 (an MR AM takes 768)"
  [[ -f "$CONF_DIR/capacity-scheduler.xml" ]] || die "no capacity-scheduler.xml in $CONF_DIR"
  CONF_DIR=$(cd "$CONF_DIR" && pwd)
  command -v curl >/dev/null || die "curl not found"
  if [[ -n "$SPNEGO_PRINCIPAL$SPNEGO_KEYTAB$KRB5_CONF" ]]; then
    [[ -n "$SPNEGO_PRINCIPAL" && -n "$SPNEGO_KEYTAB" && -n "$KRB5_CONF" ]] ||
      die "--spnego-principal, --spnego-keytab and --krb5-conf go together"
    [[ -r "$SPNEGO_KEYTAB" ]] || die "--spnego-keytab: cannot read $SPNEGO_KEYTAB"
    [[ -r "$KRB5_CONF" ]] || die "--krb5-conf: cannot read $KRB5_CONF"
    SPNEGO_KEYTAB=$(abs_path "$SPNEGO_KEYTAB") KRB5_CONF=$(abs_path "$KRB5_CONF")
    command -v kinit >/dev/null || die "--spnego-principal needs kinit (apt-get install krb5-user)"
    curl -V | grep -qw SPNEGO || die "--spnego-principal needs a curl with SPNEGO (GSS-API)"
    [[ "$SPNEGO_PRINCIPAL" == HTTP/localhost@* ]] ||
      log "warning: clients reach the web apps as localhost and so ask for HTTP/localhost@REALM, not $SPNEGO_PRINCIPAL"
  fi
  # Secure web apps are reached as localhost: the certificate's name and the host of
  # the SPNEGO service principal (HTTP/localhost).
  if [[ "$HTTPS" == 1 || -n "$SPNEGO_PRINCIPAL" ]]; then WEB_HOST=localhost; fi
  [[ "$HTTPS" == 1 ]] && WEB_SCHEME=https
  find_java
  WORK=$(abs_path "$WORK")
  mkdir -p "$WORK"
  WORK=$(cd "$WORK" && pwd -P)
  [[ "$WORK" != / ]] || die "the work dir cannot be /"
  USER_NAME=$(id -un)
  local t0=$SECONDS

  exec 9>"$WORK/.lock"
  flock -n 9 || die "another cluster.sh up/down is running on $WORK"

  # On failure, stop what this `up` started (the logs stay).
  trap 'up_failed' EXIT

  # Whatever an earlier `up` of this work dir left: stop it, remove its state.
  mkdir -p "$WORK/pids"
  stop_all
  rm -rf "$WORK/logs" "$WORK/logs.port-taken"
  clear_state

  resolve_jars

  # Ports are picked free but bound seconds later by the JVMs; a daemon that found one
  # taken meanwhile (another cluster or KDC starting at the same moment) makes `up` pick
  # new ports and start again, up to PORT_ATTEMPTS times.
  local attempt=1
  while :; do
    PORT_TAKEN=""
    start_cluster "$queue_given"
    [[ -n "$PORT_TAKEN" ]] || break
    ((attempt < PORT_ATTEMPTS)) ||
      die "$PORT_TAKEN found one of its ports taken by another process at each of $PORT_ATTEMPTS attempts"
    attempt=$((attempt + 1))
    log "$PORT_TAKEN found a port taken by another process since it was picked; picking new ports (attempt $attempt of $PORT_ATTEMPTS; the earlier logs are in $WORK/logs.port-taken)"
    stop_all
    rm -rf "$WORK/logs.port-taken"
    mv "$WORK/logs" "$WORK/logs.port-taken"
    clear_state
  done
  log "$NODES NodeManager(s) RUNNING, ${NODE_MEMORY_MB} MB and $NODE_VCORES vcores each; cluster up in $((SECONDS - t0)) s"
  trap - EXIT
  print_env
}

# clear_state: remove what a started cluster leaves in the work dir (its jars stay).
clear_state() {
  rm -rf "$WORK/conf" "$WORK/rm" "$WORK"/nm-* "$WORK/tmp" "$WORK/staging" \
    "$WORK/cluster.env" "$WORK/ssl" "$WORK/krb5cc"
  mkdir -p "$WORK/logs" "$WORK/tmp" "$WORK/staging" "$WORK/rm"
}

# start_cluster QUEUE_GIVEN: pick ports, write the configuration, start the RM and the
# NodeManagers, and wait until every NodeManager is RUNNING. Sets PORT_TAKEN to the
# daemon's name and returns early when a daemon could not bind a port it was given.
start_cluster() {
  local queue_given=$1
  pick_ports $((7 + 4 * NODES))
  RM_PORT=${PORTS[0]} RM_SCHEDULER_PORT=${PORTS[1]} RM_TRACKER_PORT=${PORTS[2]}
  RM_ADMIN_PORT=${PORTS[3]} RM_WEBAPP_PORT=${PORTS[4]}
  JHS_PORT=${PORTS[5]} JHS_WEBAPP_PORT=${PORTS[6]}
  NM_PORTS=("${PORTS[@]:7}")
  RM_WEBAPP="$WEB_SCHEME://$WEB_HOST:$RM_WEBAPP_PORT"

  # mapred-site.xml is for clients and containers only: written again below once the
  # scheduler says which queue clients submit to.
  write_confs
  spnego_login
  start_daemon rm "$RM_CLASS" "$WORK/conf" 768m
  wait_for_rm
  [[ -z "$PORT_TAKEN" ]] || return 0
  log "ResourceManager up at $RM_WEBAPP after $((SECONDS - t0)) s"

  if ((queue_given == 0)); then
    local -a leaves
    mapfile -t leaves < <(leaf_queues)
    DEFAULT_QUEUE=default
    if ((${#leaves[@]})) && ! printf '%s\n' "${leaves[@]}" | grep -qx default; then
      DEFAULT_QUEUE=${leaves[0]}
      log "the scheduler has no leaf queue 'default': clients submit to '$DEFAULT_QUEUE' (--default-queue to change; leaf queues: ${leaves[*]})"
    fi
  fi
  write_mapred_site
  write_nm_confs

  local i
  for ((i = 1; i <= NODES; i++)); do
    start_daemon "nm-$i" "$NM_CLASS" "$WORK/nm-$i/conf" 512m
  done
  {
    printf '# Written by deploy/hadoop/cluster.sh up; read by its other commands.\n'
    printf 'NODES=%q\nNODE_MEMORY_MB=%q\nNODE_VCORES=%q\nCONF_DIR=%q\n' \
      "$NODES" "$NODE_MEMORY_MB" "$NODE_VCORES" "$CONF_DIR"
    printf 'DEFAULT_QUEUE=%q\nYARN_PREEMPTION=%q\nJAVA_HOME=%q\n' \
      "$DEFAULT_QUEUE" "$YARN_PREEMPTION" "$JAVA_HOME"
    printf 'RM_PORT=%q\nRM_SCHEDULER_PORT=%q\nRM_TRACKER_PORT=%q\n' \
      "$RM_PORT" "$RM_SCHEDULER_PORT" "$RM_TRACKER_PORT"
    printf 'RM_ADMIN_PORT=%q\nRM_WEBAPP_PORT=%q\nRM_WEBAPP=%q\n' \
      "$RM_ADMIN_PORT" "$RM_WEBAPP_PORT" "$RM_WEBAPP"
    printf 'JHS_PORT=%q\nJHS_WEBAPP_PORT=%q\n' "$JHS_PORT" "$JHS_WEBAPP_PORT"
    printf 'WEB_SCHEME=%q\nWEB_HOST=%q\nCA_FILE=%q\nHTTPS=%q\n' \
      "$WEB_SCHEME" "$WEB_HOST" "$CA_FILE" "$HTTPS"
    printf 'SPNEGO_PRINCIPAL=%q\nSPNEGO_KEYTAB=%q\nKRB5_CONF=%q\n' \
      "$SPNEGO_PRINCIPAL" "$SPNEGO_KEYTAB" "$KRB5_CONF"
    printf 'NM_PORTS=(%s)  # per NodeManager: address webapp localizer shuffle\n' "${NM_PORTS[*]}"
  } >"$WORK/cluster.env"

  wait_for_nodes
}

up_failed() {
  local rc=$?
  ((rc == 0)) && return
  log "up failed; stopping what it started (logs stay in $WORK/logs)"
  stop_all || true
  exit "$rc"
}

cmd_down() {
  while (($#)); do
    case "$1" in
    --work-dir) WORK=${2:?--work-dir needs a value} && shift 2 ;;
    --timeout) STOP_TIMEOUT=${2:?--timeout needs a value} && shift 2 ;;
    -h | --help) usage && exit 0 ;;
    *) die "down: unknown option '$1'" ;;
    esac
  done
  [[ -d "$WORK" ]] || {
    log "no work dir $WORK: nothing to stop"
    return 0
  }
  WORK=$(cd "$WORK" && pwd -P)
  exec 9>"$WORK/.lock"
  flock -w 60 9 || die "another cluster.sh up/down holds $WORK/.lock"
  mkdir -p "$WORK/pids"
  local t0=$SECONDS
  stop_all
  log "stopped everything of $WORK in $((SECONDS - t0)) s"
}

cmd_status() {
  while (($#)); do
    case "$1" in
    --work-dir) WORK=${2:?--work-dir needs a value} && shift 2 ;;
    -h | --help) usage && exit 0 ;;
    *) die "status: unknown option '$1'" ;;
    esac
  done
  [[ -d "$WORK" ]] || {
    echo "work dir $WORK: none"
    return 3
  }
  WORK=$(cd "$WORK" && pwd -P)
  if [[ ! -f "$WORK/cluster.env" ]]; then
    echo "work dir $WORK: no cluster"
    return 3
  fi
  load_env
  local up=0 total=0 f name pid state
  echo "work dir:  $WORK"
  for f in "$WORK/pids/rm.pid" "$WORK"/pids/nm-*.pid; do
    [[ -f "$f" ]] || continue
    name=$(basename "$f" .pid)
    pid=$(cat "$f")
    total=$((total + 1))
    if pid_ours "$pid"; then
      up=$((up + 1))
      state="running"
    else
      state="not running"
    fi
    printf '%-10s pid %-8s %s\n' "$name" "$pid" "$state"
  done
  local info nodes
  if info=$(http_get "$RM_WEBAPP/ws/v1/cluster/info" 2>/dev/null); then
    printf 'RM:        %s, state %s, HA state %s\n' "$RM_WEBAPP" \
      "$(grep -o '"state" *: *"[^"]*"' <<<"$info" | head -1 | cut -d'"' -f4)" \
      "$(grep -o '"haState" *: *"[^"]*"' <<<"$info" | cut -d'"' -f4)"
    nodes=$(http_get "$RM_WEBAPP/ws/v1/cluster/nodes" 2>/dev/null || true)
    echo "nodes (id state):"
    # The RM prints a node's state just before its id.
    grep -o '"state" *: *"[A-Z_]*" *, *"id" *: *"[^"]*"' <<<"$nodes" |
      sed 's/"state" *: *"\([^"]*\)" *, *"id" *: *"\([^"]*\)"/  \2 \1/' || true
  else
    echo "RM:        $RM_WEBAPP not answering"
  fi
  local others
  others=$(marked_pids | grep -cvxF -f <(cat "$WORK"/pids/*.pid 2>/dev/null) || true)
  echo "other processes of this cluster (containers, clients): $others"
  if ((total > 0 && up == total)); then return 0; fi
  if ((up > 0)); then return 1; fi
  return 3
}

cmd_env() {
  while (($#)); do
    case "$1" in
    --work-dir) WORK=${2:?--work-dir needs a value} && shift 2 ;;
    *) die "env: unknown option '$1'" ;;
    esac
  done
  WORK=$(cd "$WORK" 2>/dev/null && pwd -P) || die "no work dir $WORK"
  load_env
  print_env
}

# run_tool hadoop|yarn|mapred ARGS...: the command-line tool's main class, run like
# Hadoop's bin scripts would, with WORK/conf first on the classpath.
run_tool() {
  local tool=$1
  shift
  if [[ "${1:-}" == --work-dir ]]; then
    WORK=${2:?--work-dir needs a value}
    shift 2
  fi
  WORK=$(cd "$WORK" 2>/dev/null && pwd -P) || die "no work dir $WORK: run 'cluster.sh up' first"
  load_env
  find_java
  local sub=${1:-} class
  local -a pre=()
  [[ -n "$sub" ]] || die "$tool: which subcommand? (see --help)"
  shift
  case "$tool:$sub" in
  hadoop:jar | yarn:jar) class=org.apache.hadoop.util.RunJar ;;
  hadoop:fs | hadoop:dfs) class=org.apache.hadoop.fs.FsShell ;;
  hadoop:version | yarn:version | mapred:version) class=org.apache.hadoop.util.VersionInfo ;;
  hadoop:classpath | yarn:classpath | mapred:classpath)
    printf '%s\n' "$WORK/conf:$WORK/lib/*"
    return 0
    ;;
  hadoop:conftest) class=org.apache.hadoop.util.ConfTest ;;
  hadoop:checknative) class=org.apache.hadoop.util.NativeLibraryChecker ;;
  hadoop:* | yarn:[A-Za-z]*.* | mapred:[A-Za-z]*.*)
    [[ "$tool:$sub" == hadoop:*.* ]] || [[ "$tool" != hadoop ]] ||
      die "hadoop: unknown subcommand '$sub' (jar, fs, version, classpath, conftest, checknative or a class name)"
    class=$sub
    ;;
  yarn:application | yarn:app | yarn:applicationattempt | yarn:container)
    class=org.apache.hadoop.yarn.client.cli.ApplicationCLI
    [[ "$sub" == app ]] && sub=application
    pre=("$sub")
    ;;
  yarn:node) class=org.apache.hadoop.yarn.client.cli.NodeCLI ;;
  yarn:queue) class=org.apache.hadoop.yarn.client.cli.QueueCLI ;;
  yarn:rmadmin) class=org.apache.hadoop.yarn.client.cli.RMAdminCLI ;;
  yarn:schedulerconf) class=org.apache.hadoop.yarn.client.cli.SchedConfCLI ;;
  yarn:cluster) class=org.apache.hadoop.yarn.client.cli.ClusterCLI ;;
  yarn:logs) class=org.apache.hadoop.yarn.client.cli.LogsCLI ;;
  yarn:top) class=org.apache.hadoop.yarn.client.cli.TopCLI ;;
  yarn:nodeattributes) class=org.apache.hadoop.yarn.client.cli.NodeAttributesCLI ;;
  mapred:job) class=org.apache.hadoop.mapred.JobClient ;;
  mapred:queue) class=org.apache.hadoop.mapred.JobQueueClient ;;
  *) die "$tool: unknown subcommand '$sub' (see --help)" ;;
  esac
  local -a opts client_opts=()
  mapfile -t opts < <(java_base_opts)
  # Word splitting of HADOOP_CLIENT_OPTS is intended, as in Hadoop's scripts.
  # shellcheck disable=SC2206
  [[ -n "${HADOOP_CLIENT_OPTS:-}" ]] && client_opts=($HADOOP_CLIENT_OPTS)
  mkdir -p "$WORK/tmp/client"
  exec env "$MARKER_VAR=$WORK" HADOOP_CONF_DIR="$WORK/conf" \
    "$JAVA" -Xmx512m -XX:+UseSerialGC "${opts[@]}" \
    -Dhadoop.log.dir="$WORK/logs" -Dhadoop.log.file=client.log \
    -Dhadoop.root.logger="${HADOOP_ROOT_LOGGER:-INFO,console}" \
    -Djava.io.tmpdir="$WORK/tmp/client" \
    ${client_opts[@]+"${client_opts[@]}"} \
    -cp "$WORK/conf:$WORK/lib/*${HADOOP_CLASSPATH:+:$HADOOP_CLASSPATH}" \
    "$class" ${pre[@]+"${pre[@]}"} "$@"
}

main() {
  WORK=$(default_work_dir)
  STOP_TIMEOUT=10
  # Plain HTTP and simple authentication unless `up` has --https or --spnego-*
  # (cluster.env says which for the other commands).
  HTTPS=0 WEB_SCHEME=http WEB_HOST=127.0.0.1 CA_FILE=""
  SPNEGO_PRINCIPAL="" SPNEGO_KEYTAB="" KRB5_CONF=""
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
  jars) cmd_jars "$@" ;;
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  status) cmd_status "$@" ;;
  env) cmd_env "$@" ;;
  hadoop | yarn | mapred) run_tool "$cmd" "$@" ;;
  *) die "unknown command '$cmd' (see --help)" ;;
  esac
}

main "$@"
