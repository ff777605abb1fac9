#!/usr/bin/env bash
# Installs what parapet's build, tests and demo need on a fresh Debian machine.
# Idempotent: skips apt when everything is already there.
set -euo pipefail
want="${1:-test}"
pkgs=(clang llvm libbpf-dev linux-libc-dev pkg-config zlib1g-dev iproute2)
if [ "$want" = test ]; then
  pkgs+=(iptables nftables ipset fail2ban python3 ethtool)
  # The metrics test scrapes parapetd with a real Prometheus; `make deb`
  # checks the package with lintian; the package test reads `man parapet`
  # (man-db) and checks the unit with systemd-analyze (systemd).
  pkgs+=(prometheus lintian man-db systemd)
  # `parapet top` is tested in a real terminal.
  pkgs+=(tmux)
  # The fleet tests run a real NATS JetStream server.
  pkgs+=(nats-server)
  # fleet_tls.rs makes a throwaway CA and certificates with openssl.
  pkgs+=(openssl)
  # The CrowdSec tests run a real Local API (and benchmark the real
  # nftables bouncer); installed offline, services not started (below).
  pkgs+=(crowdsec crowdsec-firewall-bouncer)
  # The FORWARD-position bench smoke test streams TCP with iperf3.
  pkgs+=(iperf3)
  # pinning.rs: a program loaded by libxdp's xdp-loader is not clobbered.
  pkgs+=(xdp-tools)
elif [ "$(id -u)" = 0 ]; then
  # The demo ends with the side-by-side kernel benchmark when it can;
  # iperf3 is the TCP stream of its FORWARD-position experiment.
  pkgs+=(iptables nftables ipset ethtool iperf3)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  if [[ " ${missing[*]} " == *" crowdsec "* ]]; then
    # No Central API registration (there may be no internet): Debian's
    # documented opt-out is this file holding a comment (README.Debian).
    $SUDO mkdir -p /etc/crowdsec
    [ -s /etc/crowdsec/online_api_credentials.yaml ] ||
      echo '# no thanks: parapet tests run the Local API offline' |
      $SUDO tee /etc/crowdsec/online_api_credentials.yaml >/dev/null
  fi
  # The tests start their own daemons: no service may start on install.
  norc=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    norc=1
  fi
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ -z "$norc" ] || $SUDO rm -f /usr/sbin/policy-rc.d
  if [ -d /run/systemd/system ]; then
    for u in crowdsec crowdsec-firewall-bouncer; do
      $SUDO systemctl disable --now "$u.service" >/dev/null 2>&1 || true
      $SUDO systemctl mask "$u.service" >/dev/null 2>&1 || true
    done
  fi
fi
if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] || {
    echo "deps: cargo not found; install Rust (rustup) first" >&2
    exit 1
  }
fi
rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy >/dev/null 2>&1 || true
