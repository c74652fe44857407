#!/usr/bin/env bash
# Named benchmark jobs on the GPU machine, one after another, each with a time limit: what a device session runs.
# Before (here, once per machine): bash ../shared/scripts/device-prep.sh (the Vulkan loader and the wgpu wheels
# into .gl/ and .whl/); for the `tests` job also the test wheels:
#   pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .whl/test pytest pluggy iniconfig \
#     packaging hypothesis sortedcontainers
# On the GPU machine (the device tool, carry .gl and .whl), from the project root:
#   JOBS="rc gemv model" JOB_LIMIT=200 OUT=$OUT bash benchmarks/device_run.sh; tail -c 12000 $OUT/summary.log
# Each job writes $OUT/<job>.log (and its JSON where it makes one; the A/Bs' in $OUT/r1/, $OUT/r8/); $OUT/summary.log
# holds the date, the tree (git log -1 of the copy's .git, which the device tool does not move: write the tree into
# $OUT/TREE yourself when it matters), the GPU and its clocks, and each job's exit code, seconds and last TAIL bytes
# (3000). The device tool brings back 8 files of $OUT: tar the folder into one when there are more.
# Jobs: rc (benchmarks/read_ceiling.py), r1 / r8 (gemv_ab.py at ROWS=1 / 8; R1 / R8 pass through), gemv
# (bench --only gemv --grid full), model, bmodel (batched_model), grid (attention --grid decode), batched, quant,
# pab (prefill_ab.py; CONFIGS, LOOPS, BUDGET_S pass through), gemm (fma,gemm --grid decode --variants all),
# gemmfull (fma,gemm --grid full, planned), rope (rope_ab.py), dabl (decode_ablation.py), pabl (prefill_ablation.py;
# its env passes through), tests (TESTS, the pytest arguments: the GPU's run of the test files named), pregs (pab,
# then the driver's registers of its candidates: pipeline_stats.py over the A/B's shader copy, KERNELS (default the
# f32 D=128 ones) passing through; LAYER_DIR names the folder of the statistics layer, built here (its docstring)
# and carried, e.g. under .ab/), check (h200_check.py CHECK, default gemm: the GEMM-shaped attention kernels at real
# sizes against float64), regs (the driver's registers of the package's attention kernels; KERNELS, default the
# GEMM-shaped ones, and LAYER_DIR as for pregs).
set -u
: "${OUT:?set OUT}" "${JOBS:?set JOBS}"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD

job() {
  case "$1" in
    rc) python3 benchmarks/read_ceiling.py --json "$OUT/read_ceiling.json" ;;
    r1) OUT=$OUT/r1 ROWS=1 python3 benchmarks/gemv_ab.py ;;
    r8) OUT=$OUT/r8 ROWS=8 python3 benchmarks/gemv_ab.py ;;
    gemv) python3 -m wgraph bench --only gemv --grid full --json "$OUT/gemv.json" ;;
    model) python3 -m wgraph bench --only model --json "$OUT/model.json" ;;
    bmodel) python3 -m wgraph bench --only batched_model --json "$OUT/batched_model.json" ;;
    grid) python3 -m wgraph bench --only attention --grid decode --json "$OUT/decode_grid.json" ;;
    batched) python3 -m wgraph bench --only batched --json "$OUT/batched.json" ;;
    quant) python3 -m wgraph bench --only quant --json "$OUT/quant.json" ;;
    pab) OUT=$OUT/pab python3 benchmarks/prefill_ab.py ;;
    pabl) OUT=$OUT/pabl python3 benchmarks/prefill_ablation.py ;;
    pregs)
      job pab || return
      SHADERS=/tmp/prefill_ab_shaders KERNELS="${KERNELS:-x_gemm_d128_f32|prefill_gemm_d128_f32}" OUT=$OUT/regs \
        python3 benchmarks/pipeline_stats.py attention | grep -E "SOFTCAP=0\]|Error" ;;
    prefab) python3 benchmarks/revisions_ab.py run --rounds 1 -- --only attention --grid prefill --no-torch ;;
    check) python3 benchmarks/h200_check.py "${CHECK:-gemm}" ;;
    regs)
      KERNELS="${KERNELS:-prefill_gemm|batched_gemm}" OUT=$OUT/regs \
        python3 benchmarks/pipeline_stats.py attention attention_batched | grep -E "SOFTCAP=0\]|Error" ;;
    gemm) python3 -m wgraph bench --only fma,gemm --grid decode --variants all --json "$OUT/gemm.json" ;;
    gemmfull) python3 -m wgraph bench --only fma,gemm --grid full --json "$OUT/gemm_full.json" ;;
    rope) python3 benchmarks/rope_ab.py ;;
    dabl) python3 benchmarks/decode_ablation.py ;;
    tests)
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/tsite .whl/test/*.whl 2>/dev/null
      PYTHONPATH=/tmp/tsite:$PYTHONPATH python3 -m pytest -p no:cacheprovider ${TESTS:-tests/test_gemv.py} ;;
    *) echo "unknown job $1" >&2; return 2 ;;
  esac
}
export -f job
export OUT
S=$OUT/summary.log
{ date; git log --oneline -1 2>/dev/null | cut -c1-100; cat "$OUT/TREE" 2>/dev/null
  nvidia-smi --query-gpu=name,clocks.current.sm,clocks.current.memory,temperature.gpu --format=csv; } >> "$S"
for j in $JOBS; do
  t0=$(date +%s)
  timeout "${JOB_LIMIT:-250}" bash -c 'job "$0"' "$j" > "$OUT/$j.log" 2>&1
  rc=$?
  echo "==== $j rc=$rc $(( $(date +%s) - t0 ))s" >> "$S"
  grep -v "^WARNING: Target directory" "$OUT/$j.log" | tail -c "${TAIL:-3000}" >> "$S"
done
