#!/usr/bin/env bash
# Builds the pinned tools from the Go module proxy into bin/: the control
# plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager), a
# real node (kubelet, containerd, ctr, containerd-shim-runc-v2, runc and the
# CNI plugins bridge, host-local and loopback in bin/cni/), OpenTofu, the
# dev tools (gotestsum, staticcheck, tfplugindocs), promtool (the alerting
# rules' unit tests, deploy/monitoring/tests/), Flux's source-controller
# (the reconcile's Flux source test), and the other projects'
# CRD files the tests install (crds: tools/crds/crds.txt, into bin/crds/);
# on demand, the peers of make bench-peers (kubectl, and fluxssa: Flux's
# server-side-apply engine, tools/peers).
# Nothing is downloaded as a release binary. A tool is rebuilt only when its stamp (module go.mod +
# go.sum, build flags and Go version) changed, so a warm run takes a second.
#
# usage: tools/build.sh [tool ...]   (default: all)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools_dir="$root/tools"
bin="$root/bin"
stamps="$bin/.stamps"
mkdir -p "$bin" "$stamps"

k8s_version=v1.37.2
containerd_version=v2.4.2

# Built on demand (tools/build.sh kubectl fluxssa), not by make test.
peer_tools="kubectl fluxssa"

all_tools="gotestsum staticcheck tfplugindocs promtool etcd kube-apiserver kube-scheduler kube-controller-manager kubelet containerd ctr containerd-shim-runc-v2 runc cni/bridge cni/host-local cni/loopback tofu source-controller crds"

# module dir | package | ldflags | build tags | cgo (0/1)
tool_spec() {
  local v=k8s.io/component-base/version
  case "$1" in
    tofu) echo "opentofu|github.com/opentofu/opentofu/cmd/tofu|-X github.com/opentofu/opentofu/version.dev=no||0" ;;
    etcd) echo "etcd|go.etcd.io/etcd/server/v3|||0" ;;
    kube-apiserver|kube-scheduler|kube-controller-manager|kubelet|kubectl)
      echo "kubernetes|k8s.io/kubernetes/cmd/$1|-X $v.gitVersion=$k8s_version -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z||0" ;;
    containerd|ctr)
      echo "containerd|github.com/containerd/containerd/v2/cmd/$1|-X github.com/containerd/containerd/v2/version.Version=$containerd_version|urfave_cli_no_docs no_btrfs|0" ;;
    containerd-shim-runc-v2)
      echo "containerd|github.com/containerd/containerd/v2/cmd/$1|-X github.com/containerd/containerd/v2/version.Version=$containerd_version|urfave_cli_no_docs no_grpc|0" ;;
    # runc's nsenter is C; seccomp needs libseccomp-dev (make prereqs).
    # Upstream's default tag libpathrs is a Rust library: left out.
    runc) echo "runc|github.com/opencontainers/runc||seccomp urfave_cli_no_docs|1" ;;
    cni/bridge) echo "cni|github.com/containernetworking/plugins/plugins/main/bridge|||0" ;;
    cni/loopback) echo "cni|github.com/containernetworking/plugins/plugins/main/loopback|||0" ;;
    cni/host-local) echo "cni|github.com/containernetworking/plugins/plugins/ipam/host-local|||0" ;;
    # Flux's source-controller: the artifacts `gpuslice reconcile -flux-source`
    # reads (engine/reconcile's Flux test). CGO off, as upstream's image.
    source-controller) echo "flux|github.com/fluxcd/source-controller|||0" ;;
    gotestsum) echo "devtools|gotest.tools/gotestsum|||0" ;;
    staticcheck) echo "devtools|honnef.co/go/tools/cmd/staticcheck|||0" ;;
    tfplugindocs) echo "devtools|github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs|||0" ;;
    # Only `promtool test rules` is used: no service discovery built in.
    promtool) echo "prometheus|github.com/prometheus/prometheus/cmd/promtool|-X github.com/prometheus/common/version.Version=3.16.0|remove_all_sd|0" ;;
    # The peers of make bench-peers, built only by it.
    fluxssa) echo "peers|github.com/gpuslice/gpuslice/tools/peers/fluxssa|||0" ;;
    *) echo "unknown tool '$1' (known: $all_tools $peer_tools)" >&2; return 1 ;;
  esac
}

stamp_of() {
  local dir=$1 spec=$2
  # A module's own sources (tools/peers) count too; the others have none.
  { go env GOVERSION; echo "$spec"; cat "$tools_dir/$dir/go.mod" "$tools_dir/$dir/go.sum"
    find "$tools_dir/$dir" -name '*.go' | sort | xargs -r cat; } | sha256sum | cut -c1-16
}

# fetch_crds copies each CRD file of tools/crds/crds.txt out of its module
# (downloaded into Go's module cache) into bin/crds/, once per change of the
# list: the tests read them there, never through the network.
fetch_crds() {
  local list="$tools_dir/crds/crds.txt" stamp="$stamps/crds" want out="$bin/crds"
  want=$(sha256sum <"$list" | cut -c1-16)
  if [[ -d "$out" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "tools: crds are up to date"
    return
  fi
  echo "tools: fetching the CRD files of tools/crds/crds.txt from their Go modules"
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  local module version path dir
  while read -r module version path; do
    [[ -z "$module" || "$module" == \#* ]] && continue
    dir=$(cd "$tools_dir/crds" && go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    if [[ -z "$dir" || ! -f "$dir/$path" ]]; then
      echo "tools: $path is not in $module@$version (is the Go module proxy reachable? go mod download -json $module@$version says why)" >&2
      return 1
    fi
    cp "$dir/$path" "$out.tmp/"
  done <"$list"
  rm -rf "$out" && mv "$out.tmp" "$out"
  echo "$want" >"$stamp"
}

build_one() {
  local name=$1 spec dir pkg ldflags tags cgo want stamp
  if [[ "$name" == crds ]]; then
    fetch_crds
    return
  fi
  spec=$(tool_spec "$name")
  IFS='|' read -r dir pkg ldflags tags cgo <<<"$spec"
  want=$(stamp_of "$dir" "$spec")
  stamp="$stamps/${name//\//_}"
  if [[ -x "$bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "tools: $name is up to date"
    return
  fi
  echo "tools: building $name from $pkg (cold builds take minutes on 2 cores)"
  local start=$SECONDS
  mkdir -p "$(dirname "$bin/$name")"
  (cd "$tools_dir/$dir" && CGO_ENABLED=$cgo go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$want" >"$stamp"
  echo "tools: built $name in $((SECONDS - start))s"
}

if [[ $# -eq 0 ]]; then
  set -- $all_tools
fi
for t in "$@"; do build_one "$t"; done
