#!/usr/bin/env bash
# Installs what mgc's build and tests need from Debian 12's packages.
# Idempotent, and silent when everything is already there.
set -euo pipefail

packages=(
  cmake ninja-build g++ python3
  llvm-14-dev llvm-14-tools   # LLVM Support (static), FileCheck, lit
  libfmt-dev doctest-dev
  libopenblas-dev             # GEMM of the CPU backend (linked statically)
  libopenmpi-dev openmpi-bin  # one rank per process (mpirun)
  clang-14 libclang-rt-14-dev # the libFuzzer target (scripts/fuzz.sh)
  zlib1g-dev libtinfo-dev     # what LLVM's CMake config links against
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
