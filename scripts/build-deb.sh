#!/usr/bin/env bash
# Builds the Debian package: scripts/build-deb.sh [--out DIR] [--build-path DIR]
#
# Release binaries with the Swift runtime linked in (the terminals have no Swift toolchain), the
# systemd unit, the commented default configuration (a conffile), the system user (sysusers.d),
# and maintainer scripts that create the user and enable the service. dpkg-deb is enough: no
# debhelper. The package's dependencies are read off the binaries (ldd → dpkg -S).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=.build-deb
# Its own build folder by default. --tests-build DIR links the binaries from the objects of the
# tests' build in DIR (built with -enable-testing) instead of compiling them again: for the package
# test in CI, which checks the package (files, modes, unit, user, dependencies) and not the code,
# which the tests checked. SwiftPM puts -static-stdlib on every compile command too, so that
# `--static-swift-stdlib` there compiled every module again (9 of CI's 50 minutes); the objects
# differ only in the libraries they name for the linker (static Foundation's), which the link
# below adds. A package to install comes from the default.
BUILD=.build-release
TESTS_BUILD=
while (($#)); do
    case $1 in
        --out) OUT=$2; shift 2 ;;
        --build-path) BUILD=$2; shift 2 ;;
        --tests-build) TESTS_BUILD=$2; shift 2 ;;
        *) echo "usage: $0 [--out DIR] [--build-path DIR | --tests-build DIR]" >&2; exit 64 ;;
    esac
done

NAME=intercomd
ARCH=$(dpkg --print-architecture)
# <release>+<commits>.g<hash>: the release the terminals announce (Sources/Calls/Software.swift, the
# one place it is written), then what increases with every commit and names the one built from.
RELEASE=$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' Sources/Calls/Software.swift)
[[ -n $RELEASE ]] || { echo "build-deb: no release number in Sources/Calls/Software.swift" >&2; exit 1; }
VERSION="$RELEASE+$(git rev-list --count HEAD 2>/dev/null || echo 0).g$(git rev-parse --short=8 HEAD 2>/dev/null || echo unknown)"
STAGE=$OUT/stage
DEB=$OUT/${NAME}_${VERSION}_${ARCH}.deb

PRODUCTS=(intercomd intercomctl intercom-site)
if [[ -n $TESTS_BUILD ]]; then
    echo "build-deb: linking the tests' objects with the static Swift runtime" >&2
    BIN=$OUT/bin
    mkdir -p "$BIN"
    # Each product's link command as SwiftPM last wrote it for the tests' build (its manifest,
    # one JSON list per command), with the static runtime and another output.
    python3 - "$TESTS_BUILD/release.yaml" "$BIN" "${PRODUCTS[@]}" <<'EOF' >&2
import json, subprocess, sys
manifest, out, products = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = open(manifest).read().split("\n")
FOUNDATION = ["--start-group", "Foundation", "CoreFoundation", "FoundationEssentials", "FoundationInternationalization",
              "_FoundationCShims", "_FoundationCollections", "_FoundationICU", "swiftDispatch", "dispatch", "BlocksRuntime",
              "swiftSynchronization", "--end-group"]
for product in products:
    start = next(i for i, l in enumerate(lines) if l.startswith(f'  "C.{product}-') and l.endswith('-release.exe":'))
    args = json.loads(next(l for l in lines[start:start + 8] if l.startswith("    args: ")).split(": ", 1)[1])
    args[args.index("-o") + 1] = f"{out}/{product}"
    if "-static-stdlib" not in args:
        args.insert(args.index("-emit-executable"), "-static-stdlib")
    # What the objects would name for the linker (autolink) had they been compiled against the
    # static runtime: static Foundation's own libraries.
    args += [a for lib in FOUNDATION for a in ("-Xlinker", lib if lib.startswith("--") else f"-l{lib}")]
    print(f"build-deb: linking {product}", flush=True)
    subprocess.run(args, check=True)
EOF
else
    echo "build-deb: building release binaries (static Swift runtime)" >&2
    for product in "${PRODUCTS[@]}"; do
        swift build -c release --static-swift-stdlib --build-path "$BUILD" --product "$product" >&2
    done
    BIN=$(swift build -c release --build-path "$BUILD" --show-bin-path)
fi

rm -rf "$STAGE"
install -d "$STAGE/DEBIAN" "$STAGE/usr/bin" "$STAGE/lib/systemd/system" "$STAGE/etc/intercomd" \
    "$STAGE/usr/lib/sysusers.d" "$STAGE/usr/lib/udev/rules.d" "$STAGE/usr/share/doc/$NAME"
install -m 0755 -s "$BIN/intercomd" "$BIN/intercomctl" "$BIN/intercom-site" "$STAGE/usr/bin/"
install -m 0644 systemd/intercomd.service systemd/intercom-site.service "$STAGE/lib/systemd/system/"
install -m 0644 systemd/60-intercomd.rules "$STAGE/usr/lib/udev/rules.d/"
# The configuration holds the room directory and (later) names the site key: not world-readable.
install -m 0640 config/intercomd.example.toml "$STAGE/etc/intercomd/intercomd.toml"
install -m 0644 README.md docs/architecture.md docs/audio-path.md docs/modules.md docs/calls.md docs/site.md docs/site-service.md "$STAGE/usr/share/doc/$NAME/"
cat >"$STAGE/usr/lib/sysusers.d/$NAME.conf" <<'EOF'
# The service user: owns the control socket, the call history and do-not-disturb.
u intercomd - "intercomd room intercom terminal" /var/lib/intercomd
# The site service's user: owns the site folder (database, certificate authority), nothing else.
u intercom-site - "intercom site service" /var/lib/intercom-site
EOF

# Dependencies: the package of every shared library the binaries load.
deps=$(for b in "$STAGE"/usr/bin/*; do ldd "$b"; done | awk '/=> \// { print $3 }' | sort -u |
    while read -r lib; do dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || true; done |
    cut -d: -f1 | sort -u | grep -v "^$NAME$" | paste -sd, | sed 's/,/, /g')
[[ -n $deps ]] || { echo "build-deb: could not find the libraries' packages" >&2; exit 1; }
if ldd "$STAGE/usr/bin/intercomd" | grep -q libswift; then
    echo "build-deb: intercomd still loads the Swift runtime" >&2
    exit 1
fi

SIZE=$(du -sk "$STAGE" | cut -f1)
cat >"$STAGE/DEBIAN/control" <<EOF
Package: $NAME
Version: $VERSION
Architecture: $ARCH
Maintainer: intercomd developers <dev@intercomd.invalid>
Installed-Size: $SIZE
Depends: $deps, systemd
Section: sound
Priority: optional
Description: room intercom terminal daemon
 Real-time audio daemon for wall-mounted intercom terminals: ALSA capture,
 acoustic echo cancellation (speexdsp), Opus over RTP, an adaptive jitter
 buffer and ALSA playback; calls between rooms, do-not-disturb, call history,
 a control socket (intercomctl) and loopback measurements for technicians;
 intercom-site, the administrator's tool and the site service (page and API).
EOF
echo "/etc/intercomd/intercomd.toml" >"$STAGE/DEBIAN/conffiles"

cat >"$STAGE/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    systemd-sysusers intercomd.conf
    chown root:intercomd /etc/intercomd/intercomd.toml
    chmod 0640 /etc/intercomd/intercomd.toml
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload
        # Enabled, not started: the room's configuration comes first (README, "Installing").
        systemctl enable intercomd.service >/dev/null
        systemctl try-restart intercomd.service
    fi
fi
EOF
cat >"$STAGE/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
    systemctl disable --now intercomd.service >/dev/null || true
    systemctl disable --now intercom-site.service >/dev/null || true
fi
EOF
cat >"$STAGE/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
[ -d /run/systemd/system ] && systemctl daemon-reload || true
if [ "$1" = purge ]; then
    # The call history and do-not-disturb; the user stays (Debian leaves system users in place).
    rm -rf /var/lib/intercomd
fi
EOF
chmod 0755 "$STAGE/DEBIAN/postinst" "$STAGE/DEBIAN/prerm" "$STAGE/DEBIAN/postrm"

dpkg-deb --root-owner-group --build "$STAGE" "$DEB" >&2
echo "$DEB"
