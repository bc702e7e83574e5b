#!/bin/sh
# Makes deploy/secrets/ for compose.yaml: one random PostgreSQL password, written as the password
# file (for the postgres service) and inside the database URL (for the replicas), and the key every
# replica seals registered sources' secrets with (the same for all). Never overwrites.
# The folder is private (700); the files are readable (644) because Compose bind-mounts them as
# they are, and the containers read them as their own users (postgres 999, mcpmux 10001).
set -eu
cd "$(dirname "$0")"
if [ -e secrets/postgres_password ] || [ -e secrets/mcpmux_db_url ]; then
    echo "make-secrets: deploy/secrets/ exists already; remove it to make new secrets" >&2
    exit 1
fi
umask 077
mkdir -p secrets
password=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
printf '%s' "$password" >secrets/postgres_password
printf 'postgresql+psycopg://mcpmux:%s@postgres:5432/mcpmux' "$password" >secrets/mcpmux_db_url
# 32 random bytes, URL-safe base64 (what MCPMUX_SECRET_KEY holds).
head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '\n' >secrets/mcpmux_secret_key
chmod 700 secrets
chmod 644 secrets/postgres_password secrets/mcpmux_db_url secrets/mcpmux_secret_key
echo "make-secrets: wrote deploy/secrets/postgres_password, mcpmux_db_url and mcpmux_secret_key" >&2
