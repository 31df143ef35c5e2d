#!/usr/bin/env bash
# System tools the deployment and browser tests use, from Debian's packages, installed when missing:
# podman + runc + debootstrap (build and run the real image from a locally made base image),
# prometheus (scrape a live service), haproxy (the load balancer of the replica fleet) and chromium (the
# inspector page's tests, tests/app/ui, driven by Playwright through this system browser: no browser is
# ever downloaded; DejaVu fonts so that its screenshots have text). Needs root and apt-get; elsewhere it
# says what is missing and the tests that need those tools skip (under CI=true they fail instead).
set -euo pipefail
need=()
for tool in podman:podman runc:runc debootstrap:debootstrap prometheus:prometheus haproxy:haproxy chromium:chromium; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool##*:}")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ci-tools: missing ${need[*]} (install them as root with apt-get); their tests will skip" >&2
    exit 0
fi
case " ${need[*]} " in *" chromium "*) need+=(fonts-dejavu-core) ;; esac
echo "ci-tools: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts the prometheus and haproxy services on install where systemd runs; the tests start
# their own.
