#!/usr/bin/env bash
# Installs the Debian package on this machine and checks the installed terminal, then purges it:
# scripts/test-package.sh [DEB]  (builds one with scripts/build-deb.sh when no DEB is given)
#
# Checks: the files and their modes, the system user, the installed unit (systemd-analyze verify,
# and the exposure score of systemd-analyze security against the goal of 2.5), the binaries run
# without the Swift toolchain's libraries, the shipped configuration is valid as the service user
# reads it, and purging removes it all. Runs as root (dpkg); changes nothing it does not undo.
set -euo pipefail
cd "$(dirname "$0")/.."

GOAL=2.5
fail=0
check() {  # check "what" command...
    local what=$1; shift
    if "$@" >/tmp/intercomd-package-check.log 2>&1; then
        echo "package: ok: $what"
    else
        echo "package: FAILED: $what" >&2
        sed 's/^/    /' /tmp/intercomd-package-check.log >&2
        fail=1
    fi
}

# INTERCOM_DEB_TESTS_BUILD: the tests' build folder, whose objects build-deb.sh links (the test command).
DEB=${1:-$(bash scripts/build-deb.sh ${INTERCOM_DEB_TESTS_BUILD:+--tests-build "$INTERCOM_DEB_TESTS_BUILD"})}
[[ -f $DEB ]] || { echo "package: no package at '$DEB'" >&2; exit 1; }
echo "package: installing $DEB"
if dpkg-query -W -f='${Status}' intercomd 2>/dev/null | grep -q "install ok installed"; then
    echo "package: intercomd is installed already; not touching this machine" >&2
    exit 1
fi
trap 'dpkg --purge intercomd >/dev/null 2>&1 || true' EXIT
check "dpkg installs it" dpkg -i "$DEB"

check "binaries installed" test -x /usr/bin/intercomd -a -x /usr/bin/intercomctl -a -x /usr/bin/intercom-site
check "units installed" test -f /lib/systemd/system/intercomd.service -a -f /lib/systemd/system/intercom-site.service
check "udev rules for the status lights installed" test -f /usr/lib/udev/rules.d/60-intercomd.rules
check "configuration is a conffile" grep -qx /etc/intercomd/intercomd.toml /var/lib/dpkg/info/intercomd.conffiles
check "configuration readable by the service only (root:intercomd 0640)" \
    test "$(stat -c '%U:%G %a' /etc/intercomd/intercomd.toml)" = "root:intercomd 640"
check "system user intercomd exists, no login" sh -c 'getent passwd intercomd | grep -q ":/usr/sbin/nologin$\|:/bin/false$\|:/sbin/nologin$"'
check "binaries load no Swift toolchain library" sh -c '! ldd /usr/bin/intercomd /usr/bin/intercomctl /usr/bin/intercom-site | grep -q "libswift\|/opt/swift\|not found"'
check "the shipped configuration is valid, read as the service user" \
    setpriv --reuid=intercomd --regid=intercomd --clear-groups /usr/bin/intercomd --check-config --config /etc/intercomd/intercomd.toml
check "intercomctl runs" sh -c '/usr/bin/intercomctl --help | grep -q loopback'
check "intercom-site runs" sh -c '/usr/bin/intercom-site --help | grep -q convert'
check "systemd-analyze verify passes on the installed units" \
    systemd-analyze verify /lib/systemd/system/intercomd.service /lib/systemd/system/intercom-site.service
check "system user intercom-site exists, no login" sh -c 'getent passwd intercom-site | grep -q ":/usr/sbin/nologin$\|:/bin/false$\|:/sbin/nologin$"'
check "intercom-site serves" sh -c '/usr/bin/intercom-site serve --help | grep -q HTTPS'
site_score=$(systemd-analyze security --offline=true /lib/systemd/system/intercom-site.service 2>/dev/null |
    sed -n 's/.*Overall exposure level for intercom-site.service: \([0-9.]*\).*/\1/p')
echo "package: the site service's exposure score $site_score (goal $GOAL)"
check "the site service's exposure score $site_score is at most $GOAL" awk -v s="$site_score" -v g="$GOAL" 'BEGIN { exit !(s != "" && s <= g) }'

score=$(systemd-analyze security --offline=true /lib/systemd/system/intercomd.service 2>/dev/null |
    sed -n 's/.*Overall exposure level for intercomd.service: \([0-9.]*\).*/\1/p')
echo "package: exposure score $score (goal $GOAL)"
check "exposure score $score is at most $GOAL" awk -v s="$score" -v g="$GOAL" 'BEGIN { exit !(s != "" && s <= g) }'

check "dpkg purges it" dpkg --purge intercomd
check "purge removes binaries, unit and configuration" \
    sh -c '! test -e /usr/bin/intercomd && ! test -e /lib/systemd/system/intercomd.service && ! test -e /lib/systemd/system/intercom-site.service && ! test -e /etc/intercomd/intercomd.toml'
trap - EXIT
if ((fail)); then
    echo "package: FAILED" >&2
    exit 1
fi
echo "package: all checks passed"
