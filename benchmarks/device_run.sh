#!/usr/bin/env bash
# The benchmarks of docs/benchmarks.md's "GPU" section, in one run on an accelerator machine.
#
#   bash benchmarks/device_run.sh [OUTDIR] [BUDGET_SECONDS]
#
# Runs from the repository root with whatever `python3` has jax (and a GPU plugin), numpyro,
# equinox, optax, flax and scikit-learn installed; bdl itself is taken from the checkout
# (PYTHONPATH). Each part gets at most its own time cap and never more than what is left of
# BUDGET_SECONDS (default 480), so a slow part cannot starve the rest; every log is written to
# OUTDIR (default ./device_out) as the part runs. PARTS="smoke time_to_fidelity ..." runs only
# the parts named. With WHEELS=DIR, the wheels there are installed first for any of the
# benchmarks' pure dependencies (arviz and what it needs) that python3 cannot import.
set -u
out=${1:-device_out}
budget=${2:-480}
kernels=sgld,psgld,sghmc,sgnht,wenzel,cyclical,entropy,nnsghmc,l2e,kinetic-l2e
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
start=$(date +%s)
if [[ -n ${WHEELS:-} ]]; then
    for mod in platformdirs pandas h5py h5netcdf xarray xarray_einstats arviz fastprogress blackjax; do
        $py -c "import $mod" 2>/dev/null && continue
        wheel=$(ls "$WHEELS"/${mod}-*.whl 2>/dev/null | head -1)
        [[ -n $wheel ]] && $py -m pip install -q --no-deps --no-index "$wheel"
    done
fi

part() {  # part NAME CAP_SECONDS COMMAND...
    local name=$1 cap=$2
    shift 2
    if [[ -n ${PARTS:-} && " $PARTS " != *" $name "* ]]; then return; fi
    local left=$((budget - ($(date +%s) - start)))
    ((cap > left)) && cap=$left
    if ((cap < 20)); then
        echo "== $name: skipped, ${left} s of the budget left" | tee -a "$out/summary.txt"
        return
    fi
    echo "== $name (cap ${cap} s): $*" | tee -a "$out/summary.txt"
    local t0=$(date +%s)
    timeout "$cap" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "   rc $rc after $(($(date +%s) - t0)) s" | tee -a "$out/summary.txt"
}

{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1
    $py -c "import sys, jax, numpyro, equinox, optax, flax, numpy; \
print(sys.version.split()[0], 'jax', jax.__version__, 'numpyro', numpyro.__version__, \
'equinox', equinox.__version__, 'optax', optax.__version__, 'flax', flax.__version__, \
'numpy', numpy.__version__); print(jax.devices())" 2>&1
} | tee "$out/environment.txt"

part smoke 120 $py benchmarks/device_smoke.py
[[ -n ${PARTS:-} && " $PARTS " != *" smoke "* ]] || grep -q "^   rc 0 " <(tail -1 "$out/summary.txt") || { echo "smoke run failed: stopping"; tail -30 "$out/smoke.log"; exit 1; }
# one part per model and chain count: a part cut short by its cap loses only its own rows; the
# 8-chain digits part runs after the compile parts (WIDE_ARGS="--kernels sgld" halves the wide part)
peers() {  # peers MODEL CHAINS EXTRA...
    local name="peers_$1$2" model=$1 chains=$2
    shift 2
    part "$name" 150 $py benchmarks/peers.py --models "$model" --chains "$chains" --repeats 3 \
        --quiet-bdl --no-compile-check --json "$out/$name.json" ${PEERS_ARGS:-} "$@"
}
peers digits 1
peers wide 1 ${WIDE_ARGS:-}
part peers_compile 120 $py benchmarks/peers.py --compile-check-only --json "$out/peers_compile.json"
part cli_cache 100 $py benchmarks/cli_cache.py --variants adapted --repeats 1 --profile
part warmup_compile_depth3 90 $py benchmarks/warmup_compile.py --kernels sghmc --depth 3 \
    --steps 2000 --chains 8
part kernel_costs_l2e 100 $py benchmarks/kernel_costs.py --model cnn --repeats 3 --cost --hlo \
    --kernels l2e
peers digits 8
part loop_overhead 90 $py benchmarks/loop_overhead.py --repeats 3 --chains 1,8 \
    --kernels sgld,sghmc
part step_overhead 150 $py benchmarks/step_overhead.py --repeats 3 --chains --unblocked
part loop_hlo 60 $py benchmarks/loop_hlo.py
part loop_identity 60 $py benchmarks/loop_identity.py
part kernel_costs_cnn 130 $py benchmarks/kernel_costs.py --model cnn --repeats 3 --cost \
    --kernels "$kernels"
part kernel_costs_mlp 110 $py benchmarks/kernel_costs.py --model mlp --repeats 3 --kernels "$kernels"
part time_to_fidelity 200 $py benchmarks/time_to_fidelity.py --depths 1 --n 1000 \
    --kernels sghmc sgnht --max-steps 32000 --out "$out/time_to_fidelity.json" \
    --plot "$out/time_to_fidelity.png"
part time_to_fidelity_n10000 240 $py benchmarks/time_to_fidelity.py --depths 1 --n 10000 \
    --kernels sghmc sgnht --max-steps 32000 --out "$out/time_to_fidelity_n10000.json" \
    --plot "$out/time_to_fidelity_n10000.png"
part time_to_fidelity_depth2 ${TTF_DEPTH2_CAP:-600} $py benchmarks/time_to_fidelity.py --depths 2 \
    --n 10000 --kernels sghmc sgnht --max-steps 64000 --reference-dir "$out/ttf_refs" \
    --out "$out/time_to_fidelity_depth2.json" --plot "$out/time_to_fidelity_depth2.png"
part time_to_fidelity_depth3 ${TTF_DEPTH3_CAP:-600} $py benchmarks/time_to_fidelity.py --depths 3 \
    --n 10000 --kernels sghmc sgnht --max-steps 64000 --reference-dir "$out/ttf_refs" \
    --out "$out/time_to_fidelity_depth3.json" --plot "$out/time_to_fidelity_depth3.png"
part scaling_resnet 90 $py benchmarks/scaling.py --skip chains,data --host-devices 0 \
    --resnet-steps 16 --repeats 3
echo "total $(($(date +%s) - start)) s" | tee -a "$out/summary.txt"
