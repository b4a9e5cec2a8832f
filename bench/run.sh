#!/bin/sh
# run.sh -- the benchmark suite (bench/NOTES.md): builds raw.cu, runs raw
# CUDA C, gpumem and CuPy one after another on device 0, section by
# section, and writes one report.  make bench runs it.
#
#   bench/run.sh [OUTDIR]      run the suite
#   bench/run.sh --list        print the sections and their figures
#   bench/run.sh --help        print this text
#
# OUTDIR (default $BENCH_OUT, else bench/results) receives, no
# subfolders: the report DATE-TAG.md (DATE from date +%F, TAG the GPU
# model, e.g. 2026-11-30-h200.md), its plots DATE-TAG-{sweep,algo,loop,
# multigpu}.png and, with 2 or more GPUs, DATE-TAG-nccl-busbw.png, and
# DATE-TAG-records.tar.gz: every record (raw.jsonl, gpumem.jsonl,
# cupy.jsonl, made from each process's part, NAME-SECTION[-ROUND].jsonl,
# beside them; nccl-*.jsonl, comm-ipc-*.jsonl), the sharing, collectives
# and one-GPU collectives tables the report includes (sharing.md,
# DATE-TAG-nccl.md, comm-ipc.md), machine.txt, sections.txt (the
# section list), not-run.txt (what could not run here, and why) and a
# .log for every step.  While it runs, these live in OUTDIR/records,
# which is packed at the end.
#
# A run longer than one sitting (the budget, a job's time limit) goes
# on where it stopped: BENCH_RESUME=1 keeps OUTDIR/records after the
# packing, and a later run with BENCH_RESUME=1, the same OUTDIR, GPUs,
# gpumem commit, BENCH_ROUNDS and BENCH_ARGS keeps every item that run
# finished without a problem (done.txt: a section, or SECTION:ROUND of
# basic and sweep), runs the rest and writes one report of them all
# (machine.txt's "started" line says when each part began); records of
# another identity are cleared first.  Without BENCH_RESUME, a run
# starts from an empty records folder.
#
# Sections, in the order they run (each implementation runs each
# section in a process of its own, so a crash or a timeout loses one
# section, not the run): basic (launch alloc copy16 copy256 workload
# graph), sweep, algo (d2d algo_bw algo_sweep), loop (loop_sweep
# seed_rate), staging (gpumem only: the staging engine's chunk sizes
# against plain cudaMemcpy), kernels (gpumem only,
# bench/launch_overhead.py: a plugin's and a JIT kernel's launch time
# against the built-in saxpy's, and NVRTC's compile time; the plugin
# tests/plugins/cuda-plugin.cu is built into BENCH_BUILD with raw.cu;
# needs the cuda backend), multigpu (needs 2 GPUs; the host backend's
# simulated devices count), sharing (gpumem with PyTorch and CuPy, the
# C++ casters and other processes; needs the cuda backend), managed
# (gpumem only, bench/managed.py: managed and pinned memory; the loop on
# managed images of 1.5x the device, bench/managed_oversubscribe.py,
# only with GPUMEM_BENCH_OVERSUBSCRIBE=1; needs the cuda backend), spill
# (issue 52: bench/spill.py, gpumem's loop over partitions that do not
# fit a memory limit standing for the device's memory, beside raw.cu's
# spill_loop, raw CUDA C's best loop in the same memory, which needs the cuda
# backend; spill.py runs on the host backend too), peers
# (bench/peers.py: gpumem against CuPy, PyTorch, RMM and cuda.core, each
# row judged against the fastest; needs the cuda backend), nccl (the
# collectives, bench/nccl.sh; needs 2 GPUs) and commipc (ranks sharing
# one GPU, bench/comm_ipc.sh; needs the cuda backend and MPI, MPIRUN
# naming mpirun).  BENCH_SECTIONS="basic loop" chooses; a name not in
# the list stops the run before it starts.  A section that cannot run
# here, or one BENCH_SECTIONS leaves out, is a line in not-run.txt and
# every report row it would fill says why ("needs 2 GPUs").
#
# Environment: GPUMEM (the program; default src/gpumem of this tree),
# NVCC and NVCC_ARCH (default nvcc from PATH or /usr/local/cuda, sm_90),
# BENCH_PYTHON (a Python with CuPy, NumPy and matplotlib; default
# /opt/torch/.venv/bin/python3 where it exists, else python3),
# BENCH_BUILD (where raw is built; default bench/build), BENCH_ARGS
# (arguments for all three implementations, e.g. --quick), BENCH_TIMEOUT
# (seconds each section of each implementation may take; default 200),
# BENCH_BUDGET (seconds the whole run may take, default 540: a section
# starts only with time left, its timeout is cut to what is left, and
# 30 s stay for the report and the tarball),
# BENCH_ROUNDS (how many processes of each implementation run the basic
# section, the stitching workload among its figures, and the sweep, in
# turn: raw, gpumem, CuPy, raw, ...; default 3: small calls run at one
# of two speeds for a whole process, so one process a side decides a
# small-size ratio, and the 4 x 10 workload's, by chance; the report
# takes the median of the processes' medians, bench/NOTES.md),
# BENCH_PEERS_SITE (a folder with RMM and cuda.core installed, put
# first on the peers' PYTHONPATH; one that is not a folder stops the
# run, exit status 2) or BENCH_WHEELS (a folder of their
# wheels, default .whl of this tree, unpacked into BENCH_BUILD/peers-site),
# BENCH_COMMIT (the commit the report names, for a tree without .git;
# default git's HEAD of this tree, see commit.sh),
# BENCH_RESUME (1: go on with the run in OUTDIR, above; default 0),
# BENCH_BACKEND (gpumem's --backend; default cuda; "host" is a dry run
# for machines without a GPU: raw.cu is only compiled, gpumem runs on
# the host backend, CuPy where importable, and the report is written
# from what ran: use it with BENCH_ARGS=--quick).
#
# Exit status: 0 when the run completed and wrote its report, whatever
# the verdicts (the report's and this script's last line say how many
# targets were met); 1 when something failed to run: a build, a
# section that crashed or ran out of its time or the budget, the report
# or the tarball (the report is still written from what ran, and its
# "Problems in this run" names the step); 2 for a bad setting (an
# unknown section, BENCH_ROUNDS, BENCH_RESUME, BENCH_PEERS_SITE); 77
# when no GPU answers on the cuda
# backend (nothing is measured).

set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")

# The sections, in the order they run: the one list.  figures SECTION
# prints the figures a section's records hold (for basic to multigpu,
# the FIGURE arguments of raw.cu, bench_gpumem.py and bench_cupy.py;
# for the others, the figures their scripts' records carry), and fails
# for a name not in the list.  bench/report.py finds through it, in
# sections.txt, the section each of its rows needs.
SECTIONS="basic sweep algo loop staging kernels multigpu sharing managed spill peers nccl commipc"
figures () {
  case $1 in
    basic) echo "launch alloc copy16 copy256 workload graph" ;;
    sweep) echo "sweep" ;;
    algo) echo "d2d algo_bw algo_sweep" ;;
    loop) echo "loop_sweep seed_rate" ;;
    staging) echo "staging" ;;
    kernels) echo "kernel_launch jit_compile" ;;
    multigpu) echo "multigpu" ;;
    sharing) echo "pipeline" ;;
    managed) echo "managed" ;;
    spill) echo "spill_loop spill" ;;
    peers) echo "peer_alloc peer_copy peer_dlpack peer_pinned peer_managed peer_ipc" ;;
    nccl) echo "nccl" ;;
    commipc) echo "commipc" ;;
    *) return 1 ;;
  esac
}

case ${1:-} in
  -h|--help)
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0"
    exit 0 ;;
  --list)
    for section in $SECTIONS; do
      echo "$section: $(figures "$section")"
    done
    exit 0 ;;
  -*) echo "bench: unknown option '$1' (bench/run.sh --help)" >&2
      exit 2 ;;
esac
. "$here/commit.sh"
out=${1:-${BENCH_OUT:-$here/results}}
gpumem=${GPUMEM:-$top/src/gpumem}
build=${BENCH_BUILD:-$here/build}
args=${BENCH_ARGS:-}
limit=${BENCH_TIMEOUT:-200}
budget=${BENCH_BUDGET:-540}
rounds=${BENCH_ROUNDS:-3}
case $rounds in
  ''|*[!0-9]*|0) echo "bench: BENCH_ROUNDS must be a whole number from 1, not '$rounds'" >&2
                 exit 2 ;;
esac
backend=${BENCH_BACKEND:-cuda}
resume=${BENCH_RESUME:-0}
case $resume in
  0|1) ;;
  *) echo "bench: BENCH_RESUME must be 0 or 1, not '$resume'" >&2
     exit 2 ;;
esac
# A site that is not there would leave RMM and cuda.core out of the
# peers' rows (or put the Python's own cuda.core in) without a word.
if test -n "${BENCH_PEERS_SITE:-}" && test ! -d "$BENCH_PEERS_SITE"; then
  echo "bench: BENCH_PEERS_SITE '$BENCH_PEERS_SITE' is not a folder;" \
       "name one where RMM's and cuda.core's wheels are installed, or" \
       "leave it unset to unpack BENCH_WHEELS" >&2
  exit 2
fi
arch=${NVCC_ARCH:--gencode=arch=compute_90,code=sm_90}
nvcc=${NVCC:-}
if test -z "$nvcc"; then
  if command -v nvcc >/dev/null 2>&1; then
    nvcc=nvcc
  else
    nvcc=/usr/local/cuda/bin/nvcc
  fi
fi
python=${BENCH_PYTHON:-}
if test -z "$python"; then
  if test -x /opt/torch/.venv/bin/python3; then
    python=/opt/torch/.venv/bin/python3
  else
    python=python3
  fi
fi

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
fi
if test "$gpus" -eq 0 && test "$backend" != host; then
  echo "bench: no GPU here (nvidia-smi lists none): nothing to measure;" \
       "run make bench on a machine with an NVIDIA GPU" >&2
  exit 77
fi
chosen=${BENCH_SECTIONS:-$SECTIONS}
for section in $chosen; do
  if ! figures "$section" >/dev/null; then
    echo "bench: unknown section '$section' in BENCH_SECTIONS; the" \
         "sections: $SECTIONS" >&2
    exit 2
  fi
done

# needs SECTION: why SECTION cannot run here ("needs 2 GPUs"), or
# nothing where it can.
needs () {
  case $1 in
    kernels|sharing|managed|peers)
      test "$backend" = host && echo "needs the cuda backend" ;;
    multigpu)
      test "$backend" != host && test "$gpus" -lt 2 \
        && echo "needs 2 GPUs (nvidia-smi lists $gpus)" ;;
    nccl)
      if test "$backend" = host; then
        echo "needs the cuda backend"
      elif test "$gpus" -lt 2; then
        echo "needs 2 GPUs (nvidia-smi lists $gpus)"
      fi ;;
    commipc)
      if test "$backend" = host; then
        echo "needs the cuda backend"
      elif test -z "${MPIRUN:-}"; then
        echo "needs MPI (MPIRUN names no mpirun: configure found none)"
      fi ;;
  esac
  return 0
}
mkdir -p "$out/records" "$build" || exit 1
out=$(cd "$out" && pwd)
rec=$out/records
status=0
begin=$(date +%s)

# The run's identity: the GPUs, gpumem's version and commit, and the
# settings that shape the figures.  With BENCH_RESUME=1 and the records
# of a run of the same identity in OUTDIR/records (kept there by that
# run, also BENCH_RESUME=1), the items that run finished (done.txt: a
# section, or SECTION:ROUND of basic and sweep) are kept and not run
# again; any other records folder is emptied first.
gpumem_line="gpumem: $("$gpumem" --version 2>/dev/null | head -n 1), commit $(bench_commit "$top")"
identity=$(
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  echo "$gpumem_line"
  echo "backend $backend; rounds $rounds; BENCH_ARGS ${args:-(none)}")
finished=
if test "$resume" = 1 && test -f "$rec/identity.txt" \
   && test "$identity" = "$(cat "$rec/identity.txt")"; then
  finished=$(tr '\n' ' ' < "$rec/done.txt" 2>/dev/null)
  echo "bench: BENCH_RESUME: keeping the finished items of the run in $rec: ${finished:-none}"
else
  if test "$resume" = 1 && test -f "$rec/identity.txt"; then
    echo "bench: BENCH_RESUME: the records in $rec are of another GPU, commit or settings; starting afresh" >&2
  fi
  rm -rf "$rec" && mkdir -p "$rec" || exit 1
  printf '%s\n' "$identity" > "$rec/identity.txt"
  : > "$rec/done.txt"
fi

# runs_now ITEM [LABEL]: whether ITEM (a section, or SECTION:ROUND) runs
# now, not kept from the run resumed (step says so, naming LABEL); it
# counts the problems so far for finish.  finish ITEM: ITEM is finished
# (into done.txt) when no problem was added since its start.  due
# SECTION: runs_now for a section of a script of its own that was chosen
# and can run here.
problems () {
  cat "$rec/failed.txt" "$rec/skipped.txt" 2>/dev/null | wc -l
}
runs_now () {
  case " $finished " in
    *" $1 "*) step "kept from the run resumed: ${2:-$1}"
              return 1 ;;
  esac
  problems_before=$(problems)
  return 0
}
finish () {
  test "$(problems)" = "$problems_before" && echo "$1" >> "$rec/done.txt"
  return 0
}
due () {
  case " $sections " in *" $1 "*) runs_now "$1" ;; *) return 1 ;; esac
}

# The sections that run, in the list's order; what cannot run goes to
# not-run.txt ("section NAME: why", "impl NAME: why"), the list to
# sections.txt ("NAME: FIGURES").
rm -f "$rec/not-run.txt" "$rec/skipped.txt" "$rec/failed.txt"
: > "$rec/sections.txt"
sections=
for section in $SECTIONS; do
  echo "$section: $(figures "$section")" >> "$rec/sections.txt"
  case " $chosen " in
    *" $section "*) ;;
    *) echo "section $section: left out (BENCH_SECTIONS)" >> "$rec/not-run.txt"
       continue ;;
  esac
  why=$(needs "$section")
  if test -n "$why"; then
    echo "section $section: $why" >> "$rec/not-run.txt"
  else
    sections="$sections $section"
  fi
done
sections=${sections# }
if test "$backend" = host; then
  echo "impl raw: needs the cuda backend (BENCH_BACKEND=host: raw.cu is only compiled)" \
    >> "$rec/not-run.txt"
fi

step () {
  echo "bench: $* ($(( $(date +%s) - begin )) s)"
}

# failed WHAT: something did not run; the report's "Problems in this
# run" lists failed.txt, and the exit status becomes 1.
failed () {
  echo "$*" >> "$rec/failed.txt"
  status=1
}

# What ran where.
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,pcie.link.gen.max,pcie.link.width.max \
    --format=csv,noheader 2>/dev/null \
    | sed 's/^/gpu (name, driver, memory, max SM clock, max memory clock, PCIe gen, width): /'
  echo "CUDA version (driver, nvidia-smi): $(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)"
  echo "nvcc: $("$nvcc" --version 2>/dev/null | grep -i release | head -n 1)"
  echo "host: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(awk '/^MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) RAM (MemTotal)"
  echo "$gpumem_line"
  echo "Python for CuPy and the report: $python ($("$python" --version 2>&1))"
  if test -n "$finished" && test -f "$rec/started.txt"; then
    echo "started: $(cat "$rec/started.txt"); resumed $(date -u '+%F %T UTC'), keeping $finished"
  else
    date -u '+%F %T UTC' > "$rec/started.txt"
    echo "started: $(cat "$rec/started.txt")"
  fi
  echo "GPUs: $gpus; sections: $sections; rounds of basic and sweep: $rounds; BENCH_ARGS: ${args:-(none)}"
} > "$rec/machine.txt"
cat "$rec/machine.txt"

step "building raw.cu"
# NVCC and NVCC_ARCH may hold several words (make passes two -gencode).
# shellcheck disable=SC2086
if ! $nvcc -std=c++17 -O3 $arch -I"$top/kernels" -I"$top/src/core" -I"$top/include" -Xcompiler -Wall \
     -o "$build/raw" "$here/raw.cu" "$top/kernels/algo_seed.cu" \
     "$top/kernels/algo.cu" "$top/kernels/saxpy.cu" > "$rec/build.log" 2>&1; then
  cat "$rec/build.log" >&2
  echo "bench: building raw.cu FAILED" >&2
  failed "building raw.cu FAILED (build.log)"
  test "$backend" = host \
    || echo "impl raw: raw.cu did not build (build.log)" >> "$rec/not-run.txt"
fi
case " $sections " in
  *" kernels "*)
    step "building the CUDA plugin (tests/plugins/cuda-plugin.cu)"
    # shellcheck disable=SC2086
    if ! $nvcc -std=c++17 -O3 $arch -shared -Xcompiler -fPIC \
         -I"$top/include" -o "$build/cuda-plugin.so" \
         "$top/tests/plugins/cuda-plugin.cu" > "$rec/build-plugin.log" 2>&1; then
      cat "$rec/build-plugin.log" >&2
      echo "bench: building the CUDA plugin FAILED" >&2
      failed "building the CUDA plugin FAILED (build-plugin.log)"
    fi ;;
esac

# time_left WHAT MIN: sets left, the seconds the budget has for WHAT,
# and this, the most WHAT may take (BENCH_TIMEOUT or less); with fewer
# than MIN, WHAT is not run: skipped.txt says so, the exit status will
# be 1, and it returns 1.
time_left () {
  left=$(( budget - 30 - ($(date +%s) - begin) ))
  this=$limit
  test "$left" -lt "$this" && this=$left
  test "$left" -ge "$2" && return 0
  echo "bench: $1 not run: the ${budget} s budget is spent" >&2
  echo "$1: not run (budget spent)" >> "$rec/skipped.txt"
  status=1
  return 1
}

# run NAME SECTION COMMAND...: runs one section of one implementation,
# its records to NAME-SECTION.jsonl (NAME-SECTION-ROUND for basic and
# sweep; all NAME's parts make NAME.jsonl before the report) and its
# progress to NAME-SECTION.log; 77 (not available) is a skip.
run () {
  name=$1
  section=$2
  shift 2
  part=$rec/$name-$section${round:+-$round}
  rm -f "$part.jsonl"
  time_left "$name, $section" 10 || return 0
  step "running $name, $section${round:+ (round $round of $rounds)} (at most $this s)"
  timeout "$this" "$@" --out "$part.jsonl" > "$part.log" 2>&1
  rc=$?
  tail -n 2 "$part.log"
  case $rc in
    0) ;;
    77) echo "bench: $name skipped (not available here; see $part.log)" >&2
        if test "$name" = cupy; then
          echo "impl cupy: needs CuPy (see $(basename "$part").log)" \
            >> "$rec/not-run.txt"
        else
          echo "section $section: $(tail -n 1 "$part.log")" >> "$rec/not-run.txt"
        fi
        return 77 ;;
    124) echo "bench: $name, $section ran past ${limit} s and was stopped" >&2
         failed "$name, $section: ran past its time and was stopped ($(basename "$part").log)" ;;
    *) echo "bench: $name, $section FAILED (exit status $rc; see $part.log)" >&2
       failed "$name, $section: FAILED, exit status $rc ($(basename "$part").log)" ;;
  esac
  return 0
}

cupy_ok=yes
# basic and sweep once a round (the part files and logs named with the
# round: NAME-SECTION-ROUND), the others once.
plan=
for section in $sections; do
  case $section in
    basic|sweep)
      r=1
      while test "$r" -le "$rounds"; do
        plan="$plan $section:$r"
        r=$((r + 1))
      done ;;
    *) plan="$plan $section:" ;;
  esac
done
for item in $plan; do
  section=${item%%:*}
  round=${item#*:}
  case $section in
    sharing|managed|spill|peers|nccl|commipc) continue ;;   # scripts of their own, below
  esac
  runs_now "$item" "$section${round:+ (round $round)}" || continue
  list=$(figures "$section")
  if test "$section" = kernels; then
    # gpumem alone: plugin and JIT kernels against its built-in one.  Of
    # BENCH_ARGS it takes --quick only (the others size other figures).
    quick=
    case " $args " in *" --quick "*) quick=--quick ;; esac
    run gpumem kernels "$gpumem" -q --backend="$backend" \
      "$here/launch_overhead.py" --plugin "$build/cuda-plugin.so" $quick
    finish "$item"
    continue
  fi
  if test -x "$build/raw" && test "$backend" != host \
     && test "$section" != staging; then
    # shellcheck disable=SC2086
    run raw "$section" "$build/raw" $args $list
  fi
  # shellcheck disable=SC2086
  run gpumem "$section" "$gpumem" -q --backend="$backend" \
    "$here/bench_gpumem.py" --gpumem "$gpumem" $args $list
  if test "$cupy_ok" = yes && test "$section" != staging; then
    # shellcheck disable=SC2086
    run cupy "$section" "$python" "$here/bench_cupy.py" $args $list \
      || cupy_ok=no
  fi
  if test "$section" = multigpu; then
    # The devices at the same time (gpumem.concurrent), against raw C's
    # concurrent loop: its records join gpumem's.  (Last: run sets
    # $section.)
    # shellcheck disable=SC2086
    run gpumem multigpu-concurrent "$gpumem" -q --backend="$backend" \
      "$here/multigpu_gpumem.py" $args
  fi
  finish "$item"
done

# Runs bench/SCRIPT (a benchmark of its own that writes into the
# records; 77 is a skip) as section NAME, described by WHAT, with what is
# left of the budget; its output goes to LOG in the records.
budgeted () {
  name=$1 what=$2 script=$3 log=$4
  time_left "$name" 60 || return
  step "running $what (bench/$script, at most $left s)"
  GPUMEM="$gpumem" BENCH_PYTHON=$python timeout "$left" \
    sh "$here/$script" "$rec" > "$rec/$log" 2>&1
  case $? in
    0) ;;
    77) echo "section $name: $(tail -n 1 "$rec/$log")" >> "$rec/not-run.txt" ;;
    *) echo "bench: bench/$script FAILED or ran out of time (see $log)" >&2
       failed "$name: bench/$script FAILED or ran out of time ($log)" ;;
  esac
  tail -n 2 "$rec/$log"
}

# The sharing section (gpumem only, on the cuda backend): what it costs a
# C++ binding to take gpumem arrays (bench/binding_overhead.py, pybind11
# and nanobind), other libraries to allocate from gpumem's pool
# (bench/frameworks_alloc.py, PyTorch and CuPy; bench/frameworks_mixed.py,
# all of them at once, one pool against three; bench/pool_alloc.py,
# gpumem's exportable pool against CUDA's default pool, in turn;
# bench/frameworks_pipeline.py,
# PyTorch, CuPy and gpumem in turn at 60% of the device each, whose
# records join gpumem's for the report's verdict) and other processes to
# use its memory (bench/sharing_ipc.py, arrays made shared;
# bench/plain_share.py, plain arrays by reference: a child's writes and
# 10,000 share/open/close cycles through the share server).  The last
# lines each prints go to sharing.md, which the report includes; each
# one's whole output to sharing-NAME.log; 77 is a skip, another status a
# failure.
# sharing_step NAME LINES SCRIPT [ARGS...]
sharing_step () {
  name=$1 lines=$2 script=$3
  shift 3
  time_left "sharing, $name" 20 || return
  step "running gpumem, sharing: $name (at most $this s)" >&2
  GPUMEM="$gpumem" timeout "$this" "$gpumem" -q "$here/$script" "$@" \
    > "$rec/sharing-$name.log" 2>&1
  rc=$?
  case $rc in
    0) ;;
    77) echo "section sharing: $name: $(tail -n 1 "$rec/sharing-$name.log")" \
          >> "$rec/not-run.txt" ;;
    *) failed "sharing, $name: bench/$script FAILED or ran out of time, exit status $rc (sharing-$name.log)" ;;
  esac
  tail -n "$lines" "$rec/sharing-$name.log"
}
if due sharing; then
  # The build tree's PyTorch allocator library, not an installed one.
  GPUMEM_TORCH_SHIM=${GPUMEM_TORCH_SHIM:-$(dirname "$gpumem")/.libs/libgpumem-torch.so}
  export GPUMEM_TORCH_SHIM
  {
    echo '```'
    sharing_step casters 10 binding_overhead.py
    echo '```'
    echo
    sharing_step allocators 9 frameworks_alloc.py
    echo
    echo '```'
    sharing_step ipc 3 sharing_ipc.py
    sharing_step plain 2 plain_share.py
    sharing_step pools 3 pool_alloc.py
    sharing_step mixed 3 frameworks_mixed.py --seconds 6
    sharing_step pipeline 2 frameworks_pipeline.py \
      --out "$rec/gpumem-pipeline.jsonl"
    echo '```'
  } > "$rec/sharing.md"
  cat "$rec/sharing.md"
  finish sharing
fi

# The managed section (gpumem only, on the cuda backend; issue 51):
# bench/managed.py's figures of managed and pinned memory and their
# verdicts, into managed.md, which the report includes; then the
# stitching loop on managed images of 1.5x the device's memory
# (bench/managed_oversubscribe.py), only where
# GPUMEM_BENCH_OVERSUBSCRIBE=1 asks for it: asking a device for more
# managed memory than it has can stall it, so managed.md says it was
# left out otherwise.  Each one's output goes to managed-NAME.log.
# script_step SECTION NAME SCRIPT [ARGS...]: runs gpumem on SCRIPT within
# the budget, its output to SECTION-NAME.log; its exit status (0 where
# the budget was spent, which skipped.txt says).
script_step () {
  section=$1 name=$2 script=$3
  shift 3
  time_left "$section, $name" 20 || return 0
  step "running gpumem, $section: $name (at most $this s)"
  GPUMEM="$gpumem" timeout "$this" "$gpumem" -q --backend="$backend" \
    "$here/$script" "$@" > "$rec/$section-$name.log" 2>&1
}
if due managed; then
  rm -f "$rec/managed.md"
  script_step managed figures managed.py --markdown "$rec/managed.md" \
    --json "$rec/managed.json"
  rc=$?
  test $rc = 0 \
    || failed "managed: bench/managed.py FAILED or ran out of time, exit status $rc (managed-figures.log)"
  script_step managed oversubscribed managed_oversubscribe.py \
    --markdown "$rec/managed.md" --json "$rec/managed-oversubscribed.json"
  rc=$?
  case $rc in
    0) ;;
    77) echo "- The loop on managed images of 1.5x the device's memory: not run ($(tail -n 1 "$rec/managed-oversubscribed.log"))." \
          >> "$rec/managed.md" ;;
    *) failed "managed: bench/managed_oversubscribe.py FAILED or ran out of time, exit status $rc (managed-oversubscribed.log)" ;;
  esac
  test -f "$rec/managed.md" && cat "$rec/managed.md"
  finish managed
fi

# The spill section (issue 52): raw CUDA C's best for the loop over
# partitions that do not fit (raw.cu's spill_loop: one or two buffers
# in the same memory, uploads beside the kernels, on the cuda backend), then
# bench/spill.py, gpumem's loops under a memory limit that stands for
# the device's memory, the cost of spilling when nothing spills, and a
# spilled array's return; spill.py reads raw's record from raw-spill.jsonl
# (its prefetch verdict says "not run" where raw did not run) and
# writes spill.md, which the report includes.  Of BENCH_ARGS both take
# --quick only, so their sizes match.
if due spill; then
  quick=
  case " $args " in *" --quick "*) quick=--quick ;; esac
  if test -x "$build/raw" && test "$backend" != host; then
    # shellcheck disable=SC2086
    run raw spill "$build/raw" $quick spill_loop
  fi
  # shellcheck disable=SC2086
  script_step spill figures spill.py $quick --raw "$rec/raw-spill.jsonl" \
    --markdown "$rec/spill.md" --json "$rec/spill.json"
  rc=$?
  test $rc = 0 \
    || failed "spill: bench/spill.py FAILED or ran out of time, exit status $rc (spill-figures.log)"
  test -f "$rec/spill.md" && cat "$rec/spill.md"
  finish spill
fi

# The peers section (bench/peers.py, run by $python): gpumem against
# CuPy, PyTorch, RMM and cuda.core, each in BENCH_ROUNDS processes of
# its own in turn, every row judged against the fastest peer; gpumem as
# the build's extension module under the same Python as the peers where
# the build has one for it (src/.libs), else under its program.  RMM and
# cuda.core come from BENCH_PEERS_SITE (a folder where their wheels are
# installed) or else from BENCH_WHEELS (default .whl of this tree),
# whose wheels peers.py unpacks into BENCH_BUILD/peers-site; a library
# that cannot be imported is a "not run: ..." cell.  Its table,
# peers.md, goes into the report, and its verdict lines count.
if due peers; then
  if time_left peers 60; then
    quick=
    case " $args " in *" --quick "*) quick=--quick ;; esac
    wheels=${BENCH_WHEELS:-$top/.whl}
    if test -n "${BENCH_PEERS_SITE:-}"; then
      set -- --site "$BENCH_PEERS_SITE"
    elif ls "$wheels"/*.whl >/dev/null 2>&1; then
      rm -rf "$build/peers-site"
      set -- --wheels "$wheels" --site "$build/peers-site"
    else
      set --
    fi
    step "running the peers (bench/peers.py, $rounds rounds, at most $left s)"
    # shellcheck disable=SC2086
    GPUMEM="$gpumem" timeout "$left" "$python" "$here/peers.py" \
      --gpumem "$gpumem" --gpumem-module "$(dirname "$gpumem")/.libs" \
      --rounds "$rounds" $quick "$@" \
      --out "$rec/peers.jsonl" --table "$rec/peers.md" > "$rec/peers.log" 2>&1
    rc=$?
    case $rc in
      0) ;;
      124) failed "peers: bench/peers.py ran out of the budget (peers.log)" ;;
      *) failed "peers: bench/peers.py FAILED, exit status $rc (peers.log)" ;;
    esac
    grep '^- \|^peers: ' "$rec/peers.log" | tail -n 20
  fi
  finish peers
fi

# Collectives where 2 or more GPUs answer (bench/nccl.sh: its records
# and logs join the others, its table DATE-TAG-nccl.md goes into the
# report, its plot beside it; 77 is a skip); ranks sharing one GPU,
# where MPI is built in (bench/comm_ipc.sh: the shared windows against
# MPI's staging; its table, comm-ipc.md, goes into the report).
if due nccl; then
  budgeted nccl "the collectives benchmark" nccl.sh nccl.log
  finish nccl
fi
if due commipc; then
  budgeted commipc "the one-GPU collectives" comm_ipc.sh comm-ipc.log
  finish commipc
fi

# Each implementation's records, from all its parts (the report merges
# a figure's records from every process, whatever their order).
for name in raw gpumem cupy; do
  rm -f "$rec/$name.jsonl"
  for part in "$rec/$name"-*.jsonl; do
    test -f "$part" && cat "$part" >> "$rec/$name.jsonl"
  done
done

step "writing the report"
date=$(date +%F)
if ! "$python" "$here/report.py" "$rec" --date "$date" > "$rec/report.log" 2>&1; then
  cat "$rec/report.log" >&2
  echo "bench: report.py FAILED" >&2
  status=1
fi
cat "$rec/report.log"
verdicts=$(sed -n 's/^verdicts: //p' "$rec/report.log")
# Out of the records: the report and the plots; the tables it includes
# stay in the tarball.
report=$(sed -n 's/^report: //p' "$rec/report.log" | head -n 1)
if test -n "$report" && test -f "$report"; then
  mv -f "$report" "$out/"
  report=$out/$(basename "$report")
fi
for file in "$rec"/*.png; do
  test -f "$file" && mv -f "$file" "$out/"
done
base=$(basename "${report:-$out/$date-gpu.md}" .md)
if tar -czf "$out/$base-records.tar.gz" -C "$out" records; then
  # A run that may be resumed keeps its records.
  test "$resume" = 1 || rm -rf "$rec"
else
  echo "bench: packing the records FAILED; they stay in $rec" >&2
  status=1
fi
step "done: ${report:-no report}; records in $out/$base-records.tar.gz"
if test "$status" -eq 0; then
  echo "bench: the run completed; ${verdicts:-no verdicts}"
else
  echo "bench: something FAILED to run (see above and the report's" \
       "\"Problems in this run\"); ${verdicts:-no verdicts}" >&2
fi
exit $status

