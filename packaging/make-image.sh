#!/bin/bash
# make-image.sh BINARY NAME:TAG USER OUT.tar: an image with no base, pulled from nowhere: the binary as
# /usr/bin/<name>, the shared libraries it needs (found by ldd, not listed by hand) at their paths, the CA
# certificates, /etc/passwd and /etc/group with root and nonroot (65532), and USER (a uid). The tarball is an
# OCI image layout (oci-layout, index.json, blobs/sha256/) that also carries Docker's manifest.json, so both
# OCI tools and `docker load` (20.10 reads only manifest.json) take it. Reproducible: fixed times and owners.
set -euo pipefail
binary=$1 ref=$2 user=$3 out=$4
name=${ref%%:*}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root/usr/bin" "$root/etc/ssl/certs" "$root/tmp" "$work/oci/blobs/sha256"
chmod 1777 "$root/tmp"
cp "$binary" "$root/usr/bin/$(basename "$binary")"
strip --strip-debug "$root/usr/bin/$(basename "$binary")" 2>/dev/null || true
# Every library ldd resolves, and the loader (the line without "=>").
ldd "$binary" | awk '/=> \// {print $3} !/=>/ && $1 ~ /^\// {print $1}' | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$root" -cf "$work/layer.tar" .
blob() { # file -> its sha256, the file moved into blobs/
  local d
  d=$(sha256sum "$1" | cut -d' ' -f1)
  mv "$1" "$work/oci/blobs/sha256/$d"
  echo "$d"
}
size() { stat -c %s "$work/oci/blobs/sha256/$1"; }
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
layer=$(blob "$work/layer.tar")
printf '{"architecture":"%s","os":"linux","config":{"User":"%s","Env":["PATH=/usr/bin:/bin"],"Entrypoint":["/usr/bin/%s"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"packaging/make-image.sh"}]}' \
  "$arch" "$user" "$(basename "$binary")" "$layer" >"$work/config.json"
config=$(blob "$work/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$config" "$(size "$config")" "$layer" "$(size "$layer")" >"$work/manifest"
manifest=$(blob "$work/manifest")
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s","io.containerd.image.name":"%s"}}]}' \
  "$manifest" "$(size "$manifest")" "${ref#*:}" "$ref" >"$work/oci/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"
printf '[{"Config":"blobs/sha256/%s","RepoTags":["%s"],"Layers":["blobs/sha256/%s"]}]' "$config" "$ref" "$layer" \
  >"$work/oci/manifest.json"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/oci" -cf "$out.tmp" .
mv -f "$out.tmp" "$out"
echo "built $out ($name, user $user)"
