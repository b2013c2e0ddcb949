#!/usr/bin/env bash
# Scoring behind training (TOKBENCH_SCORE_BEHIND) with compiled models on the CPU: the test
# suite's tiny corpus, three encoders (bytes, BPE, FuzzyTok) with budget.compile=true, run once
# scoring after training and once behind it — each with its own data and inductor caches — then
# the results files compared byte for byte and the phases printed. What it checks: Dynamo
# compiling training graphs in the run's thread while the scoring thread compiles and runs its
# inference graphs (torch.compile's one process-wide compile lock) gives the same numbers.
#
#   bash benchmarks/score_behind_cpu.sh [WORK_DIR]      # ≈ 2 min on the 2-core VM
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${1:-/tmp/tokbench-score-behind}
rm -rf "$W" && mkdir -p "$W"
cd "$ROOT"
PYTHONPATH=$ROOT python3 - "$W" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "tests/harness")
from test_run import SUITE, make_suite

suite = make_suite(Path(sys.argv[1]))
text = SUITE.replace("  - name: bytes\n", "  - name: bytes\n  - {name: bpe, vocab_size: 300}\n  - name: fuzzytok\n")
suite.write_text(text.replace("budget: {train_bytes: 6000,", "budget: {compile: true, train_bytes: 6000,"))
PY
for b in 0 1; do
  TOKBENCH_CACHE=$W/cache$b TORCHINDUCTOR_CACHE_DIR=$W/inductor$b TOKBENCH_SCORE_BEHIND=$b \
    python3 -m harness.cli run "$W/tiny.yaml" --out "$W/out$b" --quiet --no-report --device cpu > "$W/log$b" 2>&1
  echo "TOKBENCH_SCORE_BEHIND=$b: exit $?"
  grep -E "^\[time\] (models|score_forward|  packed|  behind|    waited|    of which|    scoring waited|total|bytes|bpe|fuzzytok)" "$W/log$b"
done
for f in results.csv samples.jsonl; do
  cmp "$W/out0/$f" "$W/out1/$f" && echo "$f: the same bytes"
done
