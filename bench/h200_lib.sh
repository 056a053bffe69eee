# Sourced by the bench/h200_*.sh scripts (after they set OUT): what every one-call device run shares.
status=0
step() {   # step NAME TIMEOUT_S COMMAND...: run one step into $OUT/NAME.log, show its tail, keep going if it fails
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
    echo "=== $name: exit $rc after $((SECONDS - t0)) s"; tail -n "${TAIL:-12}" "$OUT/$name.log"
    [ $rc -eq 0 ] || status=1
    return $rc
}
pack_logs() {   # the device tool brings back a handful of files: keep the JSONs, put every log in one archive
    (cd "$OUT" && tar czf logs.tgz *.log *.txt 2>/dev/null && rm -f *.log *.txt)
}
