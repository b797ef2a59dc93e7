#!/usr/bin/env bash
# Installs, idempotently, what a fresh machine needs to build and test mlaserve:
#   Debian packages (compiler, CMake, Ninja, GoogleTest, nlohmann-json, CLI11) and the CUTLASS/CuTe
#   headers at a pinned version (from PyPI's nvidia-cutlass wheel, headers only) into third_party/cutlass.
# Then configures and builds everything into build/ (binaries in build/bin). The CUDA toolkit (nvcc 13.0)
# must already be installed (it is on the project's machines); without it, the build is CPU-only.
# --no-build: install only.
set -euo pipefail
cd "$(dirname "$0")/.."

CUTLASS_VERSION=4.2.0.0   # pinned: bump deliberately, never float
DEB_PACKAGES=(build-essential cmake ninja-build libgtest-dev nlohmann-json3-dev libcli11-dev python3 python3-pip unzip)

need_apt=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$p")
done
if ((${#need_apt[@]})); then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
else
  echo "setup: Debian packages present"
fi

dest=third_party/cutlass
if [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$CUTLASS_VERSION" ] && [ -f "$dest/include/cute/tensor.hpp" ]; then
  echo "setup: CUTLASS $CUTLASS_VERSION headers present in $dest"
else
  echo "setup: fetching CUTLASS $CUTLASS_VERSION headers (nvidia-cutlass wheel)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "nvidia-cutlass==$CUTLASS_VERSION"
  unzip -q "$tmp"/nvidia_cutlass-*.whl 'cutlass_library/source/include/*' -d "$tmp/x"
  rm -rf "$dest"
  mkdir -p "$dest"
  mv "$tmp/x/cutlass_library/source/include" "$dest/include"
  echo "$CUTLASS_VERSION" > "$dest/VERSION"
  echo "setup: CUTLASS headers in $dest/include"
fi

nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$nvcc_bin" ]; then
  echo "setup: $("$nvcc_bin" --version | tail -1) at $nvcc_bin"
else
  echo "setup: no nvcc found: build with -DMLA_CUDA=OFF (CPU references and tests only)"
fi
if [ "${1:-}" != "--no-build" ]; then
  echo "setup: building into build/ (this takes a few minutes on 2 cores)"
  bash scripts/test.sh --build-only
fi
echo "setup: done"
