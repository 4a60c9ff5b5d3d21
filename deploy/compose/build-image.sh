#!/usr/bin/env bash
# Builds the image docker-compose.yml runs: FROM scratch around the `preemptor` and
# `preemptor-workload` binaries, with the dynamic loader and the shared libraries ldd names
# for them, copied from this machine. No registry is involved.
#
#   deploy/compose/build-image.sh [--bin-dir DIR] [TAG]
#
# TAG defaults to preemptor:local (docker-compose.yml's default, see PREEMPTOR_IMAGE).
# Without --bin-dir it builds the release binaries first; --bin-dir takes them from DIR.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin_dir=
tag=preemptor:local
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir=${2:?--bin-dir needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,8p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "build-image.sh: unknown option $1" >&2; exit 2 ;;
    *) tag=$1; shift ;;
  esac
done

if [ -z "$bin_dir" ]; then
  (cd "$root" && cargo build --release --locked --bin preemptor --bin preemptor-workload)
  bin_dir="$root/target/$(rustc --print host-tuple)/release"
fi
for b in preemptor preemptor-workload; do
  if [ ! -x "$bin_dir/$b" ]; then
    echo "build-image.sh: no executable $bin_dir/$b" >&2
    exit 1
  fi
done

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir "$ctx/rootfs"
cp "$bin_dir/preemptor" "$bin_dir/preemptor-workload" "$ctx/rootfs/"
# `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` and `/lib64/ld-linux-x86-64.so.2 (0x...)`.
libs=$(ldd "$bin_dir/preemptor" "$bin_dir/preemptor-workload" |
  awk '/=> not found/ { print "missing " $1; next }
       $2 == "=>" && $3 ~ /^\// { print $3; next }
       $1 ~ /^\// && $1 !~ /:$/ { print $1 }' | sort -u)
if grep -q '^missing ' <<<"$libs"; then
  echo "build-image.sh: libraries not found on this machine: $(grep '^missing ' <<<"$libs" | cut -d' ' -f2 | tr '\n' ' ')" >&2
  exit 1
fi
for lib in $libs; do
  mkdir -p "$ctx/rootfs$(dirname "$lib")"
  cp -L "$lib" "$ctx/rootfs$lib"
done
cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/preemptor"]
DOCKERFILE
docker build --quiet --label io.preemptor.created-by=build-image.sh -t "$tag" "$ctx" >/dev/null
echo "built $tag"
