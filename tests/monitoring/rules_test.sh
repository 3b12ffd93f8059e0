#!/usr/bin/env bash
# The alert rules: `promtool check rules` (syntax, templates), then `promtool test rules`
# over alerts_test.yaml (each alert fires when it should, with its labels and text, and
# stays quiet when it should). promtool comes from tests/tools/build-tools.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../tools/versions.sh
source "$here/../tools/versions.sh"
[ -x "$PROMTOOL_BIN" ] || { echo "FAIL: $PROMTOOL_BIN missing: run bash tests/tools/build-tools.sh promtool" >&2; exit 1; }
cd "$here"
"$PROMTOOL_BIN" check rules ../../monitoring/prometheus/*.yaml
"$PROMTOOL_BIN" test rules alerts_test.yaml
