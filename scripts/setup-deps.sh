#!/usr/bin/env bash
# Installs the Debian 12 packages Pagoda builds and tests with. Idempotent: does nothing when all
# packages are present. Run as root or with sudo available.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libpcre2-dev
  libboost1.81-dev libxxhash-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3
  python3-matplotlib  # bench/plot_serve.py (plots of pagoda bench serve results) and its test
  python3-jsonschema  # the structured-output tests validate outputs with an independent JSON Schema validator
  prometheus  # promtool, for the /metrics check of the server tests
  clang libclang-rt-14-dev libomp-dev  # the fuzz preset: libFuzzer with ASan + UBSan (make fuzz)
)
# The server tests run the official `openai` npm client under node; a node from elsewhere (e.g. NodeSource)
# is fine, so Debian's packages are only added when node or npm is missing.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
