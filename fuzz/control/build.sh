#!/bin/sh
# Builds the control request fuzzer (libFuzzer + AddressSanitizer) into .build-fuzz/control-fuzzer.
# The parser spans four modules (Calls, SignalTools, Control, and Posix's IPv4Endpoint); bare swiftc builds one module, so
# their sources are copied into one folder without the imports between them (the SwiftPM build
# would instrument every dependency and link libFuzzer's main into every executable).
# Usage: fuzz/control/build.sh [run [libFuzzer options...]], e.g. fuzz/control/build.sh run -max_total_time=60
set -eu
cd "$(dirname "$0")/../.."
src=.build-fuzz/control-src
rm -rf "$src"; mkdir -p "$src" .build-fuzz/control-corpus
# SignalTools' WAV files and the chime read from it are left out: they sit on Posix's WholeFile
# (swift-system), and no control message reads a file.
for f in Sources/Calls/*.swift Sources/Posix/IPv4Endpoint.swift $(ls Sources/SignalTools/*.swift | grep -v -e PosixFile -e WAV -e Chime) \
         Sources/Control/ControlProtocol.swift \
         Sources/Control/ControlLoopback.swift Sources/Control/ControlReply.swift Sources/Control/ControlStatistics.swift \
         Sources/Control/SiteOverview.swift Sources/Posix/HexDigits.swift; do
    sed -e '/^import Calls$/d' -e '/^import SignalTools$/d' -e '/^import Posix$/d' "$f" > "$src/$(basename "$(dirname "$f")")-$(basename "$f")"
done
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -g -use-ld=lld \
    -module-name ControlFuzz "$src"/*.swift fuzz/control/main.swift -o .build-fuzz/control-fuzzer
echo "built .build-fuzz/control-fuzzer"
if [ "${1:-}" = run ]; then
    shift
    # Seeds: the requests intercomctl sends.
    printf '{"id":1,"cmd":"call","rooms":["kueche","labor"]}' > .build-fuzz/control-corpus/seed-call
    printf '{"id":2,"cmd":"net_loopback","room":"labor","count":20}' > .build-fuzz/control-corpus/seed-net
    printf '{"id":3,"cmd":"mute","target":"mic"}' > .build-fuzz/control-corpus/seed-mute
    printf '{"room":"k","name":"K","dnd":false,"mute":{"microphone":false,"speaker":true},"call":null,"media":[]}' > .build-fuzz/control-corpus/seed-status
    cp fuzz/control/seed-stats.json .build-fuzz/control-corpus/seed-stats  # today's reply: ControlProtocolTests keeps it so
    printf '{"terminals":[{"room":"a","online":true,"software":"0.9.0","site_version":3,"digest":"00000000000000ab","applied_at":1.5,"behind":false},{"room":"b","online":false,"behind":false}],"newest_version":3}' > .build-fuzz/control-corpus/seed-site
    exec .build-fuzz/control-fuzzer -max_len=4096 "$@" .build-fuzz/control-corpus
fi
