#!/usr/bin/env bash
# Kernel memory of parapetd's maps with and without the netfilter hooks'
# classifier images (--no-hook-images), docs/benchmarks.md §25.
#
#   bench/dataplane/hook_images_memory.sh [PARAPETD] [RUNS] [IMAGE_MIB]
#
# Each run starts parapetd in a fresh network namespace (state and pins in
# a temporary directory), waits until it answers, applies a one-rule
# ruleset and attaches it at XDP on lo (which loads the program), reads the kernel's own
# account of every BPF map it holds (/proc/PID/fdinfo: memlock), the image
# map's share of it (the array of 4 KiB pages) and parapetd's VmRSS, then
# stops it and removes its pins. Needs root. Prints one TSV line per run.
set -euo pipefail
PARAPETD=${1:-target/release/parapetd}
RUNS=${2:-3}
MIB=${3:-16}
PARAPET=$(dirname "$PARAPETD")/parapet

measure() { # MODE FLAGS...
	local mode=$1; shift
	local ns="k14mem$$" dir
	dir=$(mktemp -d)
	ip netns add "$ns"
	ip netns exec "$ns" ip link set lo up
	# nsenter --net: the pins must not live in ip netns exec's private
	# mount namespace (docs/daemon.md)
	nsenter --net=/run/netns/"$ns" "$PARAPETD" --socket "$dir/s" \
		--state-dir "$dir/state" --pin-dir /sys/fs/bpf/k14mem$$ \
		--no-fsync --image-mib "$MIB" "$@" 2>"$dir/log" &
	local pid=$!
	for _ in $(seq 1 1200); do
		"$PARAPET" --socket "$dir/s" stats --json >/dev/null 2>&1 && break
		sleep 0.1
	done
	# nothing touches BPF before an attach: one at XDP on lo loads the
	# program (the same in both modes)
	printf '*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp --dport 9 -j DROP\nCOMMIT\n' >"$dir/rules"
	"$PARAPET" --socket "$dir/s" apply "$dir/rules" >/dev/null
	"$PARAPET" --socket "$dir/s" attach lo --hook xdp >/dev/null
	local total=0 image=0 seen=" "
	for f in /proc/$pid/fdinfo/*; do
		local m t v e id
		m=$(awk '/^memlock:/{print $2}' "$f" 2>/dev/null || true)
		[ -n "$m" ] || continue
		t=$(awk '/^map_type:/{print $2}' "$f")
		[ -n "$t" ] || continue
		# one map may be open several times (aya's fd, the pins', the
		# netfilter program's copies): count each map once
		id=$(awk '/^map_id:/{print $2}' "$f")
		case "$seen" in *" $id "*) continue ;; esac
		seen="$seen$id "
		total=$((total + m))
		v=$(awk '/^value_size:/{print $2}' "$f")
		e=$(awk '/^max_entries:/{print $2}' "$f")
		if [ "$t" = 2 ] && [ "$v" = 4096 ] && [ "$e" -gt 1 ]; then
			image=$((image + m))
		fi
	done
	local rss
	rss=$(awk '/^VmRSS:/{print $2}' /proc/$pid/status)
	kill "$pid"; wait "$pid" 2>/dev/null || true
	nsenter --net=/run/netns/"$ns" "$PARAPETD" --remove-pinned \
		--state-dir "$dir/state" --pin-dir /sys/fs/bpf/k14mem$$ >/dev/null 2>&1 || true
	rm -rf /sys/fs/bpf/k14mem$$ 2>/dev/null || true
	ip netns del "$ns"
	rm -rf "$dir"
	printf '%s\t%d\t%d\t%d\n' "$mode" $((total / 1024)) $((image / 1024)) "$rss"
}

printf 'mode\tmaps_memlock_kib\timage_map_kib\tvmrss_kib\n'
for _ in $(seq 1 "$RUNS"); do
	measure hook-images
	measure no-hook-images --no-hook-images
done
