#!/bin/sh
# Run once by Patroni on the node that initialized the cluster ($1: a connection string to it): the owner's
# role and database. Replicas get them by replication.
set -eu
psql "$1" -v ON_ERROR_STOP=1 \
  -c "CREATE ROLE owner LOGIN PASSWORD '${OWNER_DB_PASSWORD:-owner}'" \
  -c "CREATE DATABASE commit_owner OWNER owner"
