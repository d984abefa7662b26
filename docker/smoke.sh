#!/bin/sh
# The compose files for real: build the images, record the example agent through freezeframe
# against a fake model upstream in a container (no internet), replay with the upstream
# stopped, and compare. Usage, from anywhere:
#
#     docker/smoke.sh [VARIANT...]      VARIANT: main, postgres, replicas (default: all three)
#
# * main: docker-compose.yml. Records twice (the second with FREEZEFRAME_FRESH=1), then
#   replays with FREEZEFRAME_MODE=replay: the agent's answer must be the second recording's,
#   from the proxy's /health on the host's loopback without a token, and the upstream must
#   have seen no connection since it was stopped. Prints `replay identical`.
# * postgres: the same over docker-compose.postgres.yml (one recording), the store checked
#   to be in PostgreSQL.
# * replicas: three replicas on one PostgreSQL store (docker-compose.replicas.yml); a load
#   agent sends requests through all three while one is killed (`kill`, SIGKILL); the chain
#   must verify, the store must hold at least every acknowledged exchange, and each
#   acknowledged answer must replay identical.
#
# The engine: `docker` where a Docker engine answers, podman otherwise (then Debian's
# docker-compose over `podman system service` on a socket of its own). The base images: the
# official ones (python:3.12-slim, postgres:16), or, where mmdebstrap is installed (no image
# registry reachable) or FREEZEFRAME_SMOKE_BASE=local, images docker/local-base.sh builds
# from Debian's packages (cached in /var/cache/freezeframe-ci). pip's cache for the builds is
# /var/cache/freezeframe-ci/pip (podman only: `docker build` mounts no volumes).
#
# Exits non-zero on any difference, any upstream connection during replay, or any step that
# fails or outlasts its bound; removes every container, network, volume and the podman
# service it started, also when interrupted.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
variants=${*:-main postgres replicas}
cache=${FREEZEFRAME_BASE_CACHE:-/var/cache/freezeframe-ci}
started=$(date +%s)

say() { printf 'smoke [%4s s]: %s\n' "$(($(date +%s) - started))" "$*" >&2; }
fail() {
    failed_with=$*
    say "FAILED: $*"
    exit 1
}
elapsed() { echo "$(($(date +%s) - $1)) s"; }

for variant in $variants; do
    case $variant in
        main | postgres | replicas) ;;
        *) fail "unknown variant '$variant' (main, postgres, replicas)" ;;
    esac
done

# ---- the engine, and compose
if [ -n "${FREEZEFRAME_SMOKE_ENGINE:-}" ]; then
    engine=$FREEZEFRAME_SMOKE_ENGINE
elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    engine=docker
elif command -v podman >/dev/null 2>&1; then
    engine=podman
else
    fail "no container engine: neither a Docker engine answering \`docker info\` nor podman"
fi

# Nothing from the caller's shell: the smoke runs the compose files as a newcomer would.
unset FREEZEFRAME_ADMIN_TOKEN FREEZEFRAME_MODE FREEZEFRAME_FRESH FREEZEFRAME_CASSETTE OPENAI_API_KEY
work=$(mktemp -d /tmp/freezeframe-smoke.XXXXXX)
chmod 0755 "$work"  # the containers' users read the smoke scripts and the upstream's cert
cp "$here/smoke/fake_upstream.py" "$here/smoke/load_agent.py" "$work/"
export FREEZEFRAME_SMOKE_DIR="$work"
service_pid=
projects=

cleanup() {
    status=$?
    trap - EXIT INT TERM
    [ "$status" = 0 ] || [ -n "${failed_with:-}" ] || say "FAILED: exit $status at an unexpected step"
    for project in $projects; do
        # shellcheck disable=SC2086  # $files_of_* are lists of -f options
        eval "files=\$files_$project"
        # shellcheck disable=SC2086
        timeout 120 $compose -p "$project" $files down -v --remove-orphans -t 10 \
            >>"$work/down.log" 2>&1 || say "could not remove project $project (see output above)"
    done
    if [ -n "$service_pid" ]; then
        kill "$service_pid" 2>/dev/null || true
        wait "$service_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$engine" = docker ]; then
    if docker compose version >/dev/null 2>&1; then
        compose="docker compose"
    else
        compose=docker-compose
    fi
else
    command -v docker-compose >/dev/null 2>&1 || fail "podman needs docker-compose (apt-get install docker-compose)"
    podman system service --time=0 "unix://$work/podman.sock" >"$work/podman-service.log" 2>&1 &
    service_pid=$!
    tries=0
    until [ -S "$work/podman.sock" ]; do
        tries=$((tries + 1))
        [ "$tries" -le 150 ] || fail "podman's API socket did not appear in 30 s"
        sleep 0.2
    done
    export DOCKER_HOST="unix://$work/podman.sock"
    compose=docker-compose
fi
say "engine: $engine ($($engine --version)); compose: $compose ($($compose version --short 2>/dev/null || $compose version | head -n 1))"

# ---- base images and builds
postgres_image=postgres:16
if [ -n "${FREEZEFRAME_BASE_IMAGE:-}" ]; then
    base=$FREEZEFRAME_BASE_IMAGE
elif [ "${FREEZEFRAME_SMOKE_BASE:-}" = local ] \
    || { [ "${FREEZEFRAME_SMOKE_BASE:-}" != official ] && command -v mmdebstrap >/dev/null 2>&1; }; then
    step=$(date +%s)
    bases=$("$here/local-base.sh" "$engine")
    base=$(echo "$bases" | sed -n 1p)
    postgres_base=$(echo "$bases" | sed -n 2p)
    say "local bases $base and $postgres_base ready in $(elapsed "$step")"
else
    base=python:3.12-slim
fi
export FREEZEFRAME_BASE_IMAGE="$base"

build() {  # build TAG CONTEXT BASE [BUILD OPTIONS...]
    tag=$1
    context=$2
    build_base=$3
    shift 3
    step=$(date +%s)
    if [ "$engine" = podman ]; then
        # pip's cache kept between builds; the host's CA bundle for pip's TLS, since a host
        # whose egress passes a TLS-inspecting proxy trusts that proxy's CA there.
        mkdir -p "$cache/pip"
        set -- --format docker --network host --volume "$cache/pip:/root/.cache/pip" "$@"
        bundle=${FREEZEFRAME_BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
        if [ -s "$bundle" ]; then
            set -- --volume "$bundle:/etc/ssl/certs/ca-certificates.crt:ro" "$@"
        fi
    fi
    "$engine" build --quiet --build-arg BASE_IMAGE="$build_base" -t "$tag" "$@" "$context" \
        >"$work/build.log" 2>&1 || {
        cat "$work/build.log" >&2
        fail "building $tag"
    }
    say "built $tag in $(elapsed "$step")"
}

ignore=
[ "$engine" = podman ] && ignore="--ignorefile $repo/docker/Dockerfile.dockerignore"
# shellcheck disable=SC2086  # $ignore is an option and its value, or nothing
build freezeframe:local "$repo" "$base" -f "$repo/docker/Dockerfile" $ignore
build freezeframe-example-agent:local "$repo/docker/example-agent" "$base"
case " $variants " in
    *" postgres "* | *" replicas "*)
        if [ -n "${postgres_base:-}" ]; then
            build freezeframe-postgres:local "$repo/docker/postgres-local" "$postgres_base"
            postgres_image=freezeframe-postgres:local
        fi
        ;;
esac
export FREEZEFRAME_POSTGRES_IMAGE="$postgres_image"
say "freezeframe image: $($engine image inspect -f '{{.Size}}' freezeframe:local) bytes"

# The fake upstream's certificate, made by freezeframe's image (it has `cryptography`).
"$engine" run --rm --no-healthcheck --user 0 --entrypoint python -v "$work:/smoke" freezeframe:local \
    /smoke/fake_upstream.py cert /smoke >/dev/null || fail "making the upstream's certificate"

# ---- helpers over one compose project ($project, $files)
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

use() {  # use PROJECT FILE...: the project the helpers below act on
    project=$1
    shift
    files=
    for file in "$@"; do
        files="$files -f $here/$file"
    done
    eval "files_$project=\$files"
    projects="$projects $project"
    FREEZEFRAME_PROXY_PORT=127.0.0.1:$(free_port)
    admin_port=$(free_port)
    FREEZEFRAME_ADMIN_PORT=127.0.0.1:$admin_port
    export FREEZEFRAME_PROXY_PORT FREEZEFRAME_ADMIN_PORT
}

c() {  # c COMPOSE-ARGS...: compose on the current project, bounded
    # shellcheck disable=SC2086  # $files is a list of -f options
    timeout "${bound:-300}" $compose -p "$project" $files "$@"
}

container() { c ps -q "$1"; }

wait_log() {  # wait_log SERVICE TEXT: until the service's log says TEXT (60 s)
    tries=0
    until c logs --no-color "$1" 2>/dev/null | grep -q "$2"; do
        tries=$((tries + 1))
        [ "$tries" -le 120 ] || fail "$1 did not log '$2' within 60 s"
        sleep 0.5
    done
}

wait_health() {  # until the admin port published on the host's loopback answers /health
    python3 - "$admin_port" <<'EOF' || fail "freezeframe's /health on 127.0.0.1:$admin_port (no token)"
import sys, time, urllib.request as request
opener = request.build_opener(request.ProxyHandler({}))
deadline = time.monotonic() + 180
while True:
    try:
        opener.open(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=5).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
EOF
}

upstream_connections() { c logs --no-color upstream 2>/dev/null | grep -c 'upstream: connection' || true; }

stop_freezeframe() {  # SIGTERM drains the store: every replica must exit 0
    for service in "$@"; do
        id=$(container "$service") || fail "no container of $service"
        c stop -t 30 "$service" >"$work/stop.log" 2>&1 || fail "compose stop $service: $(tail -n 3 "$work/stop.log")"
        code=$("$engine" inspect -f '{{.State.ExitCode}}' "$id") || fail "inspecting $service"
        [ "$code" = 0 ] || {
            c logs --no-color "$service" | tail -n 30 >&2
            fail "$service exited $code after SIGTERM"
        }
    done
}

wait_resolves() {  # wait_resolves NAME: until freezeframe's container resolves NAME (90 s)
    # podman's network DNS (aardvark-dns 1.4 on Debian 12) drops lookups while it reloads for
    # a container that starts or stops, at worst for tens of seconds: a recording made then
    # holds the proxy's failed lookup, not the agent's exchange.
    c exec -T freezeframe python -c '
import socket, sys, time
deadline = time.monotonic() + 90
while True:
    try:
        socket.getaddrinfo(sys.argv[1], 443)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
' "$1" >"$work/resolve.log" 2>&1 || fail "freezeframe's container could not resolve $1 in 90 s: $(tail -n 1 "$work/resolve.log")"
}

agent_failed() {  # agent_failed MODE OUTPUT
    cat "$2" "$2.err" >&2
    c logs --no-color freezeframe | tail -n 30 >&2
    fail "the agent failed in $1"
}

agent_run() {  # agent_run MODE OUTPUT [FRESH]: freezeframe up in MODE, then the agent
    FREEZEFRAME_MODE=$1 FREEZEFRAME_FRESH=${3:-} c up -d freezeframe >/dev/null 2>&1 \
        || fail "compose up freezeframe ($1)"
    wait_health
    [ "$1" != record ] || wait_resolves upstream
    if ! c run --rm -T --no-deps agent >"$2" 2>"$2.err"; then
        if [ "$1" != record ] || ! grep -q "Temporary failure in name resolution" "$2.err"; then
            agent_failed "$1" "$2"
        fi
        # The name resolved a moment ago (wait_resolves) and was lost again as another
        # container came or went: recorded again, afresh, once the name resolves.
        say "$project: the upstream's name did not resolve in podman's network; recording again"
        stop_freezeframe freezeframe
        FREEZEFRAME_MODE=record FREEZEFRAME_FRESH=1 c up -d freezeframe >/dev/null 2>&1 \
            || fail "compose up freezeframe (record, again)"
        wait_health
        wait_resolves upstream
        c run --rm -T --no-deps agent >"$2" 2>"$2.err" || agent_failed "$1" "$2"
    fi
    c logs --no-color freezeframe | grep -q "freezeframe $1: proxy on 0.0.0.0:8080" \
        || fail "freezeframe did not start in $1 mode"
}

record_then_replay() {  # record_then_replay TIMES: the agent recorded TIMES times, replayed once
    step=$(date +%s)
    c up -d upstream >/dev/null 2>&1 || fail "compose up upstream"
    wait_log upstream "listening on :8443"
    agent_run record "$work/$project.record1"
    stop_freezeframe freezeframe
    recorded=$work/$project.record1
    if [ "$1" = 2 ]; then  # a second recording, afresh: replay must serve this one
        agent_run record "$work/$project.record2" 1
        stop_freezeframe freezeframe
        recorded=$work/$project.record2
        if cmp -s "$work/$project.record1" "$recorded"; then
            fail "two recordings got the same answer: the upstream's answers are not told apart"
        fi
    fi
    grep -q '^model: 13 (upstream ' "$recorded" || fail "no answer from the fake upstream: $(cat "$recorded")"
    c stop upstream >/dev/null 2>&1 || fail "compose stop upstream"
    before=$(upstream_connections)
    upstream_id=$(container upstream) || fail "no upstream container"

    agent_run replay "$work/$project.replay"
    logs=$(c logs --no-color freezeframe) || fail "compose logs freezeframe"
    stop_freezeframe freezeframe
    [ "$("$engine" inspect -f '{{.State.Running}}' "$upstream_id")" = false ] \
        || fail "the upstream container ran during replay"
    [ "$(upstream_connections)" = "$before" ] || fail "the upstream was connected to during replay"
    # Replay names the upstream only in the lines of what it served from the store.
    echo "$logs" | grep -q 'freezeframe.replay: replayed default#' || fail "the proxy logged no replay"
    if echo "$logs" | grep -v 'freezeframe.replay: replayed default#' | grep -i -E 'upstream|miss'; then
        fail "the proxy logged an upstream connection or a miss during replay"
    fi
    if ! cmp -s "$recorded" "$work/$project.replay"; then
        diff "$recorded" "$work/$project.replay" >&2 || true
        fail "$project: the agent's replay output differs from the last recording's"
    fi
    say "$project: recorded ($before upstream connection(s)) and replayed in $(elapsed "$step"): $(cat "$recorded")"
    echo "replay identical"
}

# ---- the variants
smoke_main() {
    use ffsmoke_main docker-compose.yml smoke/compose.smoke.yml
    record_then_replay 2
    # The admin API itself still asks for a token: the one the image wrote on first start.
    token=$(c run --rm -T --no-deps --entrypoint cat freezeframe /data/admin-token 2>"$work/run.err") \
        || fail "no /data/admin-token"
    [ "${#token}" = 64 ] || fail "the generated admin token is not 64 hex digits"
}

smoke_postgres() {
    use ffsmoke_pg docker-compose.yml docker-compose.postgres.yml smoke/compose.smoke.yml
    record_then_replay 1
    tables=$(c exec -T postgres psql -h /tmp -U freezeframe -d freezeframe -Atc \
        "select count(*) from pg_tables where schemaname = 'public'") || fail "psql"
    [ "$tables" -gt 0 ] || fail "no tables in PostgreSQL: the store was not there"
    c run --rm -T --no-deps --entrypoint sh freezeframe -c 'test ! -e /data/freezeframe.db' \
        2>"$work/run.err" || fail "a SQLite store was made in /data beside PostgreSQL"
    say "ffsmoke_pg: $tables tables in PostgreSQL, no SQLite file"
}

stored_exchanges() {  # answered exchanges in the PostgreSQL store (0 before its schema exists)
    count=$("$engine" exec "$postgres_id" psql -h /tmp -U freezeframe -d freezeframe \
        -Atc "select count(*) from exchanges where status = 200" 2>>"$work/psql.err") || count=0
    case $count in
        '' | *[!0-9]*) echo 0 ;;
        *) echo "$count" ;;
    esac
}

replicas_failed() {  # the check's output, where each replica stands, and their last lines
    cat "$work/check" >&2
    c ps >&2 || true
    for replica in freezeframe freezeframe-2 freezeframe-3; do
        c logs --no-color "$replica" 2>&1 | tail -n 15 >&2 || true
    done
    fail "acknowledged answers did not replay identical"
}

smoke_replicas() {
    use ffsmoke_replicas docker-compose.yml docker-compose.postgres.yml \
        docker-compose.replicas.yml smoke/compose.smoke.yml smoke/replicas.smoke.yml
    step=$(date +%s)
    requests=${FREEZEFRAME_SMOKE_REQUESTS:-120}
    c up -d upstream >/dev/null 2>&1 || fail "compose up upstream"
    wait_log upstream "listening on :8443"
    FREEZEFRAME_MODE=record c up -d freezeframe freezeframe-2 freezeframe-3 >/dev/null 2>&1 \
        || fail "compose up the replicas"
    killed=$(container freezeframe-2) || fail "no freezeframe-2 container"
    postgres_id=$(container postgres) || fail "no postgres container"
    : >"$work/load"
    bound=600
    c run --rm -T --no-deps agent python /smoke/load_agent.py record "$requests" \
        >"$work/load" 2>"$work/load.err" &
    load_pid=$!
    bound=300
    # Kill the second replica mid-run, once a sixth of the requests are answered (the
    # container ids are looked up before: compose is slow to ask under load).
    tries=0
    until [ "$(grep -c '^{' "$work/load" || true)" -ge $((requests / 6)) ]; do
        tries=$((tries + 1))
        [ "$tries" -le 1200 ] || fail "not $((requests / 6)) requests answered in 300 s"
        kill -0 "$load_pid" 2>/dev/null || fail "the load agent ended early: $(tail -n 5 "$work/load.err")"
        sleep 0.25
    done
    "$engine" kill "$killed" >/dev/null || fail "$engine kill freezeframe-2"
    say "ffsmoke_replicas: killed freezeframe-2 ($engine kill) after $(grep -c '^{' "$work/load") of $requests answers"
    wait "$load_pid" || fail "the load agent: $(tail -n 5 "$work/load.err")"
    acknowledged=$(grep -c '^{' "$work/load" || true)
    failed=$(grep -c '^failed' "$work/load" || true)
    [ "$failed" -ge 1 ] || fail "no request failed: the kill did not land mid-run"
    [ $((acknowledged + failed)) = "$requests" ] || fail "the load agent accounted for $((acknowledged + failed)) of $requests requests"
    stop_freezeframe freezeframe freezeframe-3
    c stop upstream >/dev/null 2>&1 || fail "compose stop upstream"
    before=$(upstream_connections)

    # The chain verifies, and the store holds at least every acknowledged exchange.
    c run --rm -T --no-deps freezeframe verify default >"$work/verify" 2>&1 || {
        cat "$work/verify" >&2
        fail "verify default"
    }
    stored=$(stored_exchanges)
    [ "$stored" -ge "$acknowledged" ] || fail "$stored exchanges stored, $acknowledged acknowledged: some were lost"

    # Each acknowledged answer replays identical, through the three replicas.
    cp "$work/load" "$work/acks.jsonl"
    FREEZEFRAME_MODE=replay c up -d freezeframe freezeframe-2 freezeframe-3 >/dev/null 2>&1 \
        || fail "compose up the replicas (replay)"
    if ! c run --rm -T --no-deps agent python /smoke/load_agent.py check /smoke/acks.jsonl \
        >"$work/check" 2>&1; then
        # podman's network DNS (see agent_run) can lose a replica's name while three
        # containers start; then the check stops at its first /health, before it asks for
        # anything, and asking again replays the same positions. Any other failure is one.
        if ! grep -Eq "health did not answer: .*(Name or service not known|Temporary failure in name resolution)" "$work/check"; then
            replicas_failed
        fi
        say "ffsmoke_replicas: a replica's name did not resolve in podman's network; checking again"
        c run --rm -T --no-deps agent python /smoke/load_agent.py check /smoke/acks.jsonl \
            >"$work/check" 2>&1 || replicas_failed
    fi
    [ "$(upstream_connections)" = "$before" ] || fail "the upstream was connected to during replay"
    stop_freezeframe freezeframe freezeframe-2 freezeframe-3
    say "ffsmoke_replicas: $requests requests, $acknowledged acknowledged, $failed failed by the kill," \
        "$stored stored, chain verified, $(tail -n 1 "$work/check" | sed 's/^load agent: //') in $(elapsed "$step")"
    echo "replicas: nothing acknowledged lost"
}

for variant in $variants; do
    "smoke_$variant"
done
say "all done in $(elapsed "$started") ($variants)"
