"""The models table of `make bench`: whole models exported from PyTorch (the definitions of
tests/onnx_models.py, random weights, nothing downloaded), compiled by nest in process (JIT)
and ahead of time (AOT: a .so built by the system compiler), against PyTorch eager on the same
inputs, at batch 1 and 16, on 1 and 2 threads; and nest's import and compile times.

    models.py [-o FILE.md] [--rounds N] [--only NAME ...]    (from the repository root)
    models.py --serve-torch                                  the PyTorch contender (internal)

Each contender runs in its own long-lived process per thread count (OMP_NUM_THREADS, and
torch.set_num_threads for PyTorch): nest's JIT (clang's libomp), nest's AOT (gcc's libgomp) and
PyTorch never share an OpenMP runtime. The contenders are timed in turn, round after round, with
a pause between them for spinning threads to sleep; a contender's figure is the median of its
rounds, each the median of five batches of calls. A one-thread round runs every contender on
the same core, the cores in turn from round to round. Times are per inference (one call on the whole
batch), in milliseconds.
"""
import os
import subprocess
import sys
import tempfile
import time
import warnings

warnings.simplefilter("ignore")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "build", "bench", "models")
RUNNER = os.path.join(ROOT, "build", "bench", "models_run")
BATCHES = (1, 16)
THREADS = (1, 2)
PAUSE = 0.25   # seconds between contenders: OpenMP threads spin 200 ms after a region
SECONDS = 0.6  # of calls per round and contender
# The cores of the one-thread rounds, in turn: a round runs every contender on the same core
# (the vCPUs of a shared guest need not run at one speed; see bench/benchutil.h, round_core).
CORES = sorted(os.sched_getaffinity(0))


# the models of the ONNX issue's table (tests/onnx_models.py also has test-only ones)
MODELS = ("mlp", "lenet5", "resnet18", "mobilenet_v2", "transformer")


def definitions():
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import onnx_models
    return onnx_models.models()


def fill(shape):
    """The inputs bench/models.c feeds nest: the same values, row-major."""
    import numpy as np
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.int64)
    return (((i * 7919) % 2001 - 1000) / 1000.0).astype(np.float32).reshape(shape)


def serve_torch():
    import torch
    from torch_threads import set_threads
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    set_threads(threads)
    torch.set_num_interop_threads(1)
    table = definitions()
    model = x = None
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "load":
            make, shape = table[cmd[1]]
            torch.manual_seed(0)
            model = make().eval()
            x = torch.from_numpy(fill((int(cmd[2]),) + tuple(shape[1:])))
            with torch.inference_mode():
                model(x)
            print("ok", flush=True)
        elif cmd[0] == "time":
            per = []
            with torch.inference_mode():
                for _ in range(5):
                    n, t0 = 0, time.perf_counter()
                    while True:
                        model(x)
                        n += 1
                        t = time.perf_counter()
                        if t - t0 >= float(cmd[1]) / 5:
                            break
                    per.append((t - t0) / n)
            print(sorted(per)[2], flush=True)
        elif cmd[0] == "info":
            print("torch", torch.__version__, "threads", torch.get_num_threads(), flush=True)
        else:
            break


class Server:
    def __init__(self, argv, threads):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=env, cwd=ROOT)

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def close(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        self.p.wait()


def export(name, make, shape, batch):
    import torch
    path = os.path.join(WORK, f"{name}_b{batch}.onnx")
    torch.manual_seed(0)
    model = make().eval()
    x = torch.from_numpy(fill((batch,) + tuple(shape[1:])))
    torch.onnx.export(model, (x,), path, opset_version=13, input_names=["input"],
                      output_names=["output"])
    return path


def ms(v):
    return f"{v * 1e3:.3g}" if isinstance(v, float) else v


def main():
    args = sys.argv[1:]
    out = os.path.join(ROOT, "build", "bench-models.md")
    rounds, only = 3, []
    while args:
        a = args.pop(0)
        if a == "-o":
            out = args.pop(0)
        elif a == "--rounds":
            rounds = int(args.pop(0))
        elif a == "--only":
            only, args = args, []
        else:  # --help and anything else: the usage, not a six-minute run
            usage = __doc__.split("\n\n")[1]
            if a in ("-h", "--help"):
                print(usage)
                sys.exit(0)
            sys.exit(f"models.py: unknown option {a}\n{usage}")
    unknown = [n for n in only if n not in definitions()]
    if unknown:
        sys.exit(f"models.py: no model {', '.join(unknown)} (the models: {', '.join(MODELS)})")
    os.makedirs(WORK, exist_ok=True)
    # PyTorch's OpenBLAS runs the best kernel the CPU's flags allow (bench/blascore.c): its own
    # choice is a generic one on CPUs it does not know
    core, blas_note = subprocess.run([RUNNER, "--openblas-core"], capture_output=True, text=True,
                                     check=True).stdout.split("\n")[:2]
    os.environ.pop("OPENBLAS_L2_SIZE", None)
    if core:
        os.environ["OPENBLAS_CORETYPE"] = core
    else:
        os.environ.pop("OPENBLAS_CORETYPE", None)
    table = definitions()
    names = only or list(MODELS)
    me = [sys.executable, os.path.abspath(__file__), "--serve-torch"]
    servers = {}
    for t in THREADS:
        servers["torch", t] = Server(me, t)
        servers["jit", t] = Server([RUNNER, "--serve", "jit"], t)
        servers["aot", t] = Server([RUNNER, "--serve", "aot"], t)
    info = servers["torch", 1].ask("info")
    lines = ["## Models: nest against PyTorch eager", "",
             f"ONNX exported from PyTorch (opset 13, random weights); {info.split(' threads')[0]}."
             f" Median of {rounds} interleaved rounds, milliseconds per inference; the ratio is "
             "PyTorch's time over nest's (above 1: nest is faster). One-thread rounds run every "
             "contender on the same core, the cores in turn. "
             f"Machine: {os.uname().nodename}, {os.cpu_count()} cores, load average "
             f"{os.getloadavg()[0]:.1f} at the start. PyTorch's OpenBLAS: {blas_note}.", "",
             "| model | batch | threads | PyTorch | nest JIT | nest AOT | PyTorch / JIT | "
             "PyTorch / AOT |", "|---|---|---|---|---|---|---|---|"]
    compile_lines = ["", "Import and compile (nest, no compile cache), milliseconds:", "",
                     "| model | batch | import | JIT compile | AOT build (cc) |",
                     "|---|---|---|---|---|"]
    refused = {}
    for name in names:
        make, shape = table[name]
        for batch in BATCHES:
            path = export(name, make, shape, batch)
            loaded = {}
            for (kind, t), s in servers.items():
                reply = s.ask(f"load {name} {batch}" if kind == "torch" else f"load {path}")
                loaded[kind, t] = reply
            for r in loaded.values():
                if r.startswith("error"):
                    refused[name] = r[6:]
            jit, aot = loaded["jit", 1].split(), loaded["aot", 1].split()
            compile_lines.append(
                f"| {name} | {batch} | {jit[0] if jit[0] != 'error' else '-'} | "
                f"{jit[1] if jit[0] != 'error' else 'refused'} | "
                f"{aot[1] if aot[0] != 'error' else 'refused'} |")
            for t in THREADS:
                times = {k: [] for k in ("torch", "jit", "aot")}
                for r in range(rounds):
                    for kind in times:
                        if loaded[kind, t].startswith("error"):
                            continue
                        if t == 1 and len(CORES) > 1:  # every contender on the round's core
                            os.sched_setaffinity(servers[kind, t].p.pid, {CORES[r % len(CORES)]})
                        reply = servers[kind, t].ask(f"time {SECONDS}")
                        if reply.startswith("error"):
                            sys.exit(f"models.py: {name} at batch {batch}, {kind} on {t} "
                                     f"threads: {reply}")
                        times[kind].append(float(reply))
                        time.sleep(PAUSE)
                med = {k: sorted(v)[len(v) // 2] if v else "refused" for k, v in times.items()}
                ratio = {k: f"{med['torch'] / med[k]:.2f}" if isinstance(med[k], float) else "-"
                         for k in ("jit", "aot")}
                lines.append(f"| {name} | {batch} | {t} | {ms(med['torch'])} | {ms(med['jit'])} "
                             f"| {ms(med['aot'])} | {ratio['jit']} | {ratio['aot']} |")
                print(lines[-1], flush=True)
    for s in servers.values():
        s.close()
    if refused:
        compile_lines += [""] + [f"- {name}: nest refuses it: {why[:300]}"
                                 for name, why in refused.items()]
    with open(out, "w") as f:
        f.write("\n".join(lines + compile_lines) + "\n")
    print("\n".join(compile_lines))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-torch"]:
        serve_torch()
    else:
        main()
