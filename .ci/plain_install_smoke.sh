#!/usr/bin/env bash
# Smoke test of the README's plain install (`pip install -e .`, no extras): the test suite runs
# with the dev extra, which brings in what a plain install lacks (sniffio, litellm, spaCy,
# pandas, ...), so it cannot see a missing dependency. This script can (#57):
#   1. the sync API inside a real running kernel (ipykernel, installed here for the test only);
#   2. a CLI evaluate of the demo data with ID metrics, and the demo's hint when spaCy is absent;
#   3. `import ctxeval`, `ctxeval metrics` and `ctxeval plugins` with every extra absent: no
#      traceback, each missing extra shown as unavailable with its install command.
# Usage: .ci/plain_install_smoke.sh [VENV_DIR]   (pip's cache is reused; about a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
work=$(mktemp -d)
venv="${1:-$work/plain-venv}"
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off LITELLM_LOCAL_MODEL_COST_MAP=True
export COLUMNS=80

fail() { echo "plain-install smoke: FAILED: $*" >&2; exit 1; }

started=$SECONDS
echo "== plain install in $venv: pip install -e . (no extras), and ipykernel for the kernel test"
rm -rf "$venv"
python3 -m venv "$venv"
# One resolution for both (pip's cache is reused): ipykernel and jupyter_client bring none of
# the packages checked below, which is checked after the install, so the kernel test sees the
# plain install's environment.
"$venv/bin/python" -m pip install -q -e "$repo" ipykernel jupyter_client
# The extras (and what the dev extra brings, sniffio through trio) must really be absent, or
# this test proves nothing.
for module in litellm spacy pandas pyarrow ray wordllama trio sniffio; do
  if "$venv/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$module') is None)"; then
    fail "the plain install brought '$module'; this smoke test needs it absent"
  fi
done
echo "   installed in $((SECONDS - started)) s"
py="$venv/bin/python"
cli="$venv/bin/ctxeval"

echo "== 1. evaluate() inside a running ipykernel (a Jupyter notebook's loop)"
"$py" - <<'EOF'
import queue

from jupyter_client.manager import start_new_kernel

cell = """
import asyncio, ctxeval
asyncio.get_running_loop()  # the kernel's loop is running: the case this test is about
ev = ctxeval.evaluate(
    [{"id": "q1", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["a"]}],
    metrics=["id_based_context_precision"],
)
print("SCORE", ev.results[0].status, ev.results[0].score)
"""
km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60)
try:
    kc.execute(cell)
    out, error = [], None
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=60)
        except queue.Empty:
            raise SystemExit("the kernel did not answer within 60 s")
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            error = "\n".join(content["traceback"])
        elif kind == "status" and content["execution_state"] == "idle" and (out or error):
            break
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
text = "".join(out)
if error or "SCORE ok 0.5" not in text:
    raise SystemExit(f"evaluate() in the kernel: expected 'SCORE ok 0.5', got {text!r}\n{error}")
print("   kernel:", text.strip())
EOF

echo "== 2. the CLI on the demo data (ID metrics), and the demo without spaCy"
demo_data="$repo/core/ctxeval/data/demo.jsonl"
"$cli" evaluate "$demo_data" -m id_based_context_precision -m nDCG@5 --out "$work/run" \
  > "$work/evaluate.txt" 2>&1 || { cat "$work/evaluate.txt"; fail "ctxeval evaluate (exit $?)"; }
grep -q "id_based_context_precision *0.491" "$work/evaluate.txt" \
  || { cat "$work/evaluate.txt"; fail "ctxeval evaluate: no 0.491 for id_based_context_precision"; }
(cd "$work" && "$cli" demo --out demo > demo.txt 2>&1) \
  || { cat "$work/demo.txt"; fail "ctxeval demo without spaCy"; }
grep -q "spaCy is not installed.*(pip install 'ctxeval\[spacy\]' to include it)" "$work/demo.txt" \
  || { cat "$work/demo.txt"; fail "ctxeval demo: no install hint for spaCy"; }
echo "   evaluate and demo: ok"

echo "== 3. import ctxeval, ctxeval metrics, ctxeval plugins with every extra absent"
"$py" -c "import ctxeval; ctxeval.plugins(); print('   import ctxeval: ok')"
for command in metrics plugins; do
  "$cli" "$command" > "$work/$command.txt" 2>&1 || { cat "$work/$command.txt"; fail "ctxeval $command"; }
  if grep -q "Traceback" "$work/$command.txt"; then cat "$work/$command.txt"; fail "ctxeval $command: a traceback"; fi
done
for expected in "'ctxeval\[spacy\]'" "'ctxeval\[embed\]'" "'ctxeval\[ray\]'"; do
  # (rich wraps a long cell; one line per row is enough to find the command)
  tr -d '\n│ ' < "$work/plugins.txt" | grep -q "unavailable:pipinstall${expected// /}" \
    || { cat "$work/plugins.txt"; fail "ctxeval plugins: no 'unavailable: pip install $expected'"; }
done
echo "   metrics and plugins: ok"
echo "plain-install smoke: ok ($((SECONDS - started)) s)"
