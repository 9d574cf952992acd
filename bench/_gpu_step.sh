# Sourced by the gpu_issue*.sh scripts: `step NAME LIMIT ARGS...` runs `$PY ARGS... --out
# $out/NAME` within LIMIT seconds (a step that runs out of time costs only itself) and
# prints its exit status and seconds.
step() {
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    mkdir -p "$out/$name"
    timeout "$limit" "$PY" "$@" --out "$out/$name" || echo "step $name: exit $?"
    echo "step $name: $((SECONDS - t0)) s"
}
