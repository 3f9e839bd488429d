#!/usr/bin/env bash
# scripts/image.sh TAG...: build leaf's container image (Containerfile)
# from bin/leaf (make build) with podman, or docker when there is no
# podman, tagged TAG... . The build context is made here: the binary, the
# CA certificates of this host (Debian's ca-certificates, installed when
# missing), a passwd entry for the user leaf and the empty /data. VERSION
# and REVISION label the image.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

[ $# -gt 0 ] || { echo "usage: scripts/image.sh TAG..." >&2; exit 2; }
[ -x bin/leaf ] || { echo "no bin/leaf: run make build first" >&2; exit 1; }
# CONTAINER_ENGINE overrides the choice.
engine=${CONTAINER_ENGINE:-$(command -v podman || command -v docker || true)}
[ -n "$engine" ] || { echo "no podman or docker: install podman (apt-get install podman runc)" >&2; exit 1; }
certs=/etc/ssl/certs/ca-certificates.crt
[ -f "$certs" ] || need_pkgs update-ca-certificates ca-certificates
[ -f "$certs" ] || { echo "no $certs: install ca-certificates" >&2; exit 1; }

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/data"
cp bin/leaf "$ctx/rootfs/usr/local/bin/leaf"
cp "$certs" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/:/sbin/nologin\nleaf:x:65532:65532:leaf:/data:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nleaf:x:65532:\n' >"$ctx/rootfs/etc/group"
chmod 1777 "$ctx/rootfs/tmp"
chmod 0750 "$ctx/data"
cp Containerfile "$ctx/Containerfile"

args=(build -f "$ctx/Containerfile"
	--build-arg "VERSION=${VERSION:-dev}" --build-arg "REVISION=${REVISION:-}")
# HEALTHCHECK is a Docker-format field: podman's default OCI format drops
# it. No layer cache: the build is two copies, and cached layers would
# outlive the images.
[ "$(basename "$engine")" = podman ] && args+=(--format docker --layers=false)
for tag in "$@"; do args+=(-t "$tag"); done
"$engine" "${args[@]}" "$ctx"
