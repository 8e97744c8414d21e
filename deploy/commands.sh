#!/bin/sh
# The command line of every Arbiter process in production, one place for all: the
# containers of compose.yaml run them, and so do the tests that start these processes
# (docs/deploy.md, "The processes"). Run from the repository root (the image's /app).
#
#   deploy/commands.sh web ADDRESS:PORT          gunicorn; WEB_CONCURRENCY workers (gunicorn's)
#   deploy/commands.sh worker QUEUE CONCURRENCY [OPTION...]  a Celery worker serving one queue
#   deploy/commands.sh beat SCHEDULE_FILE        the one Celery beat of a deployment
#   deploy/commands.sh migrate                   migrations, once per release
#   deploy/commands.sh pgbouncer PORT HOST DBPORT DBNAME USER   PgBouncer, transaction pooling
#   deploy/commands.sh s3 ADDRESS PORT           moto's S3 server (tests and compose only)
set -eu

# Each node's processes count their metrics together in this folder. A web server or a worker
# empties it first ("fresh"): a file left by a process of an earlier start would be added to
# this one's counts. Other commands only need it to be there (the settings check it).
metrics_folder() {
    if [ -n "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
        if [ "$1" = fresh ]; then rm -rf "$PROMETHEUS_MULTIPROC_DIR"; fi
        mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
    fi
}

# PgBouncer in transaction mode in front of one PostgreSQL; the password it logs in with is
# libpq's PGPASSWORD. Its files go to PGBOUNCER_DIR (a fresh temporary folder by default).
pgbouncer_run() {
    dir="${PGBOUNCER_DIR:-$(mktemp -d)}"
    mkdir -p "$dir"
    printf '"%s" "%s"\n' "$5" "${PGPASSWORD:-}" > "$dir/userlist.txt"
    cat > "$dir/pgbouncer.ini" <<INI
[databases]
$4 = host=$2 port=$3 dbname=$4
[pgbouncer]
listen_addr = ${PGBOUNCER_LISTEN_ADDR:-0.0.0.0}
listen_port = $1
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = ${PGBOUNCER_POOL_SIZE:-20}
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
    if [ "$(id -u)" = 0 ]; then  # PgBouncer refuses to run as root: it drops to nobody
        chown -R nobody "$dir"
        exec pgbouncer -u nobody "$dir/pgbouncer.ini"
    fi
    exec pgbouncer "$dir/pgbouncer.ini"
}

command="${1:?usage: deploy/commands.sh web|worker|beat|migrate|pgbouncer|s3 ...}"
shift
case "$command" in
    web)
        metrics_folder fresh
        exec gunicorn config.wsgi:application --bind "$1" --timeout 300 ;;
    worker)
        metrics_folder fresh
        queue="$1" concurrency="$2"
        shift 2
        exec celery -A config worker -Q "$queue" --concurrency "$concurrency" \
            --hostname "$queue@%h" --loglevel INFO "$@" ;;
    beat)
        metrics_folder keep
        exec celery -A config beat --schedule "$1" --loglevel INFO ;;
    migrate)
        metrics_folder keep
        exec python manage.py migrate --noinput ;;
    pgbouncer)
        pgbouncer_run "$@" ;;
    s3)
        exec python -m moto.server -H "$1" -p "$2" ;;
    *)
        echo "deploy/commands.sh: unknown process $command" >&2
        exit 2 ;;
esac
