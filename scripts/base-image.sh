#!/usr/bin/env bash
# Build the local stand-in for python:3.11-slim-bookworm (Debian bookworm + its Python 3.11) with
# debootstrap and import it into podman as localhost/rsa-base:bookworm, unless it is there already.
# Only for machines that cannot pull images (the test machines): a real host builds the Dockerfile
# from its default BASE_IMAGE. See shared docs/containers.md for why each flag is here.
#   bash scripts/base-image.sh [TAG]
set -euo pipefail
tag="${1:-localhost/rsa-base:bookworm}"
if podman image exists "$tag"; then
    echo "base image $tag: present"
    exit 0
fi
rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    bookworm "$rootfs" >/dev/null
tar -C "$rootfs" -c . | podman import --quiet - "$tag" >/dev/null
echo "base image $tag: built"
