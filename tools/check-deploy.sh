#!/usr/bin/env bash
# check-deploy.sh: check the shipped deployment files. The systemd units
# must pass systemd-analyze verify (with the binary and config paths
# pointed at stand-ins, since the check runs before anything is
# installed) and carry every hardening directive docs/operations.md
# promises; the Vault bootstrap script must parse; the alert rules must
# pass promtool and the dashboard must be JSON with queries; the
# Dockerfile must keep its promises and pass a linter. (That every
# metric they use is exported is a Go test: daemon's
# TestDashboardAndAlertMetricsExist.)
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
fail() { echo "check-deploy: $*" >&2; status=1; }

if command -v systemd-analyze >/dev/null 2>&1; then
	scratch=$(mktemp -d)
	trap 'rm -rf "$scratch"' EXIT
	for u in deploy/systemd/*.service; do
		sed 's|/usr/local/bin/airlock|/bin/true|g; s|/etc/airlock/airlock.yaml|/dev/null|g' "$u" >"$scratch/$(basename "$u")"
	done
	if ! out=$(cd "$scratch" && systemd-analyze verify ./*.service 2>&1) || [ -n "$out" ]; then
		fail "systemd-analyze verify: ${out:-failed}"
	fi
else
	echo "check-deploy: systemd-analyze is not installed; units not verified" >&2
fi
for u in deploy/systemd/airlock-serve.service deploy/systemd/airlock-host.service; do
	for d in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes 'CapabilityBoundingSet=$' \
		'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6' SystemCallFilter=@system-service UMask=0077 'StateDirectoryMode=0700$'; do
		grep -Eq "^$d" "$u" || fail "$u lacks $d"
	done
done
# Authority separated: serve and host run as different users; the broker
# socket is shared through the airlock group; each state directory is its
# user's alone.
serve=deploy/systemd/airlock-serve.service host=deploy/systemd/airlock-host.service
grep -q '^User=airlock-broker$' "$serve" || fail "$serve must run as airlock-broker"
grep -q '^Group=airlock$' "$serve" || fail "$serve must run with group airlock (the broker socket's group)"
grep -q '^StateDirectory=airlock-broker$' "$serve" || fail "$serve must keep its keys in StateDirectory=airlock-broker"
grep -q '^RuntimeDirectory=airlock$' "$serve" || fail "$serve has no RuntimeDirectory for the broker socket"
grep -q '^RuntimeDirectoryMode=0750$' "$serve" || fail "$serve: the broker socket directory must be 0750 (group airlock)"
grep -q '^ExecReload=/bin/kill -HUP \$MAINPID' "$serve" || fail "$serve does not reload on SIGHUP"
grep -q '^User=airlock-host$' "$host" || fail "$host must run as airlock-host"
grep -q '^SupplementaryGroups=airlock$' "$host" || fail "$host must be in group airlock (the broker socket)"
grep -q '^StateDirectory=airlock-host$' "$host" || fail "$host must keep its state in StateDirectory=airlock-host"
# The plugin sandbox needs unprivileged namespaces in the host unit.
grep -q '^RestrictNamespaces=user mnt pid net ipc uts$' "$host" || fail "$host must allow the sandbox's namespaces (RestrictNamespaces=user mnt pid net ipc uts)"
grep -q '^PrivateUsers=yes' "$host" && fail "$host: PrivateUsers=yes breaks the sandbox's user namespaces"
grep -q '^SystemCallFilter=@mount ' "$host" || fail "$host must allow the sandbox's mount calls"
grep -q '^g airlock ' deploy/systemd/airlock.sysusers || fail "airlock.sysusers creates no airlock group"
for u in airlock-broker airlock-host; do
	grep -q "^u $u " deploy/systemd/airlock.sysusers || fail "airlock.sysusers creates no $u user"
done
grep -Eq '^m airlock-host +airlock' deploy/systemd/airlock.sysusers || fail "airlock.sysusers does not put airlock-host in group airlock"
# Each unit checks only its own files, as its own user (neither may enter
# the other's state directory); restarting serve does not stop the host.
grep -q '^ExecStartPre=/usr/local/bin/airlock check-config --serve ' "$serve" || fail "$serve: ExecStartPre must be check-config --serve"
grep -q '^ExecStartPre=/usr/local/bin/airlock check-config --host ' "$host" || fail "$host: ExecStartPre must be check-config --host"
grep -q '^Requires=airlock-serve' "$host" && fail "$host: Requires= would stop the host (and its plugins) with every serve restart; use Wants="
# The one persistent directory both users share (the intercept CA bundle).
grep -Eq '^d /var/lib/airlock 0750 airlock-broker airlock ' deploy/systemd/airlock.tmpfiles || fail "airlock.tmpfiles does not create /var/lib/airlock (0750, airlock-broker:airlock)"
grep -q '^ReadWritePaths=/var/lib/airlock$' "$serve" || fail "$serve cannot write /var/lib/airlock (ReadWritePaths)"
# The units' commands, run as their users in a scratch root through first
# start, serve restart, host restart and a reboot (needs root: it creates
# the users; deploy/systemd/units_test.go).
# make test sets CHECK_DEPLOY_UNITS=skip: its go test ./... runs the same
# test right after, with the race detector.
if [ "${CHECK_DEPLOY_UNITS:-}" = skip ]; then
	:
elif [ "$(id -u)" -eq 0 ]; then
	out=$(${GO:-go} test -count=1 ./deploy/systemd 2>&1) || fail "the units do not survive restarts and reboots (go test ./deploy/systemd):
$out"
else
	echo "check-deploy: not root; the units' restart and reboot sequence was not run (go test ./deploy/systemd as root)" >&2
fi
bash -n deploy/vault/bootstrap.sh || fail "deploy/vault/bootstrap.sh does not parse"
if command -v promtool >/dev/null 2>&1; then
	promtool check rules deploy/prometheus/alerts.yaml >/dev/null || fail "promtool check rules deploy/prometheus/alerts.yaml"
else
	echo "check-deploy: promtool is not installed; alert rules not checked" >&2
fi
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["panels"] and all(p["targets"] for p in d["panels"])' \
	deploy/grafana/airlock.json || fail "deploy/grafana/airlock.json is not a dashboard with queries"
# Kubernetes: kustomize renders base and overlays; its own Go module
# decodes every object strictly into k8s.io/api types.
if command -v kubectl >/dev/null 2>&1; then
	(cd deploy/kubernetes && ${GO:-go} test -count=1 ./...) >/dev/null || fail "deploy/kubernetes: the manifests do not render, decode strictly or keep their promises (cd deploy/kubernetes && go test ./...)"
else
	echo "check-deploy: kubectl is not installed; Kubernetes manifests not checked" >&2
fi
# The Dockerfile: multi-stage, a static binary, a non-root user, no shell
# in the final image (distroless), exec-form entrypoint.
df=Dockerfile
[ "$(grep -c '^FROM ' "$df")" -ge 2 ] || fail "$df is not multi-stage"
grep -q 'CGO_ENABLED=0' "$df" || fail "$df does not build a static binary"
tail_stage=$(awk '/^FROM /{s=""} {s=s $0 "\n"} END{printf "%s", s}' "$df")
printf '%b' "$tail_stage" | grep -q '^FROM .*distroless/static' || fail "$df: the final image must be distroless static (no shell)"
printf '%b' "$tail_stage" | grep -Eq '^USER [0-9]+' || fail "$df: the final image must run as a numeric non-root user"
printf '%b' "$tail_stage" | grep -Eq '^(RUN|SHELL)' && fail "$df: the final stage must not run commands (it has no shell)"
grep -Eq '^ENTRYPOINT \["' "$df" || fail "$df: ENTRYPOINT must be exec form"
# ...and a Dockerfile linter (dockerfile-utils, the language server's
# validator, from npm into the tool cache): any warning fails. No
# container engine runs here, so the image itself is not built.
if command -v npm >/dev/null 2>&1; then
	cache=${AIRLOCK_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airlock-tools}
	dfu="$cache/npm/node_modules/.bin/dockerfile-utils"
	if [ ! -x "$dfu" ]; then
		mkdir -p "$cache/npm"
		npm install --prefix "$cache/npm" --silent --no-audit --no-fund dockerfile-utils@0.16.3 >&2 || fail "could not install dockerfile-utils"
	fi
	if [ -x "$dfu" ]; then
		out=$("$dfu" lint "$df" 2>&1) || true
		[ -z "$out" ] || fail "dockerfile-utils lint $df: $out"
	fi
else
	echo "check-deploy: npm is not installed; the Dockerfile was not linted" >&2
fi
[ "$status" -eq 0 ] && echo "check-deploy: deployment files are valid" >&2
exit "$status"
