#!/bin/sh
# Times `parapet lint` and `parapet diff` (against a copy with 1 % of the
# rules reordered or edited, made by perturb.py) on ClassBench sets, for one
# or more parapet binaries interleaved in one run: median, min and max wall
# seconds of ROUNDS runs, the exit code and whether the answer is complete,
# then the median, min and max CPU seconds (user + system; on a machine
# shared with other work the wall time mostly measures the others).
#
# A set named NAME+mixed is NAME with every second rule DROP (written by
# mixed_verdicts.sh with the first binary), diffed against perturb.py's
# copy of it with 1 % of its rules reordered or given another verdict,
# protocol or a jump. A set named NAME+mixed+flow is that pair cut into
# user chains entered by jumps and gotos, with RETURNs in the middle of
# them (control_flow.py).
# LINT_ARGS adds arguments to every lint (e.g. "--correlations 0"); CMDS
# limits the commands timed (default "lint diff"). Every run is also killed
# KILL_AFTER seconds after it started (default TIME_LIMIT + 60: the parse,
# the final merge and the report are not under --time-limit); a killed
# run's "complete" is "killed". KEEP=DIR keeps each command's last report
# as DIR/BIN.SET.COMMAND.json (to compare two binaries' answers).
#
# usage: bench/analysis/run.sh "BIN..." "SET..." [ROUNDS] [TIME_LIMIT]
#   e.g. bench/analysis/run.sh "/tmp/parapet.before target/release/parapet" \
#        "acl1_10k fw1_10k ipc1_10k acl1_100k fw1_10k+mixed" 3 30
set -eu
bins=$1 sets=$2 rounds=${3:-3} limit=${4:-60}
kill_after=${KILL_AFTER:-$((limit + 60))}
here=$(cd "$(dirname "$0")" && pwd)
data=${DATA:-$here/../../../shared/data/classbench}
tmp=${TMPDIR:-/tmp}/parapet-analysis-bench
mkdir -p "$tmp"
printf 'bin\tset\tcommand\tmedian_s\tmin_s\tmax_s\texit\tcomplete\tcpu_median_s\tcpu_min_s\tcpu_max_s\tpeak_rss_kb\n'
first_bin=${bins%% *}
for set in $sets; do
    mixed=${set%+flow}
    base=${mixed%+mixed}
    [ -s "$tmp/$base" ] || gunzip -c "$data/$base.gz" > "$tmp/$base" 2>/dev/null || cp "$data/$base" "$tmp/$base"
    [ -s "$tmp/$base.b" ] || python3 "$here/perturb.py" "$tmp/$base" "$tmp/$base.b"
    if [ "$mixed" != "$base" ]; then
        [ -s "$tmp/$mixed" ] || "$here/mixed_verdicts.sh" "$first_bin" "$tmp/$base" "$tmp/$mixed"
        # The mixed set's own perturbation: reorderings and edits that change
        # verdicts (ACCEPT/DROP/REJECT, ICMP and GRE, a jump), perturb.py on
        # the iptables-save text.
        [ -s "$tmp/$mixed.b" ] || python3 "$here/perturb.py" "$tmp/$mixed" "$tmp/$mixed.b"
    fi
    if [ "$set" != "$mixed" ]; then
        # The mixed pair cut into user chains entered by jumps and gotos,
        # with RETURNs in them (control_flow.py: Docker's and ufw's shapes).
        [ -s "$tmp/$set" ] || python3 "$here/control_flow.py" "$tmp/$mixed" "$tmp/$set"
        [ -s "$tmp/$set.b" ] || python3 "$here/control_flow.py" "$tmp/$mixed.b" "$tmp/$set.b"
    fi
    cmds=${CMDS:-lint diff}
    [ -s "$tmp/$set.b" ] || cmds=lint
    for cmd in $cmds; do
        for bin in $bins; do
            times="" cpus="" rss=0
            for _ in $(seq "$rounds"); do
                start=$(date +%s.%N)
                if [ "$cmd" = lint ]; then
                    set +e; /usr/bin/time -o "$tmp/time" -f '%U %S %M' timeout "$kill_after" "$bin" lint "$tmp/$set" --json --time-limit "$limit" ${LINT_ARGS:-} > "$tmp/out.json" 2>/dev/null; rc=$?; set -e
                else
                    set +e; /usr/bin/time -o "$tmp/time" -f '%U %S %M' timeout "$kill_after" "$bin" diff "$tmp/$set" "$tmp/$set.b" --json --time-limit "$limit" > "$tmp/out.json" 2>/dev/null; rc=$?; set -e
                fi
                end=$(date +%s.%N)
                times="$times $(echo "$end - $start" | bc)"
                cpus="$cpus $(tail -1 "$tmp/time" | awk '{print $1 + $2}')"
                rss=$(tail -1 "$tmp/time" | awk -v r="$rss" '{print ($3 > r) ? $3 : r}')
            done
            complete=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["complete"])' "$tmp/out.json" 2>/dev/null || echo "?")
            [ "$rc" != 124 ] || complete=killed
            [ -z "${KEEP:-}" ] || cp "$tmp/out.json" "$KEEP/$(basename "$bin").$set.$cmd.json"
            stats=$(echo "$times" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {printf "%.2f\t%.2f\t%.2f", a[int((NR+1)/2)], a[1], a[NR]}')
            cpu=$(echo "$cpus" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {printf "%.2f\t%.2f\t%.2f", a[int((NR+1)/2)], a[1], a[NR]}')
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$bin" "$set" "$cmd" "$stats" "$rc" "$complete" "$cpu" "$rss"
        done
    done
done
