#!/bin/sh
# Local base images for machines that reach Debian's package mirror but no image registry:
# built with mmdebstrap from Debian trixie's packages (Python 3.13; freezeframe needs 3.12+)
# and imported into the container engine. Prints the two image names, one per line:
#
#     localhost/freezeframe-base:<key>       python3 (as `python`), venv, pip, CA certificates
#     localhost/freezeframe-postgres:<key>   Debian's postgresql
#
# Usage: docker/local-base.sh ENGINE          (ENGINE: podman or docker)
#
# Each tarball is cached in FREEZEFRAME_BASE_CACHE (default /var/cache/freezeframe-ci) under a
# key that is the sha256 of its mmdebstrap command, so a second run on the same machine only
# imports it (or finds the image already there). Needs root (mmdebstrap's root mode).
set -eu

engine=${1:?usage: docker/local-base.sh ENGINE (podman or docker)}
cache=${FREEZEFRAME_BASE_CACHE:-/var/cache/freezeframe-ci}
mirror=${FREEZEFRAME_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$cache"

# The imported tarball has no image config: give it the PATH, locale and command that the
# official images have, so Dockerfiles written for python:3.12-slim build on it unchanged.
path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

build() {  # build NAME PACKAGES: prints the image's name
    set -- "$1" mmdebstrap --quiet --variant=minbase --include="$2" trixie - "$mirror"
    name=$1
    shift
    key=$(printf '%s\n' "$*" | sha256sum | cut -c1-16)
    image=localhost/$name:$key
    if ! "$engine" image inspect "$image" >/dev/null 2>&1; then
        tarball=$cache/$name-$key.tar
        if [ ! -s "$tarball" ]; then
            "$@" >"$tarball.part"
            mv "$tarball.part" "$tarball"
        fi
        if ! said=$("$engine" import --change "ENV PATH=$path" --change "ENV LANG=C.UTF-8" \
            --change 'CMD ["bash"]' "$tarball" "$image" 2>&1); then
            printf '%s\n' "$said" >&2
            exit 1
        fi
    fi
    printf '%s\n' "$image"
}

build freezeframe-base python3,python3-venv,python3-pip,python-is-python3,ca-certificates
build freezeframe-postgres postgresql,ca-certificates
