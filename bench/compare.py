#!/usr/bin/env python3
"""Run dlc's benchmarks and the PyTorch peers side by side on this machine and print the ratios.

Usage (after `bash bench/setup.sh`):
    bench/.venv/bin/python bench/compare.py [--quick] [--runs N] [--threads T] [--no-build] [--only GROUP...]

GROUPs (all by default): gelu, mlp, bf16 (the MLP step under `precision = bf16` against PyTorch's
CPU autocast to bf16), cnn, conv-bn, epoch (one MNIST epoch, the whole job in fresh processes,
data preparation included), data (MNIST's epoch, loading alone), images (JPEG folders, 32x32 and
224x224, loading alone), images-train (training a small CNN on the JPEG folder: the epoch's data
wait), text (tiny Shakespeare tokenised by a BPE tokenizer into blocks, against `datasets.map`),
startup, memory. E.g. `--quick --no-build --only bf16 epoch`.

Fairness rules, so that a ratio says something about dlc and not about the set-up:
- every dlc benchmark and every peer script runs --runs times (3; --quick: 1, with fewer
  iterations), each time in a fresh process; a figure is quoted as min (the fastest sample of all
  runs) and median (the median of the runs' medians); the speed rows run in rounds, each round
  dlc's benchmarks then the peer once (`side_by_side`), so both sides sample the same minutes of
  a machine whose speed drifts;
- each peer runs on glibc's allocator and again with jemalloc (and tcmalloc) preloaded when the
  library is installed; PyTorch's "best" is the fastest of all its variants x allocators (eager,
  F.gelu, F.gelu into a preallocated output, fused AdamW, channels-last, torch.compile), and the
  table names the winner, e.g. `compile+jemalloc`;
- the same thread count on both sides (--threads, 2 by default);
- a training step's row times both sides on one batch: the peers step on one fixed tensor, so
  dlc steps on its data's first batch again and again (`dlc bench --one-batch`); dlc's time with
  a fresh batch from its feed each step (the feed's thread beside the step, the batch's cache
  misses) is quoted in the row's note, and the data's own cost has rows of its own (epoch,
  data);
- start-up is the same program to its first finished step from a cold process, data loading
  included: examples/mnist_mlp.dl against the same model in PyTorch (bench/peers/startup.py);
- peak memory is quoted total and net of each runtime's empty process (`dlc --version`; a Python
  that only imports torch), measured by /usr/bin/time for each fresh process.
The header records the CPU, its vector extensions, the date, the load average before and after
(and at the end the share of CPU time a VM's hypervisor stole),
torch's version and the threads, so that a quote can be traced to its conditions; every table's
title line names the CPU and its vector extensions again, so that any table copied alone names its
machine, and the step rows name the matrix-product kernels dlc chose (`dlc bench --json`'s
`tuning.products`).
"""
import argparse, contextlib, datetime, re, shutil, signal, traceback, importlib.metadata, importlib.util, json, os, platform, statistics, subprocess, sys, tempfile, time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DLC = ROOT / "target" / "release" / "dlc"
PEERS = ROOT / "bench" / "peers"
GNU_TIME = Path("/usr/bin/time")

# Where Debian/Ubuntu put the allocators we preload (libjemalloc2, libgoogle-perftools4).
ALLOCATOR_LIBS = {
    "jemalloc": ["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"],
    "tcmalloc": ["/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4", "/usr/lib/aarch64-linux-gnu/libtcmalloc.so.4"],
}
# The CPU flags worth knowing when reading a kernel's speed.
VECTOR_FLAGS = ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"]


# ---------------------------------------------------------------------------------------------
# Running fresh processes

@dataclass
class Child:
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_mb: float | None  # only when run with measure_memory


def run(cmd, env=None, measure_memory=False):
    """Run cmd in a fresh process from the repository root; fail loudly with its stderr.

    Peak memory comes from /usr/bin/time, not from wait4's rusage: a child's ru_maxrss starts at
    the RSS of the process that spawned it (Linux folds the parent's high-water mark in at exec),
    so measuring through this Python would add its own RSS to every figure. GNU time forks from
    its own small process and reports the child's alone."""
    env = dict(os.environ if env is None else env)
    if cmd[0] == DLC:
        wait_for_dlc()  # it may be mid-rebuild
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        full = [str(GNU_TIME), "-f", "%M", "-o", rss.name, *map(str, cmd)] if measure_memory else list(map(str, cmd))
        t0 = time.perf_counter()
        out = subprocess.run(full, capture_output=True, text=True, env=env, cwd=ROOT)
        wall = time.perf_counter() - t0
        if out.returncode != 0:
            how = f"killed by {signal.Signals(-out.returncode).name}" if out.returncode < 0 else f"exit status {out.returncode}"
            raise RuntimeError(f"`{' '.join(map(str, cmd))}` failed ({how}):\n{out.stderr[-2000:]}")
        peak = float(Path(rss.name).read_text().split()[-1]) / 1024 if measure_memory else None  # %M is KiB
    return Child(out.stdout, out.stderr, wall, peak)


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def allocators():
    """(name, extra environment) for each allocator to run the peers on: glibc's first."""
    found = [("default", {})]
    for name, paths in ALLOCATOR_LIBS.items():
        lib = next((p for p in paths if Path(p).exists()), None)
        if lib:
            found.append((name, {"LD_PRELOAD": lib}))
    return found


def dlc_env(threads):
    return dict(os.environ, RAYON_NUM_THREADS=str(threads))


def wait_for_dlc(limit_s=900):
    """The binary may be (re)built by someone else right now: wait for it rather than fail."""
    waited = 0
    while not DLC.exists():
        if waited >= limit_s:
            sys.exit(f"{DLC} does not exist; build it with `cargo build --release -p dlc`")
        print(f"waiting for {DLC} to appear...", file=sys.stderr)
        time.sleep(30)
        waited += 30


@contextlib.contextmanager
def scratch_copy(program):
    """A temporary directory laid out like the repository for `program` (a path relative to the
    root): the program copied to the same relative path, examples/data linked to the repository's.
    Paths in a program are relative to its folder, so `data/mnist` (from examples/) and
    `../examples/data/mnist` (from bench/) read the repository's data as they would there, while
    what the run writes (`checkpoint "runs/..."`, metrics) lands in the temporary directory:
    nothing in the repository, and no earlier run in the way of the next (dlc refuses to train
    into a checkpoint directory that holds one). Yields the copy's absolute path."""
    with tempfile.TemporaryDirectory(prefix="dlc-compare-") as tmp:
        (Path(tmp) / "examples").mkdir()
        (Path(tmp) / "examples" / "data").symlink_to(ROOT / "examples" / "data")
        copy = Path(tmp) / program
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / program, copy)
        yield copy


# ---------------------------------------------------------------------------------------------
# Statistics over runs

@dataclass
class Stat:
    min: float     # the fastest sample of all runs
    median: float  # the median of the runs' medians


def stat(mins, medians):
    return Stat(min(mins), statistics.median(medians))


def dlc_once(file, steps, cfg, one_batch=False):
    """One fresh process of `dlc bench FILE --json`: its report. `one_batch`: every step on the
    first batch (`--one-batch`), as the peers step on one tensor."""
    out = run([DLC, "bench", ROOT / "bench" / file, "--json", "--steps", steps, *(["--one-batch"] if one_batch else [])],
              env=dlc_env(cfg.threads))
    return json_lines(out.stdout)[-1]


def dlc_stat(reports, cfg):
    """(Stat in ms, the last report) of dlc bench's reports; their product kernels noted in `cfg`."""
    # `min_ms` is in dlc bench's report; older builds printed the median alone.
    mins = [r.get("min_ms", r["median_ms"]) for r in reports]
    for r in reports:
        for k in products(r).get("kernels") or []:
            if k not in cfg.product_kernels:
                cfg.product_kernels.append(k)
    return stat(mins, [r["median_ms"] for r in reports]), reports[-1]


def products(report):
    """`tuning.products` of a `dlc bench --json` report: {"kernels": [the matrix-product kernels
    this machine has], "shapes": {kernel: how many of the step's product shapes it runs}}, or {}
    from a build that reports none."""
    tuning = report.get("tuning")
    p = tuning.get("products") if isinstance(tuning, dict) else None
    return p if isinstance(p, dict) else {}


def products_note(report):
    """The row note's share: which kernels ran the step's matrix products, e.g. `products: onednn 5`."""
    p = products(report)
    if not p:
        return "products: not reported"
    shapes = p.get("shapes") or {}
    return "products: " + (", ".join(f"{k} {n}" for k, n in shapes.items()) or "none run")


def peer(script, args, cfg, runs=None):
    """Every row of a peer script, run --runs times under each allocator in fresh processes. Each
    row says which allocator it ran on (common.py reads it from the process's memory map)."""
    return [row for _ in range(cfg.runs if runs is None else runs) for row in peer_once(script, args, cfg)]


def peer_once(script, args, cfg):
    """Every row of one fresh process of a peer script under each allocator."""
    rows = []
    for name, extra in cfg.allocators:
        env = dict(os.environ, **extra)
        out = run([sys.executable, PEERS / script, "--threads", cfg.threads, *args], env=env)
        for row in json_lines(out.stdout):
            row["process_wall_s"] = out.wall_s  # spawn to exit, Python's start-up included
            if row.get("allocator", name) != name:
                raise RuntimeError(f"{script}: asked for {name}, ran on {row['allocator']} (is LD_PRELOAD honoured?)")
            row.setdefault("allocator", name)
            rows.append(row)
    return rows


def side_by_side(cfg, dlc_jobs, script, args):
    """The speed rows' runs, interleaved: each of --runs rounds runs every dlc benchmark of
    `dlc_jobs` ({key: (file, steps, one_batch)}) once and then the peer script once (under each
    allocator), each in a fresh process, so that both sides sample the same minutes of the
    machine. (Run one side's rounds and then the other's, a ratio moved with the machine's
    speed between them: on the shared 2-core VM both sides drift by 10-15% within minutes, and
    conv-BN read 1.20x and 0.85x in two runs 20 minutes apart, stop 49.) Returns {key: (Stat,
    last report)} and the peer's rows."""
    reports, rows = {k: [] for k in dlc_jobs}, []
    for _ in range(cfg.runs):
        for k, (file, steps, one_batch) in dlc_jobs.items():
            reports[k].append(dlc_once(file, steps, cfg, one_batch))
        rows += peer_once(script, args, cfg)
    return {k: dlc_stat(v, cfg) for k, v in reports.items()}, rows


def peer_stats(rows, keep=lambda r: True):
    """{"variant+allocator": Stat in ms} over the rows kept, pooling the runs."""
    groups = by_variant(filter(keep, rows))
    return {k: stat([r["min_us"] / 1e3 for r in g], [r["median_us"] / 1e3 for r in g]) for k, g in groups.items()}


def by_variant(rows):
    """Peer rows grouped by "variant+allocator"."""
    groups = {}
    for r in rows:
        groups.setdefault(f"{r['variant']}+{r['allocator']}", []).append(r)
    return groups


def medians_by_variant(rows, field):
    """{"variant+allocator": the median of `field`} over the rows, and the key of the smallest."""
    med = {k: statistics.median(r[field] for r in g) for k, g in by_variant(rows).items()}
    return med, min(med, key=med.get)


def best_of(stats, variants):
    """The fastest of the given variants over all allocators: (name, Stat by median), and the name
    of the fastest by min when another one wins that."""
    cands = {k: s for k, s in stats.items() if k.split("+")[0] in variants}
    by_median = min(cands, key=lambda k: cands[k].median)
    by_min = min(cands, key=lambda k: cands[k].min)
    return by_median, Stat(cands[by_min].min, cands[by_median].median), by_min


# ---------------------------------------------------------------------------------------------
# The header

# x86 generations by (vendor, family, model range), for VMs whose model name hides them ("AMD
# EPYC"): Zen 4 and Zen 5 differ in their AVX-512 datapaths (256 against 512 bits wide).
GENERATIONS = [
    ("AuthenticAMD", 25, range(0x00, 0x10), "Zen 3"), ("AuthenticAMD", 25, range(0x20, 0x60), "Zen 3"),
    ("AuthenticAMD", 25, range(0x10, 0x20), "Zen 4"), ("AuthenticAMD", 25, range(0x60, 0x80), "Zen 4"),
    ("AuthenticAMD", 25, range(0xa0, 0xb0), "Zen 4"), ("AuthenticAMD", 26, range(0x00, 0x100), "Zen 5"),
    ("GenuineIntel", 6, range(85, 86), "Skylake-SP/Cascade Lake"), ("GenuineIntel", 6, range(106, 107), "Ice Lake-SP"),
    ("GenuineIntel", 6, range(143, 144), "Sapphire Rapids"), ("GenuineIntel", 6, range(207, 208), "Emerald Rapids"),
    ("GenuineIntel", 6, range(173, 174), "Granite Rapids"),
]


def cpu_info():
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    # Each field as the first processor lists it.
    ids = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        ids.setdefault(key.strip(), value.strip())
    model, flags = ids.get("model name", platform.processor()), set(ids.get("flags", "").split())
    if "cpu family" in ids and "model" in ids:
        family, number = int(ids["cpu family"]), int(ids["model"])
        generation = next((g for v, f, r, g in GENERATIONS if v == ids.get("vendor_id") and f == family and number in r), None)
        model += f" (family {family} model {number}" + (f", {generation})" if generation else ")")
    return model, [f for f in VECTOR_FLAGS if f in flags]


def machine_tag():
    """The CPU model and its vector extensions in one short bracket, for every table's title line,
    e.g. `Intel Xeon Processor [avx2 fma avx512f avx512bw ... amx_bf16 amx_int8]` (sse4_2 and avx
    left out where avx2 implies them)."""
    model, flags = cpu_info()
    model = " ".join(re.sub(r"\((R|TM|tm)\)", "", model).split()) or "unknown CPU"
    shown = [f for f in flags if not ("avx2" in flags and f in ("sse4_2", "avx"))]
    return f"{model} [{' '.join(shown) or 'no vector extensions found'}]"


def git_state():
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return head + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def torch_version():
    """torch.__version__ (with its build tag, e.g. +cpu) without importing torch into this process:
    compare.py stays small, and importing torch here would take seconds."""
    try:
        spec = importlib.util.find_spec("torch")
        text = (Path(spec.submodule_search_locations[0]) / "version.py").read_text()
        return next(line.split("=", 1)[1].strip().strip("'\"") for line in text.splitlines() if line.startswith("__version__"))
    except (AttributeError, OSError, StopIteration, TypeError):
        try:
            return importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            return "not installed"


def cpu_ticks():
    """(all, stolen) clock ticks of every CPU so far, from /proc/stat's `cpu` line; None elsewhere."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    return sum(fields[:8]), fields[7] if len(fields) > 7 else 0


STEAL_AT_START = cpu_ticks()


def steal_note(start):
    """The share of the run's CPU time the hypervisor gave to other guests (a VM's `steal`): a run
    with much of it says more about the neighbours than about either side."""
    end = cpu_ticks()
    if start is None or end is None or end[0] <= start[0]:
        return "not known here"
    return f"{(end[1] - start[1]) / (end[0] - start[0]):.1%} of the run's CPU time (the hypervisor's `steal`)"


def header(cfg):
    model, flags = cpu_info()
    built = datetime.datetime.fromtimestamp(DLC.stat().st_mtime, datetime.timezone.utc).isoformat(timespec="seconds")
    print(f"date (UTC)       {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")
    print(f"CPU              {model}, {os.cpu_count()} logical cores")
    print(f"vector ext.      {' '.join(flags) or 'none found'}")
    print(f"load average     {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min) before")
    print(f"dlc              {DLC.relative_to(ROOT)} built {built}, tree at {git_state()}")
    print(f"torch            {torch_version()} (python {platform.python_version()})")
    print(f"threads          {cfg.threads} on each side (RAYON_NUM_THREADS, torch.set_num_threads)")
    print(f"allocators       {', '.join(n for n, _ in cfg.allocators)} (PyTorch peers run on each)")
    print(f"runs             {cfg.runs} fresh process(es) a benchmark, {cfg.iters} timed iterations each"
          f" ({cfg.conv_iters} for the convolutions)")


# ---------------------------------------------------------------------------------------------
# The speed table

@dataclass
class Row:
    name: str
    dlc: Stat
    eager: Stat
    compile: Stat
    best: Stat
    winner: str
    winner_min: str
    note: str


def step_jobs(files, steps):
    """Training steps' dlc benchmarks for `side_by_side`, each file's on one batch (what the row
    compares: the peers step on one fixed tensor) and with a fresh batch from its feed each step
    (quoted in the note by `with_fresh`)."""
    return {(f, kind): (f, steps, kind == "one") for f in files for kind in ("one", "fresh")}


def step_results(dlc, file):
    """A step's (one-batch Stat, its report, fresh-batch Stat) from `side_by_side`'s results."""
    (one, report), (fresh, _) = dlc[(file, "one")], dlc[(file, "fresh")]
    return one, report, fresh


def with_fresh(row, fresh):
    """`row` with dlc's fresh-batch figure added to its note."""
    row.note += (f"; dlc with a fresh batch from its feed each step: {fresh.median:.3f} ms med"
                 f" ({row.best.median / fresh.median:.2f}x best)")
    return row


def speed_row(name, dlc, stats, variants, note, eager_variant="eager", compile_variant="compile"):
    """One workload: dlc against eager, compile (each on its better allocator) and the best of
    `variants`. The bf16 rows pass their autocast variants as eager and compile."""
    eager = best_of(stats, [eager_variant])[1]
    compiled = best_of(stats, [compile_variant])[1]
    winner, best, winner_min = best_of(stats, variants)
    return Row(name, dlc, eager, compiled, best, winner, winner_min, note)


def gelu_rows(cfg):
    rows = []
    sizes = [(1 << 20, "gelu_1m.dl"), (1 << 24, "gelu_16m.dl")]
    dlc, gelu = side_by_side(cfg, {file: (file, cfg.iters, False) for _, file in sizes}, "gelu.py", ["--iters", cfg.iters])
    for n, file in sizes:
        d, report = dlc[file]
        stats = peer_stats(gelu, lambda r: r["params"]["n"] == n)
        # The machine's copy bandwidth at this size: y.copy_(x) into a preallocated y, 8 bytes an element.
        # Medians against medians; the fastest copy sample is the bound a kernel could reach.
        copy_name, copy, _ = best_of(stats, ["copy"])
        gbps = lambda ms: 8 * n / (ms * 1e-3) / 1e9
        dlc_gbps, copy_gbps = gbps(d.median), gbps(copy.median)
        note = (f"dlc {dlc_gbps:.1f} GB/s = {dlc_gbps / copy_gbps:.0%} of copy {copy_gbps:.1f} GB/s"
                f" (medians; copy peak {gbps(copy.min):.1f} GB/s, {copy_name.split('+')[1]})")
        rows.append(speed_row(f"guide gelu {n >> 20}M f32", d, stats, ["eager", "builtin", "builtin-out", "compile"], note))
    return rows


def mlp_rows(cfg):
    rows = []
    files = {batch: f"mlp_step_{batch}.dl" for batch in (128, 1024)}
    dlc, mlp = side_by_side(cfg, step_jobs(files.values(), cfg.iters), "mlp.py", ["--iters", cfg.iters])
    for batch, file in files.items():
        d, report, fresh = step_results(dlc, file)
        stats = peer_stats(mlp, lambda r: r["params"]["batch"] == batch)
        rows.append(with_fresh(speed_row(f"MLP AdamW step, batch {batch}", d, stats, ["eager", "eager-fused", "compile"],
                                         f"{report['kernels']} kernels; {products_note(report)}"), fresh))
    return rows


BF16_VARIANTS = ["eager-bf16", "eager-fused-bf16", "compile-bf16"]


def bf16_rows(cfg):
    """The MLP step with `precision = bf16` (bench/mlp_step_*_bf16.dl: matrix products in bf16 with
    f32 accumulation) against PyTorch under `torch.autocast("cpu", dtype=torch.bfloat16)`: the
    PyTorch candidates are mlp.py's autocast variants only, bf16 against bf16."""
    rows = []
    files = {batch: f"mlp_step_{batch}_bf16.dl" for batch in (128, 1024)}
    dlc, mlp = side_by_side(cfg, step_jobs(files.values(), cfg.iters), "mlp.py", ["--iters", cfg.iters, "--variants", *BF16_VARIANTS])
    for batch, file in files.items():
        d, report, fresh = step_results(dlc, file)
        stats = peer_stats(mlp, lambda r: r["params"]["batch"] == batch)
        rows.append(with_fresh(speed_row(f"MLP AdamW step bf16, batch {batch}", d, stats, BF16_VARIANTS,
                                         f"{report['kernels']} kernels; {products_note(report)}; PyTorch: autocast bf16 variants"
                                         " only (eager, compile columns: eager-bf16, compile-bf16)",
                                         eager_variant="eager-bf16", compile_variant="compile-bf16"), fresh))
    return rows


def conv_row(cfg, name, script, file):
    """The CNN and conv-BN steps: every variant the peer script has is a candidate."""
    iters = cfg.conv_iters
    dlc, rows = side_by_side(cfg, step_jobs([file], iters), script, ["--iters", iters])
    d, report, fresh = step_results(dlc, file)
    stats = peer_stats(rows)
    return with_fresh(speed_row(name, d, stats, {k.split("+")[0] for k in stats}, f"{report['kernels']} kernels; {products_note(report)}"),
                      fresh)


def print_speed(rows, cfg):
    print(f"\nstep times in ms over {cfg.runs} run(s), {cfg.threads} threads a side, on {machine_tag()}:"
          f"\nmin = fastest sample of all runs, med = median of the runs' medians;"
          f" 'vs' = PyTorch time / dlc time (above 1: dlc is faster); eager and compile on their better allocator")
    if cfg.product_kernels:
        print(f"dlc's matrix-product kernels on this machine: {', '.join(cfg.product_kernels)}"
              " (per row: how many of the step's product shapes each one runs)")
    print(f"{'workload':<32} {'dlc min':>8} {'dlc med':>8} {'eager':>8} {'compile':>8} {'best min':>8} {'best med':>8}"
          f" {'vs eager':>8} {'vs comp.':>8} {'vs best':>8} {'(min)':>7}  best PyTorch variant; note")
    for r in rows:
        winner = r.winner if r.winner == r.winner_min else f"{r.winner} (by min: {r.winner_min})"
        print(f"{r.name:<32} {r.dlc.min:>8.3f} {r.dlc.median:>8.3f} {r.eager.median:>8.3f} {r.compile.median:>8.3f}"
              f" {r.best.min:>8.3f} {r.best.median:>8.3f} {r.eager.median / r.dlc.median:>7.2f}x"
              f" {r.compile.median / r.dlc.median:>7.2f}x {r.best.median / r.dlc.median:>7.2f}x"
              f" {r.best.min / r.dlc.min:>6.2f}x  {winner}; {r.note}")


# ---------------------------------------------------------------------------------------------
# Start-up: the same program to its first step

def dlc_first_step(cfg):
    """`dlc run examples/mnist_mlp.dl --set steps=1` from a cold process, --runs times. Returns
    (seconds to the first finished step, data seconds or None, label)."""
    firsts, datas, walls = [], [], []
    for i in range(cfg.runs):
        with scratch_copy("examples/mnist_mlp.dl") as program:
            metrics = program.parent / "metrics.jsonl"
            child = run([DLC, "run", program, "--set", "steps=1", "--metrics", metrics], env=dlc_env(cfg.threads))
            lines = json_lines(metrics.read_text()) if metrics.exists() else []
        walls.append(child.wall_s)
        first = next((m for m in lines if m.get("kind", m.get("event")) == "first_step" and "since_start_s" in m), None)
        if first:
            firsts.append(first["since_start_s"])
            datas.append(first.get("data_s"))
    if firsts and len(firsts) == len(walls):
        data = None if None in datas else Stat(min(datas), statistics.median(datas))
        return Stat(min(firsts), statistics.median(firsts)), data, "to the first step (metrics: first_step)", Stat(min(walls), statistics.median(walls))
    # No first_step line from this build of dlc: the whole process is an upper bound (it also
    # evaluates on the test set and writes a checkpoint after its one step).
    whole = Stat(min(walls), statistics.median(walls))
    return whole, None, "WHOLE PROCESS (this dlc prints no first_step metric; includes evaluation + checkpoint)", whole


def startup(cfg):
    rows = peer("startup.py", ["--repeat", cfg.runs], cfg, runs=1)
    torch = {}
    for r in rows:
        s = Stat(r["min_s"], r["median_s"])
        key = r["variant"]
        if key not in torch or s.median < torch[key][0].median:
            torch[key] = (s, r["allocator"], r)
    first, data, label, wall = dlc_first_step(cfg)
    print(f"\nstart-up: examples/mnist_mlp.dl's program to its first finished optimiser step (batch 128), cold process,"
          f"\ndata loading included; seconds, min / median over {cfg.runs} run(s); PyTorch on its better allocator;"
          f" {cfg.threads} threads a side, on {machine_tag()}")
    fmt = lambda s: f"{s.min:6.2f} / {s.median:6.2f} s"
    data_txt = f"data {data.min:.2f} / {data.median:.2f} s" if data else "data time not reported"
    # dlc's clock starts in main(); what comes before it (exec, dynamic linking) is bounded by
    # the whole of `dlc --version`, printed beside it.
    exec_ms = min(run([DLC, "--version"]).wall_s for _ in range(3)) * 1e3
    print(f"  {'dlc':<32} {fmt(first)}  ({data_txt}; {label}; whole process {wall.median:.2f} s;"
          f" before main() at most {exec_ms:.0f} ms)")
    for variant, name in [("mnist-first-step-eager", "PyTorch eager"), ("mnist-first-step-compile", "PyTorch torch.compile")]:
        s, alloc, r = torch[variant]
        print(f"  {name + ' (' + alloc + ')':<32} {fmt(s)}  (data {r['data_min_s']:.2f} / {r['data_median_s']:.2f} s;"
              f" from spawn, Python start-up included)")
    best_variant = min(["mnist-first-step-eager", "mnist-first-step-compile"], key=lambda v: torch[v][0].median)
    b = torch[best_variant][0]
    print(f"  PyTorch best ({best_variant.removeprefix('mnist-first-step-')}+{torch[best_variant][1]}) / dlc:"
          f" {b.min / first.min:.2f}x by min, {b.median / first.median:.2f}x by median (above 1: dlc starts sooner)")
    compile_and_small(cfg, torch)


def compile_and_small(cfg, torch):
    """The older start-up rows: dlc's slowest training-step compile over the examples, the small
    iris example's whole process, PyTorch's import and first synthetic MLP step."""
    worst = (0.0, "")
    for f in sorted((ROOT / "examples").glob("*.dl")):
        out = subprocess.run([str(DLC), "explain", "--json", str(f)], capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            continue
        for item in json.loads(out.stdout)["items"]:
            if "compile_ms" in item:
                worst = max(worst, (item["compile_ms"], f.name))
    iris = [run([DLC, "run", ROOT / "examples" / "iris.dl", "--set", "steps=1"], env=dlc_env(cfg.threads)).wall_s
            for _ in range(cfg.runs)]
    print(f"  dlc: slowest training-step compile over examples/*.dl {worst[0]:.1f} ms ({worst[1]}; target under 200 ms);"
          f" `dlc run examples/iris.dl --set steps=1` whole process {min(iris) * 1e3:.0f} / {statistics.median(iris) * 1e3:.0f} ms"
          f" (target: training starts in under 500 ms)")
    parts = []
    for variant, name in [("import-torch", "import torch"), ("first-step-eager", "first synthetic MLP step eager"),
                          ("first-step-compile", "torch.compile")]:
        s, alloc, _ = torch[variant]
        parts.append(f"{name} {s.min:.2f} / {s.median:.2f} s ({alloc})")
    print(f"  PyTorch (from interpreter start): {'; '.join(parts)}")


# ---------------------------------------------------------------------------------------------
# One MNIST epoch: the whole job in fresh processes, data preparation included

# (row name, dlc program, mnist_train.py --model, where the two differ)
EPOCH_JOBS = [
    ("MNIST MLP epoch, mnist_mlp_peer.dl", "bench/mnist_mlp_peer.dl", "mlp",
     "the same program both sides: ReLU, AdamW, last partial batch kept, no checkpoint"),
    ("MNIST MLP epoch, examples/mnist_mlp.dl", "examples/mnist_mlp.dl", "mlp-gelu",
     "dlc also: warmup_cosine lr, drop_last, prefetch(4), writes a checkpoint; PyTorch: constant lr"),
]


def dlc_epoch(cfg, program):
    """`dlc run PROGRAM --set epochs=1 --device cpu` in a scratch copy, --runs times: per run the
    whole process's wall time and, from its metrics file (or its `epoch 1 done` line), the epoch's
    time, the data preparation before it and the test accuracy."""
    samples = []
    for _ in range(cfg.runs):
        with scratch_copy(program) as copy:
            metrics = copy.parent / "metrics.jsonl"
            child = run([DLC, "run", copy, "--set", "epochs=1", "--device", "cpu", "--metrics", metrics],
                        env=dlc_env(cfg.threads))
            lines = json_lines(metrics.read_text()) if metrics.exists() else []
        epoch = next((m for m in lines if m.get("kind") == "epoch"), {})
        evaluation = next((m for m in lines if m.get("kind") == "eval"), {})
        done = re.search(r"epoch 1 done: .* in ([0-9.]+) s(?: \(data prepared in ([0-9.]+) s before[;)])?", child.stdout)
        acc = re.search(r"epoch 1 evaluate[^:]*: (?:accuracy )?([0-9.]+)", child.stdout)
        samples.append({"wall_s": child.wall_s,
                        "epoch_s": epoch.get("epoch_s", float(done[1]) if done else None),
                        "data_s": epoch.get("data_s", float(done[2]) if done and done[2] else None),
                        "accuracy": evaluation.get("accuracy", float(acc[1]) if acc else None)})
    return samples


def epoch_rows(cfg):
    """One epoch of MNIST MLP training, the whole job from a fresh process to its exit, dlc against
    the same in PyTorch (mnist_train.py, eager, on its faster allocator by median wall time)."""
    rows = []
    for name, program, model, note in EPOCH_JOBS:
        d = dlc_epoch(cfg, program)
        peer_rows = [r for r in peer("mnist_train.py", ["--model", model, "--epochs", "1"], cfg) if r["variant"] == "epoch"]
        by_alloc = {}
        for r in peer_rows:
            by_alloc.setdefault(r["allocator"], []).append({"wall_s": r["process_wall_s"], "epoch_s": r["epoch_s"],
                                                            "data_s": r["train_load_s"], "accuracy": r["test_accuracy"]})
        alloc = min(by_alloc, key=lambda a: statistics.median(s["wall_s"] for s in by_alloc[a]))
        rows.append((name, d, alloc, by_alloc[alloc], note))
    return rows


def print_epoch(rows, cfg):
    def fig(samples, key):
        xs = [s[key] for s in samples if s[key] is not None]
        return Stat(min(xs), statistics.median(xs)) if xs else None

    def ratio(p, d, attr):
        return f"{getattr(p, attr) / getattr(d, attr):.2f}x" if p and d else "n/a"

    def med(s, width=8):
        return f"{s.median:>{width}.2f}" if s else f"{'n/a':>{width}}"

    print(f"\none MNIST epoch, the whole job in fresh processes: spawn to exit (start-up, reading and preparing the data,"
          f" 1 epoch at batch 128, the test-set evaluation); seconds over {cfg.runs} run(s), {cfg.threads} threads a side,"
          f" on {machine_tag()}:\nwall min / med; epoch and data (the training set's preparation: dlc's data_s, PyTorch's"
          f" train_load_s) as medians, as each side prints them; 'vs' = PyTorch / dlc (above 1: dlc is faster);"
          f" PyTorch eager on its faster allocator")
    print(f"{'workload':<40} {'dlc wall':>13} {'PyTorch wall':>13} {'vs':>6} {'(min)':>6} {'dlc ep.':>8} {'PT ep.':>8}"
          f" {'vs':>6} {'dlc data':>8} {'PT data':>8} {'accuracy dlc / PT':>17}  PyTorch allocator; note")
    for name, d, alloc, p, note in rows:
        dw, pw, de, pe, dd, pd, da, pa = (fig(d, "wall_s"), fig(p, "wall_s"), fig(d, "epoch_s"), fig(p, "epoch_s"),
                                          fig(d, "data_s"), fig(p, "data_s"), fig(d, "accuracy"), fig(p, "accuracy"))
        acc = f"{da.median:.4f} / {pa.median:.4f}" if da and pa else "n/a"
        print(f"{name:<40} {dw.min:>5.2f} / {dw.median:>5.2f} {pw.min:>5.2f} / {pw.median:>5.2f} {ratio(pw, dw, 'median'):>6}"
              f" {ratio(pw, dw, 'min'):>6} {med(de)} {med(pe)} {ratio(pe, de, 'median'):>6} {med(dd)} {med(pd)}"
              f" {acc:>17}  {alloc}; {note}")


# ---------------------------------------------------------------------------------------------
# The data alone: an epoch of MNIST's training batches, no step

def data_rows(cfg):
    """MNIST's training data as training reads it, no step: dlc's feed (`dlc bench
    examples/mnist_mlp.dl --data`: normalised and flattened once, then each epoch shuffled and
    stacked into batches of 128 by the feed's workers) against torch's DataLoader (dataloader.py:
    the same transform per sample, shuffled, batches of 128) with 0, 1 and 2 workers."""
    ours = []
    for _ in range(cfg.runs):
        out = run([DLC, "bench", ROOT / "examples" / "mnist_mlp.dl", "--data", "--json"], env=dlc_env(cfg.threads))
        ours.append(json_lines(out.stdout)[-1])
    return ours, peer("dataloader.py", [], cfg)


def print_data(res, cfg):
    ours, theirs = res
    epoch = statistics.median(r["epoch_s"][1] for r in ours)
    prepare = statistics.median(r["prepare_s"] for r in ours)
    med, best = medians_by_variant(theirs, "epoch_s")
    print(f"\none epoch of MNIST's training data, no step (batches of 128, shuffled); seconds, medians of {cfg.runs} run(s),"
          f" {cfg.threads} threads a side, on {machine_tag()}; 'vs' = PyTorch's best / dlc (above 1: dlc is faster)")
    print(f"  dlc feed: an epoch {epoch:.3f} s ({ours[-1]['workers']} worker(s), {ours[-1]['ahead']} batches ahead),"
          f" after preparing once in {prepare:.3f} s; peak RSS {ours[-1]['peak_rss_mb']:.0f} MiB")
    for k in sorted(med):
        print(f"  DataLoader {k:<28} an epoch {med[k]:.3f} s  vs {med[k] / epoch:.2f}x")
    print(f"  best DataLoader: {best}, {med[best]:.3f} s: {med[best] / epoch:.2f}x"
          f" (with dlc's one-off preparation counted in its epoch: {med[best] / (epoch + prepare):.2f}x)")


# The two folders of the images group: the bundled 32x32 JPEG files, and 1,000 of them scaled up to
# 224x224 (written on first use by the image_folder example), where decoding dominates.
JPEG224 = ROOT / "target" / "bench-data" / "jpeg224"
IMAGE_FOLDERS = [
    ("3,000 CIFAR-10 images, 32x32", ROOT / "examples" / "cifar_jpeg.dl", []),
    ("1,000 CIFAR-10 images scaled to 224x224", ROOT / "bench" / "image_folder_224.dl", ["--size", "224", "--folder", str(JPEG224 / "train")]),
]


def write_jpeg224(cfg):
    """The 224x224 folder, from the bundled CIFAR-10 by `--example image_folder` (nearest-pixel
    scaling, JPEG quality 95), unless it is there."""
    if (JPEG224 / "train").is_dir():
        return
    args = [JPEG224, "--train", "100", "--test", "10", "--size", "224"]
    if cfg.no_build:
        exe = ROOT / "target" / "release" / "examples" / "image_folder"
        if not exe.exists():
            raise RuntimeError(f"{JPEG224} is missing: run compare.py without --no-build once, or "
                               f"`cargo run --release -p dlc --example image_folder -- {' '.join(map(str, args))}`")
        run([exe, *args])
    else:
        run(["cargo", "run", "--release", "-q", "-p", "dlc", "--example", "image_folder", "--", *args])


def images_rows(cfg):
    """JPEG folders as training reads them, no step: dlc's feed (`dlc bench PROGRAM --data`: each
    image decoded, resized-cropped, flipped and jittered on the feed's workers, batches of 64)
    against torchvision's ImageFolder and DataLoader with the same augmentations
    (image_folder.py) with 0, 1 and 2 workers. Each side's second epoch (the first fills the page
    cache and starts the workers). One (title, ours, theirs) a folder."""
    write_jpeg224(cfg)
    out = []
    for title, program, peer_args in IMAGE_FOLDERS:
        ours = []
        for _ in range(cfg.runs):
            res = run([DLC, "bench", program, "--data", "--json"], env=dlc_env(cfg.threads))
            ours.append(json_lines(res.stdout)[-1])
        out.append((title, ours, peer("image_folder.py", peer_args, cfg)))
    return out


def print_images(res, cfg):
    for title, ours, theirs in res:
        epoch = statistics.median(r["epoch_s"][-1] for r in ours)
        med, best = medians_by_variant(theirs, "epoch_s")
        print(f"\none epoch of a JPEG folder ({title}), decoded and augmented, no step (batches of 64);"
              f" seconds, medians of {cfg.runs} run(s), {cfg.threads} threads a side, on {machine_tag()};"
              f" 'vs' = PyTorch's best / dlc (above 1: dlc is faster)")
        print(f"  dlc feed: an epoch {epoch:.3f} s ({ours[-1]['workers']} worker(s), {ours[-1]['ahead']} batches ahead);"
              f" peak RSS {ours[-1]['peak_rss_mb']:.0f} MiB")
        for k in sorted(med):
            print(f"  ImageFolder + DataLoader {k:<20} an epoch {med[k]:.3f} s  vs {med[k] / epoch:.2f}x")
        print(f"  best DataLoader: {best}, {med[best]:.3f} s: {med[best] / epoch:.2f}x")


# ---------------------------------------------------------------------------------------------
# Training on the JPEG folder: how long the step waits for its data

def train_images_rows(cfg):
    """examples/cifar_jpeg.dl trained 2 epochs (`dlc run --set epochs=2 --device cpu` in a scratch
    copy, its checkpoints and metrics there), its second epoch's `epoch_s` and `data_wait_s` from
    the metrics file, against the same net, optimiser, augmentations and batches in PyTorch
    (train_folder.py: ImageFolder + DataLoader with 0, 1 and 2 workers, pin_memory, persistent
    workers; its second epoch, the time in `next()` on the loader as its data wait)."""
    ours = []
    for _ in range(cfg.runs):
        with scratch_copy("examples/cifar_jpeg.dl") as copy:
            metrics = copy.parent / "metrics.jsonl"
            child = run([DLC, "run", copy, "--set", "epochs=2", "--device", "cpu", "--metrics", metrics],
                        env=dlc_env(cfg.threads))
            lines = json_lines(metrics.read_text()) if metrics.exists() else []
        epoch = next((m for m in lines if m.get("kind") == "epoch" and m.get("epoch") == 2), None)
        if epoch is None:  # an older build: the `epoch 2 done` line
            done = re.search(r"epoch 2 done: .* in ([0-9.]+) s.*data wait ([0-9.]+)%", child.stdout)
            if not done:
                raise RuntimeError(f"no second epoch's figures in dlc's metrics or output:\n{child.stdout[-2000:]}")
            epoch = {"epoch_s": float(done[1]), "data_wait_s": float(done[1]) * float(done[2]) / 100}
        acc = [m["accuracy"] for m in lines if m.get("kind") == "eval" and m.get("epoch") == 2]
        ours.append({"epoch_s": epoch["epoch_s"], "data_wait_s": epoch["data_wait_s"], "wall_s": child.wall_s,
                     "accuracy": acc[0] if acc else None})
    return ours, peer("train_folder.py", [], cfg)


def print_train_images(res, cfg):
    ours, theirs = res
    epoch = statistics.median(r["epoch_s"] for r in ours)
    wait = statistics.median(r["data_wait_s"] for r in ours)
    pct = statistics.median(100 * r["data_wait_s"] / r["epoch_s"] for r in ours)
    by = by_variant(theirs)
    print(f"\ntraining examples/cifar_jpeg.dl's SmallNet on the JPEG folder (3,000 CIFAR-10 images, 32x32, decoded and"
          f" augmented, batches of 64, SGD): the second epoch, and how long its steps waited for data; seconds,"
          f" medians of {cfg.runs} run(s), {cfg.threads} threads a side, on {machine_tag()}; 'vs' = PyTorch / dlc"
          f" epoch time (above 1: dlc is faster); goal: dlc's data wait under 5% where PyTorch's is over 5%")
    acc = [r["accuracy"] for r in ours if r["accuracy"] is not None]
    acc_note = f" (test accuracy {statistics.median(acc):.4f})" if acc else ""
    print(f"  dlc run --set epochs=2: epoch {epoch:.3f} s, data wait {wait:.3f} s = {pct:>5.1f}%{acc_note}")
    for k in sorted(by):
        rs = by[k]
        e = statistics.median(r["epoch_s"] for r in rs)
        w = statistics.median(r["data_wait_s"] for r in rs)
        p = statistics.median(r["data_wait_pct"] for r in rs)
        a = statistics.median(r["test_accuracy"] for r in rs)
        print(f"  PyTorch DataLoader {k:<20} epoch {e:.3f} s, data wait {w:.3f} s = {p:>5.1f}%  vs {e / epoch:.2f}x"
              f"  (test accuracy {a:.4f})")


# ---------------------------------------------------------------------------------------------
# Text: tokenising a corpus with a BPE tokenizer into blocks

TEXT_VARIANTS = ["datasets-map-np1", "datasets-map-np2", "tokenizers-encode", "tokenizers-encode-batch"]


def text_rows(cfg):
    """examples/shakespeare_bpe.dl's training data prepared: `dlc bench --data --json`'s
    `prepare_s` (the text read, encoded by the tokenizer.json through the `tokenizers` crate, cut
    into the (x, y) blocks of 64 and split; once, before the first step) against text_tokenize.py
    making the same blocks with the same tokenizer.json: `datasets.load_dataset("text")` +
    `map(batched, num_proc=1 and 2)` with caching off, and `tokenizers` alone (whole text,
    `encode_batch` on the lines). Each peer variant in its own fresh process. dlc's preparation
    starts a tenth of a second after its process does, the peers' after seconds of imports: on an
    idle (virtual) machine a cold CPU then slows the first dlc run by up to 2x (0.32 s back to back,
    0.6-0.8 s after a pause, on the 2-core EPYC), so one untimed dlc run goes first."""
    run([DLC, "bench", ROOT / "examples" / "shakespeare_bpe.dl", "--data", "--json"], env=dlc_env(cfg.threads))
    ours = []
    for _ in range(cfg.runs):
        out = run([DLC, "bench", ROOT / "examples" / "shakespeare_bpe.dl", "--data", "--json"], env=dlc_env(cfg.threads))
        ours.append(json_lines(out.stdout)[-1])
    theirs = []
    for v in TEXT_VARIANTS:
        theirs += peer("text_tokenize.py", ["--variants", v], cfg)
    return ours, theirs


def print_text(res, cfg):
    ours, theirs = res
    prepare = statistics.median(r["prepare_s"] for r in ours)
    by = by_variant(theirs)
    med, best = medians_by_variant(theirs, "prepare_s")
    params = theirs[-1]["params"] if theirs else {}
    print(f"\ntiny Shakespeare (1.1 MB) tokenised by the bundled byte-level BPE (tokenizer.json, 512 tokens) into"
          f" {params.get('blocks', '?')} (x, y) blocks of 64 tokens, from nothing read to the blocks, in a running process;"
          f" seconds, medians of {cfg.runs} run(s), {cfg.threads} threads a side, on {machine_tag()};"
          f" 'vs' = Python / dlc (above 1: dlc is faster)")
    print(f"  dlc text(block: 64, tokenizer:) prepared in {prepare:.3f} s (min {min(r['prepare_s'] for r in ours):.3f};"
          f" `dlc bench --data`'s prepare_s, after an untimed run);"
          f" then an epoch of batches {statistics.median(r['epoch_s'][-1] for r in ours):.3f} s")
    for k in sorted(by):
        rs = by[k]
        part = lambda f: statistics.median(r[f] for r in rs)  # noqa: E731
        same = "same ids as the whole text" if all(r["ids_equal_whole"] for r in rs) else \
            f"{rs[-1]['ids_differ']} ids differ from the whole text's"
        print(f"  {k:<34} {med[k]:>7.3f} s (min {min(r['prepare_s'] for r in rs):.3f})  vs {med[k] / prepare:>6.2f}x"
              f"  (load {part('load_s'):.3f}, tokenise"
              f" {part('tokenize_s'):.3f}, blocks {part('blocks_s'):.3f}; {same})")
    print(f"  fastest Python: {best}, {med[best]:.3f} s: {med[best] / prepare:.2f}x")


# ---------------------------------------------------------------------------------------------
# Peak memory, total and net of each runtime's empty process

def memory(cfg):
    if not GNU_TIME.exists():
        print("\npeak RSS: skipped, /usr/bin/time is missing (bash bench/setup.sh installs it)")
        return
    dlc_empty = run([DLC, "--version"], measure_memory=True).peak_rss_mb
    torch_empty = {name: run([sys.executable, "-c", f"import torch; torch.set_num_threads({cfg.threads})"],
                             env=dict(os.environ, **extra), measure_memory=True).peak_rss_mb
                   for name, extra in cfg.allocators}
    print(f"\npeak RSS in MiB, each in a fresh process (one run each), total and net of the runtime's empty process;"
          f" on {machine_tag()}:"
          f"\n  empty: dlc --version {dlc_empty:.0f}; python -c 'import torch' "
          + ", ".join(f"{v:.0f} ({k})" for k, v in torch_empty.items()))
    print(f"  {'workload':<44} {'dlc total':>9} {'net':>6} {'PyTorch total':>24} {'net':>6} {'net ratio':>9} {'total ratio':>11}")

    def row(name, dlc_cmd, peer_cmd, target="", program=None):
        if program:  # run in a scratch copy: its checkpoint goes there, not into the repository
            with scratch_copy(program) as copy:
                dlc_peak = run([DLC, "run", copy, *dlc_cmd], env=dlc_env(cfg.threads), measure_memory=True).peak_rss_mb
        else:
            dlc_peak = run(dlc_cmd, env=dlc_env(cfg.threads), measure_memory=True).peak_rss_mb
        peers = {alloc: run(peer_cmd, env=dict(os.environ, **extra), measure_memory=True).peak_rss_mb
                 for alloc, extra in cfg.allocators}
        alloc = min(peers, key=lambda a: peers[a] - torch_empty[a])  # the leaner allocator is the peer
        d_net, p_net = dlc_peak - dlc_empty, peers[alloc] - torch_empty[alloc]
        total = f"{peers[alloc]:.0f} ({alloc})"
        print(f"  {name:<44} {dlc_peak:>9.0f} {d_net:>6.0f} {total:>24} {p_net:>6.0f}"
              f" {d_net / max(p_net, 1e-9):>8.2f}x {dlc_peak / peers[alloc]:>10.2f}x  {target}")

    row("MLP AdamW step, batch 1024, synthetic data",
        [DLC, "bench", ROOT / "bench" / "mlp_step_1024_memory.dl", "--json", "--steps", "5"],
        [sys.executable, PEERS / "mlp.py", "--threads", cfg.threads, "--iters", "5", "--batch", "1024", "--variants", "eager"],
        "(target: at most 0.25x)")
    row("MNIST MLP, 1 epoch (examples/mnist_mlp.dl)", ["--set", "epochs=1"],
        [sys.executable, PEERS / "mnist_train.py", "--model", "mlp-gelu", "--epochs", "1", "--threads", cfg.threads],
        program="examples/mnist_mlp.dl")
    print("  ratios are dlc / PyTorch (below 1: dlc uses less); PyTorch eager on its leaner allocator (dlc's baseline"
          " is `--version`, the smaller of its empty processes, so its net is not flattered)")


# ---------------------------------------------------------------------------------------------

GROUPS = ["gelu", "mlp", "bf16", "cnn", "conv-bn", "epoch", "data", "images", "images-train", "text", "startup", "memory"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 run and fewer iterations")
    ap.add_argument("--runs", type=int, default=None, help="fresh processes per benchmark (default 3; 1 with --quick)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-build", action="store_true", help="use target/release/dlc as it is (no cargo build)")
    ap.add_argument("--only", nargs="+", choices=GROUPS, metavar="GROUP", default=GROUPS,
                    help=f"run only these groups of rows: {', '.join(GROUPS)} (default: all)")
    cfg = ap.parse_args()
    cfg.product_kernels = []
    cfg.runs = cfg.runs or (1 if cfg.quick else 3)
    cfg.iters = 10 if cfg.quick else 30
    cfg.conv_iters = 10 if cfg.quick else 20
    cfg.allocators = allocators()
    if not cfg.no_build:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "dlc"], cwd=ROOT, check=True)
    wait_for_dlc()
    header(cfg)
    failures = []

    def attempt(group, fn):
        """Run one group; a failing process (or a report without the figures) is said, with its
        stderr, and the other groups go on; compare.py then exits with status 1."""
        if group not in cfg.only:
            return []
        try:
            return fn() or []
        except Exception as e:  # noqa: BLE001 - reported below, not swallowed
            failures.append((group, f"{type(e).__name__}: {e}", traceback.format_exc()))
            print(f"\n{group}: FAILED ({type(e).__name__}), see the end", flush=True)
            return []

    def speed_group(group, fn):
        """A group of step rows, each also said on stderr as soon as it is measured: a run cut
        short (a time limit on a lent machine) keeps the rows it finished."""
        got = attempt(group, fn)
        for r in got:
            print(f"measured: {r.name}: dlc {r.dlc.median:.3f} ms, PyTorch best {r.best.median:.3f} ms"
                  f" ({r.winner}), {r.best.median / r.dlc.median:.2f}x", file=sys.stderr, flush=True)
        return got

    rows = speed_group("gelu", lambda: gelu_rows(cfg)) + speed_group("mlp", lambda: mlp_rows(cfg))
    rows += speed_group("bf16", lambda: bf16_rows(cfg))
    rows += speed_group("cnn", lambda: [conv_row(cfg, "MNIST CNN Adam step, b128", "cnn.py", "mnist_cnn_step.dl")])
    # Batch norm in training: its statistics and their gradients (no target in the issue; shown
    # for the reductions fused with their elementwise input).
    rows += speed_group("conv-bn", lambda: [conv_row(cfg, "conv-BN-relu SGD step, b64", "conv_bn.py", "conv_bn_step.dl")])
    if rows:
        print_speed(rows, cfg)
    # The groups with a table of their own: measured, then printed when they gave figures.
    for group, measure, show in [("epoch", epoch_rows, print_epoch), ("data", data_rows, print_data),
                                 ("images", images_rows, print_images), ("images-train", train_images_rows, print_train_images),
                                 ("text", text_rows, print_text)]:
        res = attempt(group, lambda: measure(cfg))
        if res:
            show(res, cfg)
    attempt("startup", lambda: startup(cfg))
    attempt("memory", lambda: memory(cfg))
    print(f"\nload average     {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min) after")
    print(f"stolen time      {steal_note(STEAL_AT_START)}")
    for group, message, trace in failures:
        print(f"\nFAILED: {group}: {message}\n{trace}", file=sys.stderr)
    if failures:
        sys.exit(f"{len(failures)} group(s) failed: {', '.join(g for g, _, _ in failures)}")


if __name__ == "__main__":
    main()
