#!/bin/sh
# The mcpmux image's entrypoint (run under tini, which reaps the npx servers' orphans).
#
#   (no arguments) or options    mcpmux serve --http $MCPMUX_HOST:$MCPMUX_PORT --replica-id ... --advertise ...
#                                [options appended], configured from the environment (below)
#   healthcheck                  exit 0 when this replica's /healthz answers 200 (the image's HEALTHCHECK)
#   init-token NAME FILE         create token NAME and write it to FILE, only if no token exists yet
#   anything else                mcpmux with those arguments (token create, sources list, ...)
#
# Environment:
#   MCPMUX_DB            the shared database, postgresql+psycopg://USER:PASS@HOST/DB (read by mcpmux itself:
#                        it never appears on a command line, so `ps` does not show the password)
#   MCPMUX_DB_FILE       a file holding that URL (a Docker or Kubernetes secret), used when MCPMUX_DB is unset
#   MCPMUX_SECRET_KEY    the key that seals registered sources' secrets in the database: the SAME on every
#                        replica (each would otherwise make its own and could not read the others' secrets)
#   MCPMUX_SECRET_KEY_FILE  a file holding that key, used when MCPMUX_SECRET_KEY is unset
#   MCPMUX_REPLICA_ID    this replica's name (default: the hostname: the pod or container name)
#   MCPMUX_ADVERTISE     the URL other replicas reach this one at (http://ADDR:PORT)
#   MCPMUX_PORT          the port to serve on (default 8080)
#   MCPMUX_HOST          the address to bind (default 0.0.0.0: every interface of the container or pod)
#   MCPMUX_ALLOW_HOSTS   public names clients use (Host header), space-separated, e.g. "mcp.example.com"
#   MCPMUX_CONFIG        the config file (default: /etc/mcpmux/mcpmux.yaml when it exists)
set -eu

die() {
    printf 'mcpmux-entrypoint: error: %s\n' "$*" >&2
    exit 2
}

if [ -z "${MCPMUX_DB:-}" ] && [ -n "${MCPMUX_DB_FILE:-}" ]; then
    [ -r "$MCPMUX_DB_FILE" ] || die "MCPMUX_DB_FILE=$MCPMUX_DB_FILE is not a readable file"
    MCPMUX_DB=$(cat "$MCPMUX_DB_FILE")
    export MCPMUX_DB
fi
if [ -z "${MCPMUX_SECRET_KEY:-}" ] && [ -n "${MCPMUX_SECRET_KEY_FILE:-}" ]; then
    [ -r "$MCPMUX_SECRET_KEY_FILE" ] || die "MCPMUX_SECRET_KEY_FILE=$MCPMUX_SECRET_KEY_FILE is not a readable file"
    MCPMUX_SECRET_KEY=$(cat "$MCPMUX_SECRET_KEY_FILE")
    export MCPMUX_SECRET_KEY
fi
case "${MCPMUX_SECRET_KEY:-}" in
    *CHANGE-ME*) die "MCPMUX_SECRET_KEY is still the template's (CHANGE-ME): put a real key in the secret" ;;
esac
if [ -z "${MCPMUX_CONFIG:-}" ] && [ -f /etc/mcpmux/mcpmux.yaml ]; then
    export MCPMUX_CONFIG=/etc/mcpmux/mcpmux.yaml
fi
port=${MCPMUX_PORT:-8080}

case "${1:-}" in
    healthcheck)
        host=${MCPMUX_HOST:-0.0.0.0}
        [ "$host" != 0.0.0.0 ] || host=127.0.0.1
        exec python3 -c 'import sys, urllib.request
try:
    urllib.request.urlopen(f"http://{sys.argv[1]}/healthz", timeout=5)
except Exception as exc:
    sys.exit(f"unhealthy: {exc}")' "$host:$port"
        ;;
    init-token)
        [ "$#" -eq 3 ] || die "usage: init-token NAME FILE"
        [ -n "${MCPMUX_DB:-}" ] || die "set MCPMUX_DB (or MCPMUX_DB_FILE) to the shared database's URL"
        if [ "$(mcpmux token list --json)" != "[]" ]; then
            printf 'mcpmux-entrypoint: a token exists already; %s left as it is\n' "$3" >&2
            exit 0
        fi
        umask 077
        mcpmux token create "$2" >"$3.new"
        mv "$3.new" "$3"
        printf 'mcpmux-entrypoint: token %s created; it is in %s (shown nowhere else)\n' "$2" "$3" >&2
        exit 0
        ;;
    "" | -*) ;;
    *) exec mcpmux "$@" ;;
esac

[ -n "${MCPMUX_DB:-}" ] || die "set MCPMUX_DB (or MCPMUX_DB_FILE) to the shared database: postgresql+psycopg://USER:PASS@HOST/DB"
case "$MCPMUX_DB" in
    *CHANGE-ME*) die "MCPMUX_DB is still the template's (CHANGE-ME): put the real database URL in the secret" ;;
esac
[ -n "${MCPMUX_ADVERTISE:-}" ] || die "set MCPMUX_ADVERTISE to the URL other replicas reach this one at (http://ADDR:$port)"
replica=${MCPMUX_REPLICA_ID:-${HOSTNAME:-$(cat /proc/sys/kernel/hostname)}}

# The public names clients use (mcpmux accepts the --advertise address itself).
set -f # split the list on blanks, but never expand a '*' in it against file names
for name in ${MCPMUX_ALLOW_HOSTS:-}; do
    set -- --allow-host "$name" "$@"
done
set +f

exec mcpmux serve --http "${MCPMUX_HOST:-0.0.0.0}:$port" --replica-id "$replica" --advertise "$MCPMUX_ADVERTISE" "$@"
