#!/bin/sh
# A phone in a box: run a command in a fresh memory cgroup (cgroup v1 or v2,
# whichever this machine has), like an app under Android's per-app cgroup or
# iOS's footprint limit, optionally with fewer CPUs and a throttled storage
# read speed (so paging weights from "flash" costs what it costs on a phone).
#
#   scripts/phone-sim.sh --mem 1G [--cpus 2] [--read-bps 200M] [--evict FILE]... -- COMMAND [ARGS...]
#   scripts/phone-sim.sh --check     # exit 0 if a box can be made here, else 77 with the reason
#
# --evict FILE drops FILE's pages from the page cache first, so the command
# reads it from storage and its pages are charged to the box.  The exit
# status is the command's (137 when the kernel's OOM killer ended it, which
# is also reported on stderr).  The cgroup is removed afterwards.  Needs root.
set -u

die() { echo "phone-sim: $*" >&2; exit 2; }
skip() { echo "phone-sim: cannot make a box here: $*" >&2; exit 77; }

bytes() {  # 1G, 512M, 300k, 1000 -> bytes
    case "$1" in
    *[Gg]) echo $(( ${1%?} * 1024 * 1024 * 1024 )) ;;
    *[Mm]) echo $(( ${1%?} * 1024 * 1024 )) ;;
    *[Kk]) echo $(( ${1%?} * 1024 )) ;;
    *[!0-9]*|"") die "'$1' is not a size like 1G or 512M" ;;
    *) echo "$1" ;;
    esac
}

MEM= CPUS= READ_BPS= CHECK= EVICT=
while [ $# -gt 0 ]; do
    case "$1" in
    --mem) MEM=$(bytes "$2") || exit 2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --read-bps) READ_BPS=$(bytes "$2") || exit 2; shift 2 ;;
    --evict) EVICT="$EVICT $2"; shift 2 ;;
    --check) CHECK=1; shift ;;
    --) shift; break ;;
    *) die "unknown option '$1' (see the top of $0)" ;;
    esac
done

[ "$(id -u)" = 0 ] || skip "not root (cgroups need root)"

# Which hierarchy holds the memory controller?  v1: its own mount; v2: the
# unified mount with "memory" among its controllers.
V1=/sys/fs/cgroup/memory
if [ -f "$V1/memory.limit_in_bytes" ]; then
    MODE=v1
    own() { sed -n "s/^[0-9]*:\([^:]*,\)\{0,1\}$1\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p" /proc/self/cgroup | head -n1; }
elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    MODE=v2
else
    skip "no cgroup memory controller (neither /sys/fs/cgroup/memory nor cgroup v2 with memory)"
fi
[ -n "$CHECK" ] && { echo "phone-sim: cgroup $MODE"; exit 0; }
[ -n "$MEM" ] || die "--mem SIZE is required"
[ $# -gt 0 ] || die "no command after --"

NAME=plm-phone-$$
DIRS=
cleanup() {
    for d in $DIRS; do
        # Anything the command left behind dies with the box.
        [ -f "$d/cgroup.procs" ] && for p in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
        i=0
        while ! rmdir "$d" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkbox() {  # controller-dir -> the new cgroup's path (in $BOX; no subshell, so DIRS keeps it)
    BOX="$1/$NAME"
    mkdir "$BOX" || die "cannot create $BOX"
    DIRS="$BOX $DIRS"
}

dev_of() {  # major:minor of the block device holding a path (the cwd by default)
    stat -c '%Hd:%Ld' "${1:-.}" 2>/dev/null
}

if [ $MODE = v1 ]; then
    mkbox "$V1$(own memory)"; M=$BOX
    echo "$MEM" > "$M/memory.limit_in_bytes" || die "cannot set memory.limit_in_bytes"
    # No swapping past the limit either (where swap accounting exists).
    [ -f "$M/memory.memsw.limit_in_bytes" ] && echo "$MEM" > "$M/memory.memsw.limit_in_bytes" 2>/dev/null
    BOXES=$M
    if [ -n "$CPUS" ]; then
        mkbox "/sys/fs/cgroup/cpu$(own cpu)"; C=$BOX
        period=$(cat "$C/cpu.cfs_period_us")
        echo $(awk "BEGIN { printf \"%d\", $CPUS * $period }") > "$C/cpu.cfs_quota_us" || die "cannot set the CPU quota"
        BOXES="$BOXES $C"
    fi
    if [ -n "$READ_BPS" ]; then
        mkbox "/sys/fs/cgroup/blkio$(own blkio)"; B=$BOX
        dev=$(dev_of "${EVICT:+$(echo $EVICT | cut -d' ' -f1)}")
        echo "$dev $READ_BPS" > "$B/blkio.throttle.read_bps_device" || die "cannot throttle reads of device $dev"
        BOXES="$BOXES $B"
    fi
else
    ROOT=/sys/fs/cgroup
    # Children of a cgroup with processes cannot get controllers (v2's
    # no-internal-process rule), so the box hangs off the root.
    echo "+memory +cpu +io" > "$ROOT/cgroup.subtree_control" 2>/dev/null
    mkbox "$ROOT"; M=$BOX
    echo "$MEM" > "$M/memory.max" || die "cannot set memory.max"
    [ -f "$M/memory.swap.max" ] && echo 0 > "$M/memory.swap.max"
    [ -n "$CPUS" ] && { echo "$(awk "BEGIN { printf \"%d\", $CPUS * 100000 }") 100000" > "$M/cpu.max" || die "cannot set cpu.max"; }
    if [ -n "$READ_BPS" ]; then
        dev=$(dev_of "${EVICT:+$(echo $EVICT | cut -d' ' -f1)}")
        echo "$dev rbps=$READ_BPS" > "$M/io.max" || die "cannot throttle reads of device $dev"
    fi
    BOXES=$M
fi

for f in $EVICT; do
    [ -r "$f" ] || die "--evict: cannot read $f"
    dd if="$f" iflag=nocache count=0 status=none 2>/dev/null || die "--evict: cannot drop $f from the page cache"
done

# The child joins every box, then becomes the command.
sh -c 'for b in $1; do echo $$ > "$b/cgroup.procs" || exit 125; done; shift; exec "$@"' phone-sim "$BOXES" "$@"
rc=$?

if [ $MODE = v1 ]; then
    kills=$(sed -n 's/^oom_kill //p' "$M/memory.oom_control")
else
    kills=$(sed -n 's/^oom_kill //p' "$M/memory.events")
fi
[ "${kills:-0}" -gt 0 ] && echo "phone-sim: the kernel's OOM killer killed ${kills} process(es) in the box (limit $MEM bytes, exit $rc)" >&2
exit $rc
