# shellcheck shell=bash
# Shared by the scripts that build test tooling from the Go module proxy (sourced; the
# caller defines say() and sources versions.sh):
#   ensure_go                  puts a Go of at least 1.$GO_MIN_MINOR first on PATH: the machine's, or
#                              one installed into the cache through the module proxy
#   with_progress WHAT CMD...  runs a minutes-long build with a heartbeat every 30 s; its
#                              output is shown only when it fails

# Debian's golang-go is older than that, so it only serves to fetch the toolchain module.
ensure_go() {
  local go_bin minor
  for go_bin in "$(command -v go || true)" /usr/local/go/bin/go "$CLUSTER_CACHE/go/bin/go"; do
    [ -x "$go_bin" ] || continue
    minor=$("$go_bin" env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
    if [ "${minor:-0}" -ge "$GO_MIN_MINOR" ]; then
      PATH=$(dirname "$go_bin"):$PATH
      export PATH
      return
    fi
  done
  say "no Go >= 1.$GO_MIN_MINOR found; installing Debian's golang-go to fetch go$GO_FALLBACK_VERSION"
  command -v /usr/lib/go/bin/go >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
  }
  local mod arch
  arch=$(dpkg --print-architecture)
  mod="golang.org/toolchain@v0.0.1-go$GO_FALLBACK_VERSION.linux-$arch"
  local dir
  dir=$(cd /tmp && GOFLAGS=-mod=mod /usr/lib/go/bin/go mod download -json "$mod" |
    sed -nE 's/^\s*"Dir": "(.*)",?$/\1/p')
  rm -rf "$CLUSTER_CACHE/go" && mkdir -p "$CLUSTER_CACHE" && cp -r "$dir/go" "$CLUSTER_CACHE/go"
  chmod -R u+w "$CLUSTER_CACHE/go"
  export PATH=$CLUSTER_CACHE/go/bin:$PATH
}

with_progress() {
  local what=$1 start=$SECONDS pid log
  shift
  say "building $what ..."
  # Go's output (a line per module downloaded) goes to a log, shown only on failure.
  log=$(mktemp /tmp/gvirtus-build.XXXXXX)
  "$@" >"$log" 2>&1 &
  pid=$!
  local beat=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $((SECONDS - beat)) -ge 30 ] && kill -0 "$pid" 2>/dev/null; then
      say "  still building $what ($((SECONDS - start))s)"
      beat=$SECONDS
    fi
  done
  if ! wait "$pid"; then
    tail -n 30 "$log" >&2
    rm -f "$log"
    say "FAILED building $what"
    return 1
  fi
  rm -f "$log"
  say "built $what in $((SECONDS - start))s"
}
