# Shared by scripts/gpu_profile.sh and scripts/gpu_verify.sh (sourced, with LOG set): the log's header and its steps.

# log_header: the date, the commit (and any uncommitted tracked changes) and the GPU, as the log's first lines.
log_header() {
    {
        echo "### $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"
        git status --porcelain --untracked-files=no 2>/dev/null | head -n 20
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
    } >"$LOG" 2>&1
}

# step NAME LIMIT COMMAND...: runs COMMAND under a time limit, its output and exit status appended to LOG.
step() {
    local name=$1 limit=$2 started=$SECONDS rc=0
    shift 2
    echo "### $name, $(date -u '+%H:%M:%S'), limit $limit s: $*" >>"$LOG"
    timeout --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1 || rc=$?
    echo "### $name: exit status $rc after $((SECONDS - started)) s" >>"$LOG"
}
