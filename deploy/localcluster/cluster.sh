#!/usr/bin/env bash
# The local cluster: build once into a cache outside the repository, then start or stop it.
#
#   deploy/localcluster/cluster.sh up [localcluster up flags]   build if needed, start or reuse
#   deploy/localcluster/cluster.sh down                          stop every process
#   deploy/localcluster/cluster.sh status                        exit 0 when up and healthy
#   deploy/localcluster/cluster.sh node-down                     stop the real node only (up adds it again)
#   deploy/localcluster/cluster.sh build                         only build into the cache
#   deploy/localcluster/cluster.sh built                         exit 0 when the cache has the binaries
#   deploy/localcluster/cluster.sh image                         build the real node's images (make image);
#                                                                import them when the cluster runs
#
# Environment: METALLO_CLUSTER_DIR (state, default var/localcluster under the repository),
# METALLO_CLUSTER_CACHE (build cache, default ${XDG_CACHE_HOME:-~/.cache}/metallo/localcluster),
# METALLO_CLUSTER_NODES, METALLO_CLUSTER_NODE_{CPU,MEMORY,PODS,GPUS} (fake Node capacity),
# METALLO_CLUSTER_REAL_NODE (required, if-free or off: the machine's one real node; README.md),
# METALLO_CLUSTER_POD_SUBNET (the real node's pod network, default 10.88.0.0/24).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$here"

GO=${GO:-go}
k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit }' go.mod)
kwok_version=v0.7.0
# Needed free space for a cold build: the binaries (~0.4 GiB), module downloads (~2 GiB) and
# Go's build cache for Kubernetes (~3 GiB) and KServe (~1.5 GiB), with a margin.
need_gib=8

state=${METALLO_CLUSTER_DIR:-$root/var/localcluster}
real_node=${METALLO_CLUSTER_REAL_NODE:-required}
# Debian's packages the real node needs: containerd (with ctr), runc, the CNI plugins and
# iptables: kube-proxy programs the Services' rules with it (iptables mode).
node_packages="containerd runc containernetworking-plugins iptables"
cache_root=${METALLO_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metallo/localcluster}
key=$k8s_version-$( { cat go.sum provisioner/go.sum; echo "kwok $kwok_version"; } | sha256sum | cut -c1-16)
cache=$cache_root/$key
bin=$cache/bin

say() { echo "localcluster: $*" >&2; }
die() { say "$*"; exit 1; }

src_hash() { # the sources of one binary, so an edit rebuilds it
	find "$@" -type f \( \( -name '*.go' ! -name '*_test.go' \) -o -name go.mod -o -name go.sum \) -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}

check_disk() {
	local probe=$1 avail_kb
	while [ ! -d "$probe" ]; do probe=$(dirname "$probe"); done
	avail_kb=$(df -Pk "$probe" | awk 'NR == 2 { print $4 }')
	if [ "$avail_kb" -lt $((need_gib * 1024 * 1024)) ]; then
		die "a cold build of the local cluster needs about ${need_gib} GiB free under $probe (the Kubernetes and KServe build cache, modules and binaries); only $((avail_kb / 1024 / 1024)) GiB are free"
	fi
}

build() {
	command -v "$GO" >/dev/null || die "go is not on PATH"
	mkdir -p "$bin"
	exec 9>"$cache/.build.lock"
	flock 9
	local want_lc want_pv want_ks want_kl=none want_kp=none
	want_lc=$(src_hash go.mod go.sum cmd/localcluster internal)
	want_pv=$(src_hash provisioner)
	want_ks=$(src_hash kserve)
	if [ "$real_node" != off ]; then
		want_kl=$(src_hash go.mod go.sum cmd/kubelet)
		want_kp=$(src_hash go.mod go.sum cmd/kube-proxy)
	fi
	if [ -x "$bin/localcluster" ] && [ "$(cat "$bin/.localcluster.src" 2>/dev/null)" = "$want_lc" ] &&
		[ -x "$bin/provisioner" ] && [ "$(cat "$bin/.provisioner.src" 2>/dev/null)" = "$want_pv" ] &&
		[ -x "$bin/kserve-controller" ] && [ "$(cat "$bin/.kserve-controller.src" 2>/dev/null)" = "$want_ks" ] &&
		{ [ "$want_kl" = none ] || { [ -x "$bin/kubelet" ] && [ "$(cat "$bin/.kubelet.src" 2>/dev/null)" = "$want_kl" ]; }; } &&
		{ [ "$want_kp" = none ] || { [ -x "$bin/kube-proxy" ] && [ "$(cat "$bin/.kube-proxy.src" 2>/dev/null)" = "$want_kp" ]; }; } &&
		[ -x "$bin/kwok" ]; then
		flock -u 9
		return 0
	fi
	check_disk "$cache_root"
	check_disk "$($GO env GOCACHE)"
	local t0=$SECONDS p=${METALLO_BUILD_P:-2}
	local ldflags="-s -w"
	local v=k8s.io/component-base/version major minor
	major=$(echo "${k8s_version#v}" | cut -d. -f1)
	minor=$(echo "${k8s_version#v}" | cut -d. -f2)
	ldflags+=" -X $v.gitVersion=$k8s_version -X $v.gitMajor=$major -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
	ldflags+=" -X $v.buildDate=1970-01-01T00:00:00Z -X $v.gitCommit=$k8s_version"
	if ! [ -x "$bin/localcluster" ] || [ "$(cat "$bin/.localcluster.src" 2>/dev/null)" != "$want_lc" ]; then
		say "building kube-apiserver, kube-controller-manager, kube-scheduler and etcd ($k8s_version) into $bin; the first build takes 15-25 minutes on 2 cores"
		local t1=$SECONDS
		"$GO" build -p "$p" -ldflags "$ldflags" -o "$bin/localcluster.tmp" ./cmd/localcluster
		mv "$bin/localcluster.tmp" "$bin/localcluster"
		echo "$want_lc" >"$bin/.localcluster.src"
		say "built localcluster in $((SECONDS - t1)) s"
	fi
	if [ "$want_kl" != none ] && { ! [ -x "$bin/kubelet" ] || [ "$(cat "$bin/.kubelet.src" 2>/dev/null)" != "$want_kl" ]; }; then
		say "building the real node's kubelet ($k8s_version); 1-4 minutes after the control plane (shared build cache)"
		local t1=$SECONDS
		"$GO" build -p "$p" -ldflags "$ldflags" -o "$bin/kubelet.tmp" ./cmd/kubelet
		mv "$bin/kubelet.tmp" "$bin/kubelet"
		echo "$want_kl" >"$bin/.kubelet.src"
		say "built the kubelet in $((SECONDS - t1)) s"
	fi
	if [ "$want_kp" != none ] && { ! [ -x "$bin/kube-proxy" ] || [ "$(cat "$bin/.kube-proxy.src" 2>/dev/null)" != "$want_kp" ]; }; then
		say "building the real node's kube-proxy ($k8s_version); about a minute after the kubelet (shared build cache)"
		local t1=$SECONDS
		"$GO" build -p "$p" -ldflags "$ldflags" -o "$bin/kube-proxy.tmp" ./cmd/kube-proxy
		mv "$bin/kube-proxy.tmp" "$bin/kube-proxy"
		echo "$want_kp" >"$bin/.kube-proxy.src"
		say "built kube-proxy in $((SECONDS - t1)) s"
	fi
	if ! [ -x "$bin/provisioner" ] || [ "$(cat "$bin/.provisioner.src" 2>/dev/null)" != "$want_pv" ]; then
		say "building the volume provisioner"
		(cd provisioner && "$GO" build -p "$p" -ldflags "-s -w" -o "$bin/provisioner.tmp" .)
		mv "$bin/provisioner.tmp" "$bin/provisioner"
		echo "$want_pv" >"$bin/.provisioner.src"
	fi
	if ! [ -x "$bin/kserve-controller" ] || [ "$(cat "$bin/.kserve-controller.src" 2>/dev/null)" != "$want_ks" ]; then
		# Its own module (kserve/go.mod: KServe's replace lines, k8s.io/* at the control plane's
		# version); keyed by the hash of its sources, go.mod and go.sum.
		say "building KServe's InferenceService controller and webhooks (kserve/); the first build takes about 7 CPU-minutes (4-10 minutes on 2 cores)"
		(cd kserve && "$GO" build -p "$p" -ldflags "-s -w" -o "$bin/kserve-controller.tmp" .)
		mv "$bin/kserve-controller.tmp" "$bin/kserve-controller"
		echo "$want_ks" >"$bin/.kserve-controller.src"
	fi
	if ! [ -x "$bin/kwok" ]; then
		say "installing KWOK $kwok_version"
		(cd "$cache" && GOBIN="$bin" GOFLAGS=-mod=mod "$GO" install -p "$p" -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kwok_version")
	fi
	say "built in $((SECONDS - t0)) s ($(du -sh "$bin" | cut -f1) in $bin)"
	flock -u 9
}

# ensure_node_packages installs Debian's containerd, runc and CNI plugins when one is missing.
ensure_node_packages() {
	[ "$real_node" = off ] && return 0
	if command -v containerd >/dev/null && command -v ctr >/dev/null && command -v runc >/dev/null && [ -x /usr/lib/cni/bridge ] &&
		command -v iptables-restore >/dev/null; then
		return 0
	fi
	command -v apt-get >/dev/null || die "the real node needs Debian's $node_packages (no apt-get here); or start without it: METALLO_CLUSTER_REAL_NODE=off"
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	say "installing Debian's $node_packages for the real node"
	# The lock serialises the clusters of this machine installing at once.
	if ! flock /var/lib/metallo-apt.lock $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $node_packages >/dev/null; then
		flock /var/lib/metallo-apt.lock $sudo apt-get update >/dev/null
		flock /var/lib/metallo-apt.lock $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $node_packages >/dev/null ||
			die "apt-get install $node_packages failed"
	fi
}

# build_images builds the real node's images (deploy/images) and writes their manifest into the
# state directory; debootstrap is installed first when missing.
build_images() {
	if ! command -v debootstrap >/dev/null; then
		command -v apt-get >/dev/null || die "building the images needs Debian's debootstrap (no apt-get here)"
		local sudo=""
		[ "$(id -u)" = 0 ] || sudo=sudo
		say "installing Debian's debootstrap (the platform image's root file system)"
		flock /var/lib/metallo-apt.lock $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap >/dev/null ||
			{ flock /var/lib/metallo-apt.lock $sudo apt-get update >/dev/null &&
				flock /var/lib/metallo-apt.lock $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap >/dev/null; } ||
			die "apt-get install debootstrap failed"
	fi
	mkdir -p "$state"
	(cd "$root" && "$GO" run ./deploy/images --manifest "$state/images.json") >&2
}

kserve_module() { # the kserve version the main module requires
	local v
	v=$(awk '$1 == "github.com/kserve/kserve" { print $2; exit }' "$root/go.mod" 2>/dev/null || true)
	echo "github.com/kserve/kserve@${v:-v0.16.0}"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
build)
	build
	;;
up)
	build || die "the build failed (see above)"
	images=()
	if [ "$real_node" != off ]; then
		ensure_node_packages
		build_images || die "the images failed to build (see above)"
		images=(--images "$state/images.json")
	fi
	# The state directory sits inside the main module (var/localcluster): a go.mod of its own keeps
	# `go vet ./...` and `go test ./...` out of it, where the provisioner creates and removes volume
	# directories while the go tool walks the tree.
	mkdir -p "$state"
	[ -f "$state/go.mod" ] || printf 'module metallo.invalid/localcluster-state\n' >"$state/go.mod"
	exec "$bin/localcluster" up --dir "$state" --bin-dir "$bin" \
		--kwok-stages "$here/kwok/stages.yaml" \
		--kserve-module "$(kserve_module)" \
		--manifests "$root/deploy/cluster" --real-node "$real_node" "${images[@]}" "$@"
	;;
image)
	build_images || die "the images failed to build (see above)"
	# A running cluster with the real node imports them now (up reuses it).
	if [ -x "$bin/localcluster" ] && "$bin/localcluster" status --dir "$state" >/dev/null 2>&1; then
		exec "$bin/localcluster" up --dir "$state" --bin-dir "$bin" \
			--kwok-stages "$here/kwok/stages.yaml" --kserve-module "$(kserve_module)" \
			--manifests "$root/deploy/cluster" --real-node "$real_node" --images "$state/images.json"
	fi
	;;
down | status | node-down)
	if [ -x "$bin/localcluster" ]; then
		exec "$bin/localcluster" "$cmd" --dir "$state" "$@"
	fi
	# No binary for this source tree: stop whatever a previous build left running.
	for other in "$cache_root"/*/bin/localcluster; do
		[ -x "$other" ] && exec "$other" "$cmd" --dir "$state" "$@"
	done
	if [ "$cmd" = status ]; then echo "down: not built"; exit 1; fi
	say "nothing to stop (never built)"
	;;
cache-dir)
	echo "$cache"
	;;
built) # exit 0 when the binaries for this go.sum are in the cache (an edit only relinks)
	[ -x "$bin/localcluster" ] && [ -x "$bin/provisioner" ] && [ -x "$bin/kserve-controller" ] && [ -x "$bin/kwok" ] && { [ "$real_node" = off ] || { [ -x "$bin/kubelet" ] && [ -x "$bin/kube-proxy" ]; }; }
	;;
*)
	echo "usage: $0 up|down|status|build|built|image|cache-dir" >&2
	exit 2
	;;
esac
