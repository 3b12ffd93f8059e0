#!/usr/bin/env bash
# Runs inside the builder image (Dockerfile.builder): lays out, under OUT, what each
# runtime image copies in one COPY, from the binaries in BIN.
#
#   stage-rootfs.sh BIN OUT
#
# Environment: TARGETARCH, the Debian architecture BIN was compiled for (default: this
# machine's). For another architecture the binaries are read with readelf, stripped with
# the cross binutils and run, for the checks, under qemu-user (images/cross-env.sh).
#
# OUT/labeler, OUT/device-plugin, OUT/webhook, OUT/kai-reservation: a root file system for a scratch image:
#   the stripped binary in /usr/local/bin, exactly the shared libraries it needs
#   (DT_NEEDED, transitively, at the paths the loader searches) and the dynamic loader, /etc/passwd and /etc/group with the
#   non-root user 65532, CA certificates, an empty /tmp. No shell, no package manager.
# OUT/backend-shim: /opt/gvirtus-k8s/{bin,lib}, a self-contained gvirtus-backend-shim
#   to drop into any GVirtuS image, whatever its C library (see Dockerfile.backend).
# OUT/kubectl-gvirtus: the kubectl plugin as its krew archive holds it, for any Linux
#   whatever its C library: a launcher script, the binary and every library it needs,
#   the loader included (images/release.sh packs it).
# OUT/tools/print-ids: a static program that prints its user and group ids; the image
#   tests mount it into the images, which have no `id` of their own.
set -euo pipefail
bin=${1:?usage: stage-rootfs.sh BIN OUT}
out=${2:?usage: stage-rootfs.sh BIN OUT}
here=$(cd "$(dirname "$0")" && pwd)
say() { printf '[stage %s] %s\n' "${TARGETARCH:-native}" "$*" >&2; }
# shellcheck source=images/cross-env.sh
. "$here/cross-env.sh" "${TARGETARCH:-}"
# Where the target's loader looks without an ld.so.cache (Debian's multiarch folders
# first); the cross toolchain's own copies last.
library_dirs=("/lib/$TARGET_TRIPLET" "/usr/lib/$TARGET_TRIPLET" /lib /usr/lib "/usr/$TARGET_TRIPLET/lib")

# run_target PROGRAM ARGS...: runs a target binary (under qemu-user when cross-built).
# With SYSROOT set, the emulator resolves the loader and libraries under it.
run_target() {
  if [ -z "$TARGET_EMULATOR" ]; then
    "$@"
  else
    "$TARGET_EMULATOR" ${SYSROOT:+-L "$SYSROOT"} "$@"
  fi
}

# The shared libraries a program needs (DT_NEEDED, transitively), one resolved path per
# line; fails when one is missing. Read, not run (ldd cannot run a foreign binary).
libraries_of() {
  local -A found=()
  local queue=("$1") file name dir path
  while [ ${#queue[@]} -gt 0 ]; do
    file=${queue[0]}
    queue=("${queue[@]:1}")
    for name in $(readelf -d "$file" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]$/\1/p'); do
      [ -n "${found[$name]:-}" ] && continue
      path=""
      for dir in "${library_dirs[@]}"; do
        if [ -e "$dir/$name" ]; then path=$dir/$name; break; fi
      done
      [ -n "$path" ] || { say "$1: $name (needed by $file) is in none of ${library_dirs[*]}"; return 1; }
      found[$name]=$path
      queue+=("$path")
    done
  done
  [ ${#found[@]} = 0 ] || printf '%s\n' "${found[@]}" | sort
}

base_files() {
  local root=$1
  install -d -m 0755 "$root/etc/ssl/certs" "$root/home/nonroot"
  install -d -m 1777 "$root/tmp"
  chown 65532:65532 "$root/home/nonroot"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
    >"$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
}

stage_scratch() {
  local name=$1 program=$2
  local root=$out/$name
  say "$name: $program"
  rm -rf "$root"
  base_files "$root"
  install -D -m 0755 "$bin/$program" "$root/usr/local/bin/$program"
  "${CROSS_PREFIX}strip" --strip-unneeded "$root/usr/local/bin/$program"
  local lib
  for lib in $(libraries_of "$bin/$program"); do
    # -L: the file itself, at the path the loader looks for (no symlink chains).
    install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
  done
  # The loader looks at the path in PT_INTERP (e.g. /lib64/ld-linux-x86-64.so.2).
  local interp
  interp=$(patchelf --print-interpreter "$bin/$program")
  [ -e "$root$interp" ] || install -D -m 0755 "$(readlink -f "$interp")" "$root$interp"
  # Proof that it runs from nothing but what was staged.
  if [ -z "$TARGET_EMULATOR" ]; then
    chroot "$root" "/usr/local/bin/$program" --version >/dev/null
  else
    SYSROOT=$root run_target "$root/usr/local/bin/$program" --version >/dev/null
  fi
}

# gvirtus-backend-shim for GVirtuS images (Ubuntu 22.04 upstream, glibc 2.35; this
# builder has glibc 2.36). A fully static binary is not possible: Debian's cpp-httplib
# exists only as a shared library, and a static glibc cannot dlopen NVML reliably. So
# the shim comes with its own loader and every library it needs, from this builder,
# under /opt/gvirtus-k8s: PT_INTERP points at the bundled loader and DT_RPATH (searched
# before LD_LIBRARY_PATH, which GVirtuS images set to $GVIRTUS_HOME/lib) at the bundled
# libraries. Nothing of the image's C library is used; NVML (libnvidia-ml.so.1, put into
# the container by the NVIDIA runtime) is still found through the image's ld.so.cache.
# The backend it starts is an ordinary exec and uses the image's own loader.
stage_backend_shim() {
  local program=gvirtus-backend-shim prefix=/opt/gvirtus-k8s
  say "backend-shim: $program, self-contained under $prefix"
  rm -rf "$out/backend-shim" "$prefix"
  install -d -m 0755 "$prefix/bin" "$prefix/lib"
  install -m 0755 "$bin/$program" "$prefix/bin/$program"
  "${CROSS_PREFIX}strip" --strip-unneeded "$prefix/bin/$program"
  local lib interp
  for lib in $(libraries_of "$bin/$program"); do
    install -m 0755 "$(readlink -f "$lib")" "$prefix/lib/$(basename "$lib")"
  done
  interp=$(patchelf --print-interpreter "$bin/$program")
  patchelf --set-interpreter "$prefix/lib/$(basename "$interp")" --force-rpath \
    --set-rpath "$prefix/lib" "$prefix/bin/$program"
  # Every library must come from the bundle, even with a hostile LD_LIBRARY_PATH.
  local decoy
  decoy=$(mktemp -d)
  : >"$decoy/libc.so.6"
  local loaded
  loaded=$(LD_LIBRARY_PATH=$decoy LD_TRACE_LOADED_OBJECTS=1 run_target "$prefix/bin/$program")
  rm -rf "$decoy"
  if awk '$2 == "=>" {print $3} $1 ~ /^\// {print $1}' <<<"$loaded" | grep -v "^$prefix/lib/"; then
    say "backend-shim: the libraries above do not come from $prefix/lib:"
    echo "$loaded" >&2
    return 1
  fi
  LD_LIBRARY_PATH=/nonexistent run_target "$prefix/bin/$program" --version >/dev/null
  # The session check (--peer-check): preloaded into gvirtus-backend, so it is loaded by
  # the image's own loader on the image's own C library, never from the bundle above.
  # It needs libc.so.6 alone, at symbol versions every supported image has.
  local guard=$bin/../preload/libgvirtus-peer-guard.so
  install -D -m 0644 "$guard" "$prefix/preload/$(basename "$guard")"
  "${CROSS_PREFIX}strip" --strip-unneeded "$prefix/preload/$(basename "$guard")"
  if "${CROSS_PREFIX}readelf" -d "$guard" | grep NEEDED | grep -v 'libc\.so\.6'; then
    say "backend-shim: $(basename "$guard") needs more than libc.so.6"
    return 1
  fi
  install -d "$out/backend-shim/opt"
  cp -a "$prefix" "$out/backend-shim/opt/"
}

# kubectl-gvirtus for users' machines: krew unpacks the archive wherever it likes, so no
# path can be fixed in the binary (PT_INTERP, DT_RPATH are absolute or $ORIGIN-relative
# only to the binary, and the loader's own path must be absolute). The launcher runs the
# bundled loader on the binary with the bundled libraries; the machine's C library is
# never used, so an older glibc (Ubuntu 22.04's 2.35) runs it too.
stage_plugin() {
  local program=kubectl-gvirtus root=$out/kubectl-gvirtus
  say "kubectl-gvirtus: launcher, binary and libraries"
  rm -rf "$root"
  install -d -m 0755 "$root/lib"
  install -m 0755 "$bin/$program" "$root/lib/$program"
  "${CROSS_PREFIX}strip" --strip-unneeded "$root/lib/$program"
  local lib interp
  for lib in $(libraries_of "$bin/$program"); do
    install -m 0755 "$(readlink -f "$lib")" "$root/lib/$(basename "$lib")"
  done
  interp=$(patchelf --print-interpreter "$bin/$program")
  install -m 0755 "$(readlink -f "$interp")" "$root/lib/$(basename "$interp")"
  cat >"$root/$program" <<LAUNCHER
#!/bin/sh
# kubectl-gvirtus: runs the plugin with the loader and libraries that came with it.
lib=\$(dirname "\$(readlink -f "\$0")")/lib
exec "\$lib/$(basename "$interp")" --library-path "\$lib" "\$lib/$program" "\$@"
LAUNCHER
  chmod 0755 "$root/$program"
  # Proof that it runs from nothing but what was staged.
  if [ -z "$TARGET_EMULATOR" ]; then
    env -i "$root/$program" --version >/dev/null
  else
    run_target "$root/lib/$(basename "$interp")" --library-path "$root/lib" \
      "$root/lib/$program" --version >/dev/null
  fi
}

stage_scratch labeler gvirtus-labeler
stage_scratch device-plugin gvirtus-device-plugin
stage_scratch webhook gvirtus-webhook
stage_scratch kai-reservation gvirtus-kai-reservation
stage_backend_shim
stage_plugin
install -d "$out/tools"
"${CROSS_PREFIX}gcc" -static -O2 -o "$out/tools/print-ids" "$here/print_ids.c"
say "done: $(du -sh "$out"/* | tr '\n\t' '  ')"
