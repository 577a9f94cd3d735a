#!/usr/bin/env bash
# The tests' Git host: Gitea built once into a cache outside the repository.
#
#   deploy/githost/githost.sh build   build if needed; prints the cache directory (bin/gitea, share/)
#   deploy/githost/githost.sh built   exit 0 when the cache has the binary for this go.sum
#   deploy/githost/githost.sh dir     print the cache directory
#
# Environment: METALLO_GITHOST_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/metallo/githost),
# METALLO_BUILD_P (go build -p, default 2).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

GO=${GO:-go}
version=$(awk '$1 == "code.gitea.io/gitea" { print $2; exit }' go.mod)
cache_root=${METALLO_GITHOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metallo/githost}
key=$version-$( { cat go.mod go.sum; "$GO" env GOVERSION; } | sha256sum | cut -c1-16)
cache=$cache_root/$key

say() { echo "githost: $*" >&2; }
die() { say "$*"; exit 1; }

built() { [ -x "$cache/bin/gitea" ] && [ -d "$cache/share/options" ] && [ -d "$cache/share/templates" ]; }

build() {
	command -v "$GO" >/dev/null || die "go is not on PATH"
	mkdir -p "$cache"
	exec 9>"$cache/.build.lock"
	flock 9
	if built; then
		flock -u 9
		return 0
	fi
	local t0=$SECONDS p=${METALLO_BUILD_P:-2}
	say "building Gitea $version into $cache (the first build takes about 10 minutes on 2 cores)"
	mkdir -p "$cache/bin"
	"$GO" build -p "$p" -trimpath -ldflags "-s -w -X main.Version=${version#v}" -o "$cache/bin/gitea.tmp" code.gitea.io/gitea
	# Without the bindata tag Gitea reads its options and templates from its static root.
	local src
	src=$("$GO" list -m -f '{{.Dir}}' code.gitea.io/gitea)
	rm -rf "$cache/share.tmp"
	mkdir -p "$cache/share.tmp"
	cp -R "$src/options" "$src/templates" "$cache/share.tmp/"
	chmod -R u+w "$cache/share.tmp"
	rm -rf "$cache/share"
	mv "$cache/share.tmp" "$cache/share"
	mv "$cache/bin/gitea.tmp" "$cache/bin/gitea"
	say "built in $((SECONDS - t0)) s ($(du -sh "$cache" | cut -f1) in $cache)"
	flock -u 9
}

case "${1:-}" in
build)
	build
	echo "$cache"
	;;
built)
	built
	;;
dir)
	echo "$cache"
	;;
*)
	echo "usage: $0 build|built|dir" >&2
	exit 2
	;;
esac
